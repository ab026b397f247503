# torch_check.sh: sourced by the tests that compare a network's training
# step with PyTorch's (test_torch.sh, test_rnn.sh).  check KIND NETFILE
# CHOICE...: runs tests/torch_check.py (which says what is compared) with
# $PY on tests/torch_step ($TOOL), working in $W, and writes one TAP line a
# RESULT it prints.
check() { # check KIND NETFILE CHOICE...: runs torch_check.py, one TAP line per RESULT
    kind=$1 net=$2
    shift 2
    "$PY" "$top_srcdir/tests/torch_check.py" "$kind" "$net" "$W" "$TOOL" "$@" >"$W/$kind.log" 2>&1
    status=$?
    grep '^#' "$W/$kind.log"
    results=$(grep -c '^RESULT' "$W/$kind.log")
    if [ $status -ne 0 ] || [ "$results" -eq 0 ]; then
        tail -15 "$W/$kind.log" | grep -v '^#' | sed 's/^/#   /'
        tap_result 1 "$kind: torch_check.py ran (exit status $status)"
        return
    fi
    grep '^RESULT' "$W/$kind.log" | cut -d' ' -f2- >"$W/$kind.results"
    while read -r rc desc; do
        tap_result "$rc" "$desc"
    done <"$W/$kind.results"
}
