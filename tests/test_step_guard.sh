#!/bin/sh
# test_step_guard.sh: the step guards as a user meets them (issue 46):
# --skip-nonfinite (on by default) skips the update of a step whose loss or
# gradient is not finite, --skip-spikes Z:W one whose gradient norm is a
# spike, --max-skipped N stops a run that skips N in a row.  A NaN put into
# one rank's gradient at step 7 (--debug-poison-grad, a testing aid) on one
# process, dp=4, tp=2 x pp=2 and --zero 1: every rank skips step 7 and the
# weights equal one process's (within the grids' 1e-5); one process's equal,
# bit for bit, those of a run whose step 7 is skipped as a finite spike (so
# no NaN reached the weights or the optimizer's state), and differ from an
# untouched run's.  --metrics and TensorBoard count the skipped steps; the
# progress says why.  Without the guard the NaN reaches the weights and the
# run stops at the next step; a diverging run stops after N skipped steps
# with a checkpoint of finite weights; --skip-spikes is refused where ranks
# would judge apart (local SGD).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
VENV_PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
tap_plan 19
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --max-steps 20
    --limit-test 64"

run 1 nan-one $GPT --debug-poison-grad 7:0 --tensorboard "$T/tb"
tap_result $? "a NaN in the gradient at step 7: the run goes on to step 20"
grep -q "^step 7: update skipped: the gradient norm is nan (1 skipped so far)" "$T/nan-one.txt"
tap_result $? "  the progress says step 7 was skipped and why"
/usr/bin/python3 - "$T/nan-one.jsonl" <<'PY'
import json, math, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l]
ok = len(steps) == 20 and all("skipped" not in s for s in steps[:6])
ok = ok and all(s["skipped"] == (s["global_step"] == 7) and s["skipped_steps"] == 1 for s in steps[6:])
ok = ok and all(math.isfinite(s["loss"]) for s in steps) and steps[6].get("grad_norm") is None
print("# step 7: skipped %s, grad_norm %s" % (steps[6].get("skipped"), steps[6].get("grad_norm")))
sys.exit(0 if ok else 1)
PY
tap_result $? "  --metrics marks step 7 skipped (no norm) and counts one skipped step after it"
if [ -n "$VENV_PY" ] && $VENV_PY -c "import tensorboard" 2> /dev/null; then
    $VENV_PY "$top_srcdir/tests/check_tensorboard.py" compare "$T/tb" "$T/nan-one.jsonl" > "$T/tb.txt" 2>&1
    tap_result $? "  TensorBoard's curves are the JSON lines' (train/skipped among them)"
else
    tap_result 0 "# SKIP no TensorBoard in the virtual environment"
fi
run 1 clean-one $GPT
run 1 spike-one $GPT --debug-poison-grad 7:0:1e6 --skip-spikes 50:4
grep -q "^step 7: update skipped: a gradient norm spike (1e+06" "$T/spike-one.txt"
tap_result $? "a gradient of 1e6 at step 7 with --skip-spikes 50:4: skipped as a spike"
/usr/bin/python3 - "$T" <<'PY'
import sys
import numpy as np
T = sys.argv[1]
nan, spike, clean = (np.fromfile("%s/%s.bin" % (T, f), np.float32) for f in ("nan-one", "spike-one", "clean-one"))
print("# NaN skip vs spike skip: %g; vs no skip: %g" % (np.max(np.abs(nan - spike)), np.max(np.abs(nan - clean))))
sys.exit(0 if np.array_equal(nan, spike) and np.all(np.isfinite(nan)) and np.max(np.abs(nan - clean)) > 1e-4 else 1)
PY
tap_result $? "  the NaN run's weights equal the spike run's bit for bit (nothing of the NaN kept), not the untouched run's"

if command -v mpirun > /dev/null; then
    grid nan-dp4 nan-one 4 $GPT --debug-poison-grad 7:2
    grid nan-tp2-pp2 nan-one 4 $GPT --grid tp=2,pp=2 --debug-poison-grad 7:3
    grid nan-zero1 nan-one 4 $GPT --zero 1 --debug-poison-grad 7:1
    for r in nan-dp4 nan-tp2-pp2 nan-zero1; do
        [ "$(grep -c '^step 7: update skipped' "$T/$r.txt")" -eq 1 ] || { echo "# $r did not say it skipped step 7"; false; }
    done
    tap_result $? "  each says once that step 7 was skipped (rank 0 reports)"
    expect_status 2 "--skip-spikes with --consistency local-sgd:2" -- \
        timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $GPT --consistency local-sgd:2 --skip-spikes 3
    expect_output "--skip-spikes: with --consistency sync only" "  is refused"
else
    for i in 1 2 3 4 5 6; do tap_result 0 "# SKIP no mpirun"; done
fi

expect_status 1 "without the guard (--no-skip-nonfinite) the NaN reaches the weights" -- \
    $DLTRAIN $GPT --debug-poison-grad 7:0 --no-skip-nonfinite --quiet
expect_output "step 8: the loss is (nan|-nan)" "  and the run stops at step 8, the first loss computed from them"

D="$T/ck"
expect_status 1 "a diverging run (--lr 1e4) with --max-skipped 3" -- $DLTRAIN $GPT --lr 1e4 --max-skipped 3 \
    --checkpoint-dir "$D" --quiet
expect_output "steps ([0-9]+)-([0-9]+): 3 updates in a row skipped, the last for the (loss|gradient norm) is" \
    "  stops after 3 skipped steps in a row, saying why"
last=$(echo "$OUT" | sed -n 's/.*steps [0-9]*-\([0-9]*\): 3 updates.*/\1/p')
expect_output "the weights are those after step $((last - 3)), saved in the last checkpoint" \
    "  and that the checkpoint holds the weights of the last applied step"
/usr/bin/python3 - "$D" "$last" <<'PY'
import glob, json, struct, sys
import numpy as np
folder, last = sys.argv[1], int(sys.argv[2])
path = "%s/ckpt-%010d.safetensors" % (folder, last)
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
finite = all(np.all(np.isfinite(np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)))
             for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32")
print("# %s: %d tensors, all finite: %s" % (path.split("/")[-1], len(h) - 1, finite))
sys.exit(0 if finite else 1)
PY
tap_result $? "  that checkpoint (at the stop's step) loads as safetensors with every weight finite"
expect_status 0 "it resumes (and skips or goes on as the data says)" -- $DLTRAIN $GPT --lr 1e-3 \
    --resume "$D/ckpt-$(printf %010d "$last").safetensors" --max-steps $((last + 2)) --quiet
exit 0
