#!/bin/sh
# test_gpt_tiny.sh: nets/gpt-tiny.yaml (issue 28), a small GPT-2 of bytes,
# as a user runs it on real text (tests/text_corpus.sh): check counts its
# parameters by the formula of its five args, and --set args.* resizes it;
# heads that do not divide the width are refused, located; 300 steps bring
# the validation loss well below the text's unigram cross-entropy (computed
# here); the fc layers' -rows kernels (a batch's positions as one matrix)
# train as one GEMM per sample does; 2 data-parallel ranks train as one
# process.  Its gradients against
# PyTorch: test_torch.sh (gpt_tiny).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 15
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
NET="$top_srcdir/nets/gpt-tiny.yaml"
GPT="--net $NET --data $TEXT --threads 2"

# V C + context C + layers (2 layer norms, c_attn, c_proj, c_fc, c_proj) + ln_f; the head is the embedding
params() { # params VOCAB CONTEXT WIDTH LAYERS
    V=$1 X=$2 C=$3 L=$4
    echo $((V * C + X * C + L * (4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C))
}
expect_status 0 "check nets/gpt-tiny.yaml" -- $DLTRAIN check $GPT
expect_output "^network gpt-tiny .*: input 64 i32, 256 classes, 25 layers" "its args: a window of 64 bytes, 2 blocks"
expect_output "^total: $(params 256 64 64 2) trainable parameters" "parameters by the formula ($(params 256 64 64 2))"
expect_status 0 "--set args.layers=3 args.width=32" -- $DLTRAIN check $GPT --set args.layers=3 --set args.width=32
expect_output "^total: $(params 256 64 32 3) trainable parameters" "  resizes the whole network ($(params 256 64 32 3))"
expect_status 2 "--set args.heads=5" -- $DLTRAIN check $GPT --set args.heads=5
expect_output "gpt-tiny.yaml:[0-9]+:[0-9]+: layer 'h.0.attn.attn' \\(attention\\): heads 5 do not divide the width 64" \
    "  is refused, located at the attention layer"

# --debug-dump-batches (the testing aid of bench/compare-gpt-curve): each
# step's 16 windows of 64 byte ids, then their labels, the next bytes.
expect_status 0 "3 steps with --debug-dump-batches" -- $DLTRAIN $GPT --max-steps 3 --limit-test 64 --quiet \
    --debug-dump-batches "$T/batches.bin"
/usr/bin/python3 - "$T/batches.bin" "$TEXT" <<'PY'
import os, sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype=np.int32)
folder = sys.argv[2]
text = b"".join(open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder)) if f != "done")
ok = a.size == 3 * 2 * 16 * 64
if ok:
    b = a.reshape(3, 2, 16, 64)
    x, y = b[:, 0], b[:, 1]
    ok = (x[:, :, 1:] == y[:, :, :-1]).all() and 0 <= a.min() and a.max() < 256
    # every window is the text's: its 65 bytes found in the corpus
    ok = ok and all(bytes(x[s, i].astype(np.uint8)) + bytes([y[s, i, -1]]) in text for s in range(3) for i in range(16))
sys.exit(0 if ok else 1)
PY
tap_result $? "the dump holds 3 steps of 16 windows of the text and their labels, the next bytes"
expect_status 0 "300 steps of gpt-tiny" -- $DLTRAIN $GPT --max-steps 300 --limit-test 512 --metrics "$T/gpt.jsonl"
/usr/bin/python3 - "$TEXT" "$T/gpt.jsonl" <<'PY'
import json, math, os, sys
folder, metrics = sys.argv[1:3]
names = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f != "done")
text = b"".join(open(p, "rb").read() for p in names)
cut = len(text) - int(len(text) * 0.1)  # the dataset's validation split: the last tenth
train, val = text[:cut], text[cut:]
counts = [0] * 256
for b in train:
    counts[b] += 1
p = [(c + 1) / (len(train) + 256) for c in counts]
entropy = -sum(math.log(p[b]) for b in val) / len(val)
loss = [json.loads(l) for l in open(metrics) if '"test_loss"' in l][-1]["test_loss"]
print("# validation loss %.4f nats per byte after 300 steps; unigram cross-entropy %.4f" % (loss, entropy))
sys.exit(0 if loss < entropy - 0.5 else 1)
PY
tap_result $? "the validation loss is more than 0.5 nats below the unigram cross-entropy of the text"

ONE="--net $NET --data $TEXT --threads 1 --max-steps 20 --limit-test 64"
run 1 gpt1 $ONE
tap_result $? "20 steps of gpt-tiny on one thread (one GEMM per sample in its fc layers)"
# The fc layers with a batch's positions as one matrix (fc_rows.c): the
# same terms summed in another order, within the grid tolerances
for k in dnnl-gemm-rows openblas-rows; do
    run 1 "gpt-$k" $ONE --kernel "fc=$k" && compare "fc=$k" gpt1 "gpt-$k"
    tap_result $? "--kernel fc=$k: 20 steps' losses and the weights within 1e-5 of one GEMM per sample's"
done
if command -v mpirun >/dev/null 2>&1; then
    grid gpt-dp2 gpt1 2 $ONE
else
    echo "ok - # SKIP mpirun not found"
fi
[ $tap_failed -eq 0 ]
