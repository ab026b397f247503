#!/bin/sh
# test_text.sh: token inputs and text datasets (issue 27's first user),
# nets/bigram.yaml on real text (tests/text_corpus.sh: man pages rendered by
# man): check shows every tensor's dims and dtype; one epoch brings the
# validation loss below the text's unigram entropy (the best any model
# that ignores context can do, computed here from the training split's byte
# counts on the validation split); 2 data-parallel ranks train as one
# process (the windows' seeded shuffle is the same on any number of ranks);
# a byte outside the network's vocabulary is refused naming the file and
# its offset; the benchmarks draw token ids for it; a text dataset for an
# image network, and an image dataset for the token network, are refused
# saying what each side has.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 16
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
echo "# text: $TEXT_SOURCE ($(cat "$top_builddir"/tests/text-corpus/*.txt "$top_builddir"/tests/text-corpus/[A-Z]* 2>/dev/null | wc -c) bytes)"
TEXT="$top_builddir/tests/text-corpus"
BIGRAM="--net $top_srcdir/nets/bigram.yaml --data $TEXT --threads 1"

expect_status 0 "check nets/bigram.yaml on the text" -- $DLTRAIN check $BIGRAM
expect_output "^network bigram .*: input 64 i32, 256 classes" "the input: 64 token ids of dtype i32"
expect_output "^0 +wte +embedding +input +64x256 " "the embedding's output: 64 positions of 256 features"

expect_status 0 "one epoch of the bigram model" -- $DLTRAIN $BIGRAM --metrics "$T/bigram.jsonl"
/usr/bin/python3 - "$TEXT" "$T/bigram.jsonl" <<'PY'
import json, math, os, sys
folder, metrics = sys.argv[1:3]
names = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f != "done")
text = b"".join(open(p, "rb").read() for p in names)
cut = len(text) - int(len(text) * 0.1)  # the dataset's validation split: the last tenth
train, val = text[:cut], text[cut:]
counts = [0] * 256
for b in train:
    counts[b] += 1
p = [(c + 1) / (len(train) + 256) for c in counts]  # add-one: every byte of val has a probability
# the unigram model's cross-entropy on the validation split (nats per byte)
entropy = -sum(math.log(p[b]) for b in val) / len(val)
epochs = [json.loads(l) for l in open(metrics) if '"epoch"' in l and '"test_loss"' in l]
loss = epochs[-1]["test_loss"]
print("# validation loss %.4f nats per byte after one epoch; unigram cross-entropy %.4f" % (loss, entropy))
# and above 1 nat: the label is the next byte, which no model of the
# current one predicts nearly surely (the current byte itself would be)
sys.exit(0 if 1.0 < loss < entropy else 1)
PY
tap_result $? "the validation loss is below the unigram cross-entropy of the text, and above 1 nat"

# 2 data-parallel ranks as one process (30 steps: losses within 1e-5, weights)
if command -v mpirun >/dev/null 2>&1; then
    run 1 text1 $BIGRAM --max-steps 30 --limit-test 64 && grid text-dp2 text1 2 $BIGRAM --max-steps 30 --limit-test 64
else
    echo "ok - # SKIP mpirun not found"
fi

# The benchmarks' random batches hold token ids below the vocabulary (and
# a label per position): a step, and the layer times of --parallel hybrid
expect_status 0 "dltrain bench step on the token network" -- $DLTRAIN bench step --net "$top_srcdir/nets/bigram.yaml" --threads 1
expect_status 0 "dltrain plan measures the token network's layers" -- $DLTRAIN plan --net "$top_srcdir/nets/bigram.yaml" --ranks 2

# A byte the vocabulary does not have: the file and its offset
printf 'plain ascii text, then caf\303\251 and more text after it to make a window or two long enough\n' > "$T/cafe.txt"
sed 's/256/128/g' "$top_srcdir/nets/bigram.yaml" > "$T/bigram128.yaml"
expect_status 1 "a byte outside a 128-id vocabulary" -- $DLTRAIN --net "$T/bigram128.yaml" --data "$T/cafe.txt" --threads 1
expect_output "cafe.txt: byte 195 at offset 26 is not a token id below 128" "is named with its file and offset"

# Each side says what it has
expect_status 2 "a text dataset for an image network" -- $DLTRAIN check --net lenet5 --dataset text --data "$TEXT"
expect_output "a text dataset gives token ids \\[T\\] \\(i32\\).*the network reads 1x28x28" "says what each side has"
expect_status 2 "an image dataset for the token network" -- $DLTRAIN check --net bigram --dataset fashion-mnist
expect_output "the network reads 64 i32 with 64 labels per sample; fashion-mnist gives float inputs" "says what each side has"

# Token ids reach an embedding only
cat > "$T/ids-relu.yaml" <<'YAML'
input: {shape: [16], dtype: i32, classes: 4}
layers:
  - {name: act, type: relu}
  - {name: wte, type: embedding, vocab: 4, dim: 4}
loss: softmax_cross_entropy
YAML
expect_status 2 "token ids into a relu" -- $DLTRAIN check --net "$T/ids-relu.yaml"
expect_output "ids-relu.yaml:3:5: layer 'act' \\(relu\\): its input 'input' holds token ids \\(i32\\), which only an embedding reads" \
    "is refused, located"
