# grid_compare.sh: sourced by the shell tests of parallel training (after
# tap.sh, with T set to their folder): a run on some grid of ranks writes
# its per-step losses (metrics) and final weights (--dump-weights), and is
# compared with one process's: every step's loss within 1e-5 relative and
# the weights within 1e-5 of the largest weight.

# compare NAME REF RUN: losses and weights of run T/RUN against T/REF.
compare() {
    /usr/bin/python3 - "$T/$2" "$T/$3" "$1" <<'PY'
import json, sys
import numpy as np
ref, run, name = sys.argv[1:4]
a = np.array([json.loads(l)["loss"] for l in open(ref + ".jsonl") if '"step"' in l])
b = np.array([json.loads(l)["loss"] for l in open(run + ".jsonl") if '"step"' in l])
if len(a) != len(b) or len(a) < 20:
    print("# %s: %d steps against %d" % (name, len(b), len(a)))
    sys.exit(1)
rel = np.max(np.abs(a - b) / np.abs(a))
x, y = np.fromfile(ref + ".bin", dtype=np.float32), np.fromfile(run + ".bin", dtype=np.float32)
if x.size != y.size:
    print("# %s: %d weights against %d" % (name, y.size, x.size))
    sys.exit(1)
wd = np.max(np.abs(x - y)) / np.max(np.abs(x))
print("# %s: %d steps, max relative loss difference %.2g, weights %.2g" % (name, len(a), rel, wd))
sys.exit(0 if rel <= 1e-5 and wd <= 1e-5 else 1)
PY
}

# run RANKS OUT ARGS...: a training run (1 rank: no mpirun) writing T/OUT.jsonl and T/OUT.bin.
run() {
    n=$1 out=$2
    shift 2
    if [ "$n" -eq 1 ]; then
        $DLTRAIN "$@" --metrics "$T/$out.jsonl" --dump-weights "$T/$out.bin" > "$T/$out.txt" 2>&1
    else
        timeout 180 mpirun --oversubscribe -np "$n" $DLTRAIN "$@" --metrics "$T/$out.jsonl" \
            --dump-weights "$T/$out.bin" > "$T/$out.txt" 2>&1
    fi
    st=$?
    [ $st -ne 0 ] && sed 's/^/#   /' "$T/$out.txt" | head -8
    return $st
}

# grid NAME REF RANKS ARGS...: trains on a grid and compares with REF.
grid() {
    name=$1 ref=$2 n=$3
    shift 3
    run "$n" "$name" "$@" && compare "$name" "$ref" "$name"
    tap_result $? "$name: as one process"
}

