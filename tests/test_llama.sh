#!/bin/sh
# test_llama.sh: the LLaMA family's networks as a user meets them (issue
# 43): check counts Hugging Face's 134,515,008 parameters of SmolLM2-135M and
# 1,235,814,400 of Llama 3.2 1B (heads over grouped kv heads, SwiGLU, tied
# heads); nets/llama-tiny.yaml trains on text (its loss falls) and its
# grids equal one process within 1e-5 (grid_runs.sh): tensor parallelism
# on 2 ranks (q, k and v split by heads, kv heads one a rank; the rope
# layers between them and the attention turn each rank's heads: they
# follow the channel blocks), data x tensor on 4, a pipeline of 2; kv heads that do not divide the heads, an odd
# head dimension and tensor ranks that do not divide the kv heads each exit
# 2 naming the layer; check prints its model FLOPs per token (6 x the
# 90,112 weights of its products + 12 x 64 x 64 per attention layer:
# 638,976) and training reports MFU (progress line, --metrics), as does
# bench step.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 24
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
expect_status 0 "check llama-tiny on tp=2" -- $DLTRAIN check $LLAMA --grid tp=2
expect_output "^5 +model\\.layers\\.0\\.self_attn\\.q_rope +0 +follows channel blocks" \
    "  rope turns the rank's block of whole heads (no gather)"
# rope on 3 heads of 16 split over 2 ranks: 24 features a rank is no whole number of heads: gathered
cat > "$T/rope3.yaml" <<'YAML'
name: rope3
input: {shape: [32], dtype: i32, classes: 256}
data: {dataset: text}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 48}
  - {name: q, type: fc, units: 48}
  - {name: rope, type: rope, head_dim: 16}
  - {name: head, type: fc, units: 256}
loss: softmax_cross_entropy
YAML
expect_status 0 "check a rope of 3 heads on tp=2" -- $DLTRAIN check --net "$T/rope3.yaml" --data "$TEXT" --grid tp=2
expect_output "^2 +rope +0 +whole; input 0: gathered" "  it reads its input gathered: half of 3 heads is not whole heads"
expect_status 2 "4 tensor ranks over 2 kv heads" -- $DLTRAIN check $LLAMA --grid tp=4
expect_output "layer 'model.layers.0.self_attn.attn' \\(attention\\).*4 tensor ranks" \
    "  is refused, naming the attention layer"

expect_status 0 "check llama-tiny" -- $DLTRAIN check $LLAMA
expect_output "^model FLOPs per token: 639\\.0k " "  model FLOPs per token: 6 x 90,112 + 2 x 12 x 64 x 64 = 638,976"
expect_status 0 "bench step llama-tiny" -- $DLTRAIN bench step --net "$top_srcdir/nets/llama-tiny.yaml" --steps 2 --threads 1
expect_output "^MFU: [0-9.]+% \\([0-9]+ tokens/s x 6\\.39e\\+05 model FLOPs a token, of the sgemm peak\\)" \
    "  it reports MFU of the sgemm peak"

run 1 llama-one $LLAMA --log-every 10
tap_result $? "llama-tiny trains on text (20 steps)"
falls llama-one 20 0.5
tap_result $? "  its loss falls by more than 0.5 in 20 steps"
/usr/bin/python3 - "$T/llama-one.jsonl" "$T/llama-one.txt" <<'PY'
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
mfu = [s["mfu"] for s in steps if "mfu" in s]
shown = re.findall(r"MFU ([0-9.]+)%", open(sys.argv[2]).read())
print("# MFU %s in the metrics, %s%% on the progress lines" % (mfu[-1:], shown))
sys.exit(0 if len(mfu) == len(steps) and all(0 < m <= 1 for m in mfu) and len(shown) == 2 else 1)
PY
tap_result $? "  every step's MFU in --metrics (in (0, 1]) and on the progress lines"
grid llama-tp2 llama-one 2 $LLAMA --grid tp=2
grid llama-dp2-tp2 llama-one 4 $LLAMA --grid dp=2,tp=2
grid llama-pp2 llama-one 2 $LLAMA --grid pp=2
exit 0
