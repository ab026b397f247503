# mpi_tap.sh: sourced by the shell tests that run a C test program under
# mpirun (test_comm_mpi.sh, test_strategy_mpi.sh).  The program prints
# "ok - ..." / "not ok - ..." lines on rank 0 (tests/mpi_report.h);
# mpi_run numbers them into one TAP stream, a failed mpirun counting as one
# more failure, and mpi_done prints the plan.  Without MPI (no program, no
# mpirun) mpi_tap_init skips the whole test.
: "${top_builddir:=.}"
mpi_n=0
mpi_out=$(mktemp) || exit 1
trap 'rm -f "$mpi_out" "$mpi_out.run" "$mpi_out.res"' EXIT

# mpi_tap_init PROG: sets $mpi_prog, or prints a skip plan and exits.
mpi_tap_init() {
    mpi_prog=$1
    if [ ! -x "$mpi_prog" ] || ! command -v mpirun >/dev/null 2>&1; then
        echo "1..0 # SKIP no MPI"
        exit 0
    fi
}

mpi_emit() {
    mpi_n=$((mpi_n + 1))
    case $1 in
    "not ok"*) echo "not ok $mpi_n ${1#not ok }" ;;
    *) echo "ok $mpi_n ${1#ok }" ;;
    esac
}

# mpi_run P [ARGS...]: the program on P ranks (5 minutes at most).
mpi_run() {
    p=$1
    shift
    timeout 300 mpirun --oversubscribe -np "$p" "$mpi_prog" "$@" >"$mpi_out.run" 2>"$mpi_out"
    status=$?
    grep -E '^(ok|not ok) - ' "$mpi_out.run" >"$mpi_out.res"
    while IFS= read -r line; do
        mpi_emit "$line"
    done <"$mpi_out.res"
    grep '^#' "$mpi_out.run"
    rm -f "$mpi_out.res"
    if [ "$status" -ne 0 ]; then
        mpi_emit "not ok - P=$p mpirun exited with status $status"
        sed 's/^/# /' "$mpi_out" | head -20
    fi
}

mpi_done() {
    echo "1..$mpi_n"
}
