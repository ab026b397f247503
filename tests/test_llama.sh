#!/bin/sh
# test_llama.sh: the LLaMA family's networks as a user meets them (issue
# 43): check counts Hugging Face's 134,515,008 parameters of SmolLM2-135M and
# 1,235,814,400 of Llama 3.2 1B (heads over grouped kv heads, SwiGLU, tied
# heads); nets/llama-tiny.yaml trains on text (its loss falls) and its
# grids equal one process within 1e-5 (grid_runs.sh): tensor parallelism
# on 2 ranks (q, k and v split by heads, kv heads two a rank; the rope
# layers between them and the attention read them gathered), data x tensor
# on 4, a pipeline of 2; kv heads that do not divide the heads, an odd
# head dimension and tensor ranks that do not divide the kv heads each exit
# 2 naming the layer.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 15
. "$top_srcdir/tests/grid_runs.sh"

# check reads token files' headers: ids in llm.c's layouts, uint16 (SmolLM2's
# 49,152) and uint32 (Llama 3's 128,256: magic 20240801, version 7)
mkdir -p "$T/ids16" "$T/ids32"
/usr/bin/python3 -c "
import random, struct, sys
random.seed(1)
ids = [random.randrange(49152) for _ in range(4000)]
open(sys.argv[1], 'wb').write(struct.pack('<256i', 20240520, 1, len(ids), *[0] * 253) + struct.pack('<%dH' % len(ids), *ids))
ids = [random.randrange(128256) for _ in range(4000)]
open(sys.argv[2], 'wb').write(struct.pack('<256i', 20240801, 7, len(ids), *[0] * 253) + struct.pack('<%dI' % len(ids), *ids))
" "$T/ids16/train.bin" "$T/ids32/train.bin"

expect_status 0 "check nets/smollm2-135m.yaml" -- $DLTRAIN check --net "$top_srcdir/nets/smollm2-135m.yaml" \
    --data "$T/ids16"
expect_output "^total: 134515008 trainable parameters" "134,515,008 trainable parameters (Hugging Face's count)"
expect_status 0 "check nets/llama3.2-1b.yaml" -- $DLTRAIN check --net "$top_srcdir/nets/llama3.2-1b.yaml" \
    --data "$T/ids32"
expect_output "^total: 1235814400 trainable parameters" "1,235,814,400 trainable parameters (Hugging Face's count)"

text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
LLAMA="--net $top_srcdir/nets/llama-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"

expect_status 2 "kv_heads 3 of 4 heads" -- $DLTRAIN check $LLAMA --set args.kv_heads=3
expect_output "llama-tiny.yaml:[0-9]+:[0-9]+: layer 'model.layers.0.self_attn.attn' \\(attention\\).*kv_heads.*divisor of heads 4, found 3" \
    "  is refused, located at the attention layer"
expect_status 2 "an odd head dimension" -- $DLTRAIN check $LLAMA --set args.head_dim=15
expect_output "layer 'model.layers.0.self_attn.q_rope' \\(rope\\).*head_dim: expected an even number.*15" \
    "  is refused, located at the rope layer"
expect_status 2 "4 tensor ranks over 2 kv heads" -- $DLTRAIN check $LLAMA --grid tp=4
expect_output "layer 'model.layers.0.self_attn.attn' \\(attention\\).*4 tensor ranks" \
    "  is refused, naming the attention layer"

run 1 llama-one $LLAMA
tap_result $? "llama-tiny trains on text (20 steps)"
/usr/bin/python3 - "$T/llama-one.jsonl" <<'PY'
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"step"' in l]
print("# loss %.4f at step 1, %.4f at step %d" % (loss[0], loss[-1], len(loss)))
sys.exit(0 if len(loss) == 20 and loss[-1] < loss[0] - 0.5 else 1)
PY
tap_result $? "  its loss falls by more than 0.5 in 20 steps"
grid llama-tp2 llama-one 2 $LLAMA --grid tp=2
grid llama-dp2-tp2 llama-one 4 $LLAMA --grid dp=2,tp=2
grid llama-pp2 llama-one 2 $LLAMA --grid pp=2
exit 0
