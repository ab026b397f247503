#!/bin/sh
# test_gpt2.sh: nets/gpt2.yaml and nets/gpt2-medium.yaml as a user meets
# them (issue 28): check counts Hugging Face's 124,439,808 and 354,823,168
# trainable parameters (the head tied to the token embedding) and the usual
# 191.6 GFLOP per training step at 4 x 64 tokens; --context T sets the
# training window (args.context) below the 1024 positions; a window past
# them, heads that do not divide the width, and --context on a network
# without that argument each exit 2 with a message; two training steps of
# GPT-2 small on a corpus tokenized with GPT-2's BPE (when tools/deps
# fetched the vocabulary).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
tap_plan 13
# check needs token files to read the headers of: 4,000 ids in llm.c's layout
mkdir -p "$T/ids"
/usr/bin/python3 -c "
import random, struct, sys
random.seed(1); ids = [random.randrange(50257) for _ in range(4000)]
open(sys.argv[1], 'wb').write(struct.pack('<256i', 20240520, 1, len(ids), *[0] * 253) + struct.pack('<%dH' % len(ids), *ids))
" "$T/ids/train.bin"
GPT2="--net $top_srcdir/nets/gpt2.yaml --data $T/ids"

expect_status 0 "check nets/gpt2.yaml at --context 64" -- $DLTRAIN check $GPT2 --context 64
expect_output "^total: 124439808 trainable parameters, 15\.92G FLOPs per sample" \
    "124,439,808 trainable parameters (Hugging Face's count) and 15.92 GFLOP forward per sample: x 3 x 4 = 191 GFLOP a step"
expect_output "^network gpt2 .*: input 64 i32, 50257 classes" "the window is 64 tokens of GPT-2's 50,257"
expect_output "^tied: lm_head\.weight is wte\.weight" "the head is the token embedding"
expect_status 0 "check nets/gpt2-medium.yaml" -- $DLTRAIN check --net "$top_srcdir/nets/gpt2-medium.yaml" --data "$T/ids" --context 64
expect_output "^total: 354823168 trainable parameters" "354,823,168 trainable parameters"

expect_status 2 "a window past the 1024 positions" -- $DLTRAIN check $GPT2 --context 2000
expect_output "layer 'wpe' \(position_embedding\): the input has 2000 positions but the table has context 1024 rows" \
    "the message names the layer and both numbers"
expect_status 2 "heads that do not divide the width" -- $DLTRAIN check $GPT2 --set args.heads=5
expect_output "gpt2\.yaml:[0-9]+:[0-9]+: layer 'h\.0\.attn\.attn' \(attention\): heads 5 do not divide the width 768" \
    "the message says where and what"
expect_status 2 "--context on a network without args.context" -- $DLTRAIN check --net lenet5 --context 64
expect_output "--context 64: the network has no argument 'context' \(its args: none\)" "the message says so"

if [ -s "$top_srcdir/vocab/gpt2.tiktoken" ]; then
    text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text"; exit 1; }
    $DLTRAIN tokenize -o "$T/tok" "$top_builddir"/tests/text-corpus/*.txt >/dev/null 2>&1
    expect_status 0 "GPT-2 small: two steps at 2 x 32 tokens on the tokenized man pages" -- \
        $DLTRAIN --net "$top_srcdir/nets/gpt2.yaml" --data "$T/tok" --context 32 --batch 2 --max-steps 2 --limit-test 2
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n - GPT-2 small trains # SKIP no vocab/gpt2.tiktoken (tools/deps fetches it)"
fi
exit $((tap_failed > 0))
