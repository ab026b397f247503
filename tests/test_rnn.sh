#!/bin/sh
# test_rnn.sh: the recurrent layers as a user meets them (issue 47).
# PyTorch: an embedding, nn.LSTM or nn.GRU (one layer; two stacked and
# bidirectional) and a head at every position on windows of real text, one
# training step from the same weights on the same batch: every gradient and
# the evaluation logits within 4x PyTorch float32's distance to float64, with
# the default kernel (dnnl-gemm) and the reference (tests/torch_check.py;
# skipped without /usr/bin/python3's torch).
# nets/char-lstm.yaml has the parameters of its header, trains on the
# man-page text (its loss falls), and on 2 and 4 data-parallel ranks equals
# one process over 20 steps (a small one: two layers of 32 with dropout 0.2
# between them).  A hidden
# size of 0, rnn's nonlinearity on an lstm and an lstm on images exit 2
# naming the layer.  (tests/test_grad_rnn.c checks backpropagation through
# time against finite differences, rnn's tanh and relu included.)
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
W="$T"
tap_plan 31
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP $1"; }
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
NET="$top_srcdir/nets/char-lstm.yaml"
LSTM="--net $NET --data $TEXT --threads 1 --limit-test 32"

# ---------------------------------------------------------------- PyTorch
PY=/usr/bin/python3
TOOL="$top_builddir/tests/torch_step"
. "$top_srcdir/tests/torch_check.sh"
rnn_net() { # rnn_net NAME TYPE HIDDEN LAYERS BIDIRECTIONAL T: the network torch_check.py's BigramRNN is
    cat >"$W/$1.yaml" <<YAML
name: $1
input: {shape: [$6], dtype: i32, classes: 256}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 16}
  - {name: rnn, type: $2, hidden: $3, layers: $4, bidirectional: $5}
  - {name: head, type: fc, units: 256}
loss: softmax_cross_entropy
train: {batch: 8, seed: 5}
YAML
}
if [ -x "$PY" ] && "$PY" -c 'import numpy, torch' 2>/dev/null; then
    cat "$TEXT"/*.txt >"$W/text"
    rnn_net bigram_lstm lstm 24 1 false 24
    rnn_net bigram_lstm2 lstm 12 2 true 13
    rnn_net bigram_gru gru 24 1 false 24
    rnn_net bigram_gru2 gru 12 2 true 13
    for kind in bigram_lstm bigram_lstm2 bigram_gru bigram_gru2; do
        DLTRAIN_TEXT="$W/text" check $kind "$W/$kind.yaml" default all=reference
    done
else
    for i in $(seq 16); do skip "/usr/bin/python3 with torch is not installed"; done
fi

# ---------------------------------------------------------------- char-lstm
expect_status 0 "check nets/char-lstm.yaml" -- $DLTRAIN check $LSTM
# embedding 256 x 64; LSTM 4 x 128 x (64 + 128) + 2 x 4 x 128; head 128 x 256 + 256
expect_output "^total: 148736 trainable parameters" "  148,736 trainable parameters (its header's count)"
expect_output "^1 +lstm +lstm +embed +64x128 " "  its lstm layer: the hidden state [T, H] at each of 64 steps"
expect_status 0 "--set args.layers=2 args.hidden=32" -- $DLTRAIN check $LSTM --set args.layers=2 --set args.hidden=32
# embedding; LSTM 4 x 32 x (64 + 32) + 4 x 32 x (32 + 32) + 2 layers x 2 biases x 4 x 32; head 32 x 256 + 256
expect_output "^total: $((16384 + 12288 + 8192 + 2 * 2 * 128 + 8448)) trainable parameters" "  a stack of two: PyTorch's num_layers"
expect_status 2 "hidden: 0" -- $DLTRAIN check $LSTM --set args.hidden=0
expect_output "char-lstm.yaml:[0-9]+:[0-9]+: layer 'lstm' \\(lstm\\).*hidden" "  is refused, located at the layer"
cat >"$T/bad.yaml" <<'YAML'
input: {shape: [1, 8, 8], classes: 4}
data: {dataset: synthetic, train_samples: 64, test_samples: 16}
layers:
  - {name: seq, type: lstm, hidden: 4, nonlinearity: relu}
loss: softmax_cross_entropy
YAML
expect_status 2 "an lstm with rnn's nonlinearity" -- $DLTRAIN check --net "$T/bad.yaml"
expect_output "layer 'seq' \\(lstm\\).*nonlinearity" "  is refused, naming the layer and the key"
sed -i 's/, nonlinearity: relu//' "$T/bad.yaml"
expect_status 2 "an lstm on images" -- $DLTRAIN check --net "$T/bad.yaml"
expect_output "layer 'seq' \\(lstm\\).*expected a sequence \\[T, C\\].*1x8x8" "  is refused: a sequence expected"

run 1 lstm-text $LSTM --max-steps 20 --log-every 10
tap_result $? "char-lstm trains on text (20 steps)"
falls lstm-text 20 1.5
tap_result $? "  its loss falls by more than 1.5 in 20 steps"

# data parallelism: each rank's share of the batch through the same weights
# (two layers with dropout between them: the masks drawn by each sample's place)
SMALL="$LSTM --set args.hidden=32 --set args.layers=2 --set args.dropout=0.2 --context 24 --batch 8 --max-steps 20"
if command -v mpirun >/dev/null 2>&1; then
    run 1 small-one $SMALL
    grid lstm-dp2 small-one 2 $SMALL --grid dp=2
    grid lstm-dp4 small-one 4 $SMALL --grid dp=4
else
    skip "mpirun is not installed"
    skip "mpirun is not installed"
fi
exit 0
