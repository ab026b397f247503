#!/bin/sh
# test_clip.sh: gradient-norm clipping (--clip-grad-norm, train.clip_grad_norm;
# issue 28's training recipe) on LeNet-5 and Fashion-MNIST.  The gradient
# is read independently of the norm dltrain reports: with plain SGD one step
# moves the weights by lr g, so g = w(lr 1) - w(lr 2) from two runs, and
# w0 = 2 w(lr 1) - w(lr 2).  Then: the metrics' grad_norm is ||g||; with
# the limit at half of it the step is g scaled by limit / ||g||; a limit
# above it changes nothing.  On a grid (tp=2 x pp=2, where layer weights
# are split, kept whole on both tensor ranks, or on another stage) and on 2
# data-parallel ranks the clipped training equals one process's, every step
# (conv1 kept whole on both tensor ranks, so its weights count once).
# A parameter server refuses it.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 8
if ! [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    for i in 1 2 3 4 5 6 7 8; do echo "ok $i # SKIP Fashion-MNIST (Debian dataset-fashion-mnist) is not installed"; done
    exit 0
fi
SGD="--net $top_srcdir/nets/lenet5.yaml --limit-train 640 --limit-test 64 --threads 1 --optimizer sgd --momentum 0
     --schedule constant --max-steps 1"
$DLTRAIN $SGD --lr 1 --dump-weights "$T/lr1.bin" --metrics "$T/lr1.jsonl" > "$T/lr1.txt" 2>&1 &&
    $DLTRAIN $SGD --lr 2 --dump-weights "$T/lr2.bin" > "$T/lr2.txt" 2>&1 &&
    $DLTRAIN $SGD --lr 1 --clip-grad-norm 1e9 --dump-weights "$T/loose.bin" --metrics "$T/loose.jsonl" > "$T/loose.txt" 2>&1
tap_result $? "one SGD step at lr 1 and 2, and with a limit far above the norm"
cmp -s "$T/lr1.bin" "$T/loose.bin"
tap_result $? "a limit above the norm changes nothing (the same weights, bit for bit)"
norm=$(/usr/bin/python3 -c "
import json
print([json.loads(l) for l in open('$T/loose.jsonl') if '\"step\"' in l][0]['grad_norm'])")
/usr/bin/python3 - "$T" "$norm" <<'PY'
import sys
import numpy as np
T, norm = sys.argv[1], float(sys.argv[2])
w1, w2 = (np.fromfile("%s/%s.bin" % (T, n), dtype=np.float32).astype(np.float64) for n in ("lr1", "lr2"))
g = w1 - w2
print("# ||g|| from the weights %.6g, grad_norm in the metrics %.6g" % (np.linalg.norm(g), norm))
sys.exit(0 if abs(np.linalg.norm(g) / norm - 1) < 1e-4 else 1)
PY
tap_result $? "the metrics' grad_norm is the norm of the step's gradient"
half=$(/usr/bin/python3 -c "print($norm / 2)")
$DLTRAIN $SGD --lr 1 --clip-grad-norm "$half" --dump-weights "$T/clip.bin" > "$T/clip.txt" 2>&1
/usr/bin/python3 - "$T" "$half" <<'PY'
import sys
import numpy as np
T, limit = sys.argv[1], float(sys.argv[2])
w1, w2, wc = (np.fromfile("%s/%s.bin" % (T, n), dtype=np.float32).astype(np.float64) for n in ("lr1", "lr2", "clip"))
g, w0 = w1 - w2, 2 * w1 - w2
want = w0 - limit / np.linalg.norm(g) * g
step = np.linalg.norm(w0 - wc)
d = np.max(np.abs(wc - want)) / np.max(np.abs(g))
print("# clipped step's norm %.6g (limit %.6g); largest difference from w0 - limit g / ||g||: %.2g of max |g|"
      % (step, limit, d))
sys.exit(0 if abs(step / limit - 1) < 1e-3 and d < 1e-4 else 1)
PY
tap_result $? "with the limit at half the norm, the step is the gradient scaled to the limit"

if command -v mpirun >/dev/null 2>&1; then
    LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 64 --threads 1 --max-steps 20
           --clip-grad-norm 0.05"
    run 1 clip1 $LENET && /usr/bin/python3 -c "
import json, sys
n = [json.loads(l)['grad_norm'] for l in open('$T/clip1.jsonl') if '\"step\"' in l]
print('# one process: gradient norms %.3g to %.3g, clipped to 0.05 at every step' % (min(n), max(n)))
sys.exit(0 if min(n) > 0.05 else 1)" && grid clip-grid clip1 4 $LENET --grid tp=2,pp=2 \
            --set layers.conv1.split=none
    run 2 clip-dp2 $LENET && compare clip-dp2 clip1 clip-dp2
    tap_result $? "clip-dp2: as one process"
    expect_status 2 "a parameter server" -- \
        timeout 60 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --consistency async
    expect_output "--clip-grad-norm: the parameter server .* applies each worker's gradient on its own" "  refuses it"
else
    for i in 5 6 7 8; do echo "ok $i # SKIP mpirun not found"; done
fi
[ $tap_failed -eq 0 ]
