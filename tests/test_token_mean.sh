#!/bin/sh
# test_token_mean.sh: a loss that ignores a label is the mean over the
# labelled positions of the whole mini-batch (PyTorch's
# CrossEntropyLoss(ignore_index=..., reduction='mean') over every token),
# however the batch is cut: the trainer counts the global batch's labelled
# positions and every loss call divides by them (ops/softmax_xent.h).  On
# the man pages, with the space (byte 32) ignored, so that windows hold
# uneven numbers of labels:
# - each step's loss and the test loss equal numpy's mean over the
#   batch's, or the test split's, non-space labels, from the same weights
#   and batches (lr 0, --debug-dump-batches), and each step's accuracy
#   counts no ignored position as right;
# - the bigram model in 4 chunks (gradient accumulation) and on 2
#   data-parallel ranks, and gpt-tiny on tp=2 (the vocabulary-parallel
#   loss) and pp=2 (chunks on the last stage), equal one process: every
#   step's loss within 1e-5 relative, the weights within 1e-5
#   (grid_runs.sh); a per-chunk mean would differ.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 8
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
IGNORE="--set loss.ignore_index=32"
BIGRAM="--net $top_srcdir/nets/bigram.yaml --data $TEXT --threads 1 --batch 8 --max-steps 20 --limit-test 64 $IGNORE"

expect_status 0 "the bigram model, space ignored, lr 0: 3 steps with their batches dumped" -- \
    $DLTRAIN $BIGRAM --max-steps 3 --lr 0 --metrics "$T/lr0.jsonl" --dump-weights "$T/lr0.bin" \
    --debug-dump-batches "$T/lr0.batches"
/usr/bin/python3 - "$T" "$TEXT" <<'PY'
import json, os, sys
import numpy as np
T, folder = sys.argv[1], sys.argv[2]
W = np.fromfile(T + "/lr0.bin", dtype=np.float32).reshape(256, 256).astype(np.float64)
def token_mean(x, y):  # the bigram's scores of x's next byte are W[x]
    z = W[x]
    m = z.max(-1, keepdims=True)
    nll = np.log(np.exp(z - m).sum(-1)) + m[..., 0] - np.take_along_axis(z, y[..., None], -1)[..., 0]
    keep = y != 32
    return nll[keep].sum() / keep.sum(), keep.sum(axis=-1)
b = np.fromfile(T + "/lr0.batches", dtype=np.int32).reshape(3, 2, 8, 64)
lines = [json.loads(l) for l in open(T + "/lr0.jsonl") if '"step"' in l]
steps = [l["loss"] for l in lines]
worst, counts, acc = 0, set(), 0
for s in range(3):
    want, per_window = token_mean(b[s, 0], b[s, 1])
    counts |= set(per_window.tolist())
    worst = max(worst, abs(steps[s] - want) / want)
    # accuracy: the best class right at a labelled position, over every position
    hit = (W[b[s, 0]].argmax(-1) == b[s, 1]) & (b[s, 1] != 32)
    acc = max(acc, abs(lines[s]["accuracy"] - hit.sum() / hit.size))
text = b"".join(open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder)))
ids = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
cut = len(ids) - int(len(ids) * 0.1)  # the test split: the last tenth, 64 windows of 64 + 1
x = np.stack([ids[cut + i * 64:cut + i * 64 + 64] for i in range(64)])
y = np.stack([ids[cut + i * 64 + 1:cut + i * 64 + 65] for i in range(64)])
test = [json.loads(l)["test_loss"] for l in open(T + "/lr0.jsonl") if '"test_loss"' in l][-1]
want, _ = token_mean(x, y)
print("# labelled positions a window: %s; steps within %.2g of numpy, test loss %.8g against %.8g, "
      "accuracies within %.2g" % (sorted(counts), worst, test, want, acc))
sys.exit(0 if len(counts) > 1 and worst < 1e-6 and abs(test - want) / want < 1e-6 and acc < 1e-9 else 1)
PY
tap_result $? "each step's loss and the test loss are numpy's mean over the non-space labels"

run 1 bigram-one $BIGRAM
grid bigram-chunks bigram-one 1 $BIGRAM --pipeline-chunks 4
grid bigram-dp2 bigram-one 2 $BIGRAM
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64 $IGNORE"
run 1 gpt-one $GPT
tap_result $? "gpt-tiny, space ignored, on one process"
grid gpt-tp2 gpt-one 2 $GPT --grid tp=2
grid gpt-pp2 gpt-one 2 $GPT --grid pp=2
expect_status 2 "an ignore_index past the accepted range" -- $DLTRAIN check $BIGRAM --set loss.ignore_index=2000000
exit $((tap_failed > 0))
