# tap.sh: sourced by the shell tests.  Tiny TAP producer: plan, ok/not ok
# with a description, and helpers that run dltrain and check its output.
# Expects $top_builddir and $top_srcdir from the test harness (tests/local.mk).
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
DLTRAIN="$top_builddir/dltrain"
tap_n=0
tap_failed=0
TMPDIR_TEST=$(mktemp -d "${TMPDIR:-/tmp}/dltrain-test.XXXXXX")
trap 'rm -rf "$TMPDIR_TEST"' EXIT

tap_plan() { echo "1..$1"; }

# ok CONDITION-EXIT-STATUS DESCRIPTION
tap_result() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        tap_failed=$((tap_failed + 1))
    fi
}

# expect_status WANT DESCRIPTION -- command...: runs the command, captures
# its stdout in $STDOUT, its stderr in $STDERR and both in $OUT (stdout,
# then stderr: for expect_output's patterns), passes when the exit status is
# WANT.  Whatever parses or compares whole outputs reads $STDOUT (or
# $STDERR): a notice that a machine prints must not enter it.
expect_status() {
    want=$1; desc=$2; shift 3
    STDOUT=$("$@" 2> "$TMPDIR_TEST/.stderr"); got=$?
    STDERR=$(cat "$TMPDIR_TEST/.stderr")
    if [ -n "$STDOUT" ] && [ -n "$STDERR" ]; then
        OUT="$STDOUT
$STDERR"
    else
        OUT="$STDOUT$STDERR"
    fi
    if [ "$got" -ne "$want" ]; then
        echo "# exit status $got, expected $want: $*"
        echo "$OUT" | head -20 | sed 's/^/#   /'
    fi
    [ "$got" -eq "$want" ]; tap_result $? "$desc"
}

# expect_output PATTERN DESCRIPTION: grep -E PATTERN in $OUT.
expect_output() {
    if echo "$OUT" | grep -Eq -- "$1"; then
        tap_result 0 "$2"
    else
        echo "# output lacks /$1/:"
        echo "$OUT" | head -20 | sed 's/^/#   /'
        tap_result 1 "$2"
    fi
}

# skip_without_mpirun: the whole test is skipped (1..0 # SKIP) unless
# mpirun and a working dltrain are there.
skip_without_mpirun() {
    if [ ! -x "$(command -v mpirun)" ] || ! "$DLTRAIN" --help >/dev/null 2>&1; then
        echo "1..0 # SKIP mpirun or dltrain not available"; exit 0
    fi
}

# wait_steps FILE N: waits (at most a minute) until the metrics file FILE
# of a run in progress has N steps.
wait_steps() {
    for i in $(seq 1 1200); do
        [ "$(grep -c '"step"' "$1.partial" 2>/dev/null)" -ge "$2" ] 2>/dev/null && break
        sleep 0.05
    done
}

# stop_after FILE N SIGNAL PID: sends SIGNAL once the metrics file has N
# steps.  The run was started with --debug-hold-at-step N, so it waits there
# for the signal (it cannot finish first) and stops after step N + 1.
stop_after() {
    wait_steps "$1" "$2"
    kill -"$3" "$4"
}
