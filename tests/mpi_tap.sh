# mpi_tap.sh: sourced by the tests that run a C program under mpirun
# (test_comm_mpi.sh, test_exec_mpi.sh).  The program prints "ok - ..." and
# "not ok - ..." lines on rank 0; mpi_tap_run numbers them into one TAP
# stream, and a failing mpirun becomes a "not ok" with its output.  Call
# mpi_tap_end to print the plan.  Without the program or mpirun the whole
# test is skipped.
# Usage: . mpi_tap.sh PROG; mpi_tap_run P [ARGS...]; ...; mpi_tap_end
mpi_prog=$1
if [ ! -x "$mpi_prog" ] || ! command -v mpirun >/dev/null 2>&1; then
    echo "1..0 # SKIP no MPI"
    exit 0
fi
mpi_out=$(mktemp) || exit 1
trap 'rm -f "$mpi_out" "$mpi_out.run" "$mpi_out.res"' EXIT
mpi_n=0

mpi_tap_emit() {
    mpi_n=$((mpi_n + 1))
    case $1 in
    "not ok"*) echo "not ok $mpi_n ${1#not ok }" ;;
    *) echo "ok $mpi_n ${1#ok }" ;;
    esac
}

# mpi_tap_run P [ARGS...]: the program on P ranks (oversubscribed).
mpi_tap_run() {
    p=$1
    shift
    timeout 300 mpirun --oversubscribe -np "$p" "$mpi_prog" "$@" >"$mpi_out.run" 2>"$mpi_out"
    status=$?
    grep -E '^(ok|not ok) - ' "$mpi_out.run" >"$mpi_out.res"
    while IFS= read -r line; do
        mpi_tap_emit "$line"
    done <"$mpi_out.res"
    rm -f "$mpi_out.res"
    if [ "$status" -ne 0 ]; then
        mpi_tap_emit "not ok - P=$p mpirun exited with status $status"
        sed 's/^/# /' "$mpi_out" | head -20
    fi
}

mpi_tap_end() {
    echo "1..$mpi_n"
}
