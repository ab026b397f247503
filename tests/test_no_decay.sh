#!/bin/sh
# test_no_decay.sh: train.optimizer.no_decay (issue 28's AdamW recipe:
# decoupled weight decay not applied to biases, layer-norm and embedding
# weights).  gpt-tiny takes one AdamW step (lr 0.1, weight decay 0.5) three
# ways from the same start: with lr 0 (the start w0), decaying everything
# (A) and leaving out [bias, norm, embedding] (B).  As AdamW is w(1 - lr wd)
# - lr u, B - A must be lr wd w0 on exactly the left-out tensors (biases,
# layer norms, wte, wpe; the tied head is wte) and 0 on every other; check
# prints the setting; LeNet-5's 20 SGD steps on 2 pipeline ranks (each its
# stage's weights) equal one process's; an
# unknown kind and the parameter server are refused.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 8
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --limit-test 16
     --set train.optimizer.weight_decay=0.5 --set train.schedule.type=constant --set train.schedule.warmup_epochs=0"
ND="--set train.optimizer.no_decay=[bias,norm,embedding]"

expect_status 0 "check shows the setting" -- $DLTRAIN check $GPT $ND
expect_output "train\.optimizer: type adamw, .*weight_decay 0\.5, no_decay \[bias, norm, embedding\]" "  no_decay [bias, norm, embedding]"
$DLTRAIN $GPT --lr 0.1 --set train.optimizer.weight_decay=0 --max-steps 1 --checkpoint-dir "$T/w0" \
    --checkpoint-every 1 --quiet >/dev/null 2>&1 &&
    W0=$(ls "$T"/w0/ckpt-*.safetensors) &&
    $DLTRAIN $GPT --lr 0.1 --max-steps 2 --resume "$W0" --checkpoint-dir "$T/a" --checkpoint-every 1 --quiet \
        >/dev/null 2>&1 &&
    $DLTRAIN $GPT $ND --lr 0.1 --max-steps 2 --resume "$W0" --checkpoint-dir "$T/b" --checkpoint-every 1 --quiet \
        >/dev/null 2>&1
tap_result $? "from one step's weights w0 (biases no longer 0), a second step decaying everything and one leaving out biases, norms and embeddings"
/usr/bin/python3 - "$top_srcdir/tests" "$T" <<'PY'
import glob, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch_check as tc
w0, a, b = (tc.st_read(sorted(glob.glob("%s/%s/ckpt-*.safetensors" % (sys.argv[2], d)))[-1]) for d in ("w0", "a", "b"))
left_out, decayed, bad = [], [], []
for name in w0:
    if name.startswith(("optim.", "rng.")):
        continue
    x0, xa, xb = (np.array(t[name], dtype=np.float64) for t in (w0, a, b))
    out = name.endswith(".bias") or ".ln_" in name or name.startswith(("ln_f.", "wte.", "wpe."))
    if out:
        want = 0.1 * 0.5 * x0
        ok = np.max(np.abs((xb - xa) - want)) <= 1e-6 * max(1.0, np.max(np.abs(x0))) and np.any(want != 0)
        left_out.append(name)
    else:
        ok = np.array_equal(xa, xb)
        decayed.append(name)
    if not ok:
        bad.append(name)
print("# left out: %d tensors (%s ...), decayed: %d (%s ...)" % (len(left_out), ", ".join(left_out[:4]),
      len(decayed), ", ".join(decayed[:3])))
if bad:
    print("# wrong: %s" % bad)
sys.exit(0 if not bad and len(left_out) == 2 * 8 + 4 and decayed else 1)
PY
tap_result $? "B - A is lr wd w0 on exactly the biases, layer norms and embeddings, 0 elsewhere"
if command -v mpirun >/dev/null 2>&1; then
    LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 64 --threads 1 --max-steps 20
           --weight-decay 0.05 --set train.optimizer.no_decay=[bias]"
    run 1 nd1 $LENET && run 2 nd-pp2 $LENET --grid pp=2 && compare nd-pp2 nd1 nd-pp2
    tap_result $? "LeNet-5 (SGD, L2 decay but not on biases): 20 steps on 2 pipeline ranks as one process"
    expect_status 2 "a parameter server" -- \
        timeout 60 mpirun --oversubscribe -np 2 $DLTRAIN $GPT $ND --max-steps 2 --consistency async
    expect_output "no_decay: the parameter server .* decays every weight" "  refuses it"
else
    for i in 5 6 7; do echo "ok $i # SKIP mpirun not found"; done
fi
expect_status 2 "an unknown kind" -- $DLTRAIN check $GPT --set "train.optimizer.no_decay=[bias,weights]"
exit $((tap_failed > 0))
