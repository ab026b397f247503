# grid_runs.sh: sourced by the shell tests that train on a grid of ranks
# and compare with one process (test_hybrid.sh, test_schedules_mpi.sh,
# test_split.sh, test_gpt_grid.sh, test_zero.sh, ...):
# runs writing losses (metrics) and final weights (--dump-weights) to $T,
# their comparison (every step's loss within 1e-5 relative, weights within
# 1e-5 of the largest), a resumed run's against the uninterrupted one, and
# the small ResNet both tests train.  Expects
# tap.sh sourced and T set.

# compare NAME REF RUN: losses and weights of run T/RUN against T/REF (the
# weights within $WEIGHTS_TOL of the largest where a test sets it, else 1e-5).
compare() {
    /usr/bin/python3 - "$T/$2" "$T/$3" "$1" "${WEIGHTS_TOL:-1e-5}" <<'PY'
import json, sys
import numpy as np
ref, run, name = sys.argv[1:4]
wtol = float(sys.argv[4])
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
sys.exit(0 if rel <= 1e-5 and wd <= wtol else 1)
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

# resumed REF RUN: run T/RUN, resumed from a checkpoint, continues run T/REF:
# their last 10 steps' losses within 1e-5 relative, their final weights
# within 1e-5 of the largest (the grid tolerances).
resumed() {
    /usr/bin/python3 - "$T" "$1" "$2" "${WEIGHTS_TOL:-1e-5}" <<'PY'
import json, sys
import numpy as np
T, ref, name = sys.argv[1:4]
wtol = float(sys.argv[4])
a = [json.loads(l)["loss"] for l in open(T + "/" + ref + ".jsonl") if '"step"' in l]
b = [json.loads(l)["loss"] for l in open(T + "/" + name + ".jsonl") if '"step"' in l]
x, y = np.fromfile(T + "/" + ref + ".bin", np.float32), np.fromfile(T + "/" + name + ".bin", np.float32)
rel = max(abs(p - q) / abs(p) for p, q in zip(a[-10:], b[-10:]))
wd = np.max(np.abs(x - y)) / np.max(np.abs(x))
print("# %s: the last 10 steps within %.2g relative, weights %.2g" % (name, rel, wd))
sys.exit(0 if len(b) >= 10 and rel <= 1e-5 and wd <= wtol else 1)
PY
}

# falls RUN STEPS DROP: run T/RUN logged STEPS steps and its loss fell by
# more than DROP from the first to the last.
falls() {
    /usr/bin/python3 - "$T/$1.jsonl" "$2" "$3" <<'PY'
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"step"' in l]
print("# loss %.4f at step 1, %.4f at step %d" % (loss[0], loss[-1], len(loss)))
sys.exit(0 if len(loss) == int(sys.argv[2]) and loss[-1] < loss[0] - float(sys.argv[3]) else 1)
PY
}

# grid NAME REF RANKS ARGS...: trains on a grid and compares with REF.
grid() {
    name=$1 ref=$2 n=$3
    shift 3
    run "$n" "$name" "$@" && compare "$name" "$ref" "$name"
    tap_result $? "$name: as one process"
}

# lenet_grid and lenet_resumed: grid and resumed with LeNet-5's weights within 1e-4 of the
# largest, not 1e-5 (test_zero.sh, test_zero3.sh): AdamW's steps on near-zero gradients amplify
# the rounding of the batch's gradient summed in parts, to 2.6e-6 of the largest weight with
# oneDNN's AVX-512 kernels and 2.7e-5 with its AVX2 ones (the losses stay within 1e-5)
lenet_grid() { WEIGHTS_TOL=1e-4; grid "$@"; lenet_st=$?; WEIGHTS_TOL=; return $lenet_st; }
lenet_resumed() { WEIGHTS_TOL=1e-4; resumed "$@"; lenet_st=$?; WEIGHTS_TOL=; return $lenet_st; }

# small_resnet FILE: a small ResNet on synthetic data: batch norm, a
# residual block whose skip adds the stem's output, and a projection
# shortcut (16 layers before the loss).
small_resnet() {
    cat > "$1" <<'YAML'
input: {shape: [3, 16, 16], classes: 5}
data: {dataset: synthetic, train_samples: 640, test_samples: 64}
layers:
  - {name: stem, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
  - {name: stem_bn, type: batchnorm}
  - {name: stem_act, type: relu}
  - {name: a1, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
  - {name: a1_bn, type: batchnorm}
  - {name: a1_act, type: relu}
  - {name: a2, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
  - {name: a2_bn, type: batchnorm}
  - {name: a_add, type: add, inputs: [a2_bn, stem_act]}
  - {name: a_act, type: relu}
  - {name: down, type: conv, filters: 16, kernel: 3, stride: 2, pad: 1}
  - {name: proj, type: conv, filters: 16, kernel: 1, stride: 2, inputs: [a_act]}
  - {name: b_add, type: add, inputs: [down, proj]}
  - {name: b_act, type: relu}
  - {name: gap, type: global_avgpool}
  - {name: head, type: fc, units: 5}
loss: softmax_cross_entropy
train: {batch: 32, epochs: 1, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
}
