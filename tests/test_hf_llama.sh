#!/bin/sh
# test_hf_llama.sh: Hugging Face's LlamaForCausalLM both ways (issue 43),
# with transformers (4.40 on Debian's torch 1.13; tools/deps installs it):
# - `dltrain export -o DIR` of a trained llama-tiny checkpoint writes
#   config.json and model.safetensors that from_pretrained loads with no key
#   missing, unexpected or mismatched; its logits on four windows equal
#   those of tests/torch_check.py's LlamaTiny (the model test_torch.sh ties
#   to dltrain) on the same weights, and its greedy continuations of five
#   prompts equal dltrain generate's;
# - the other way, a random untied LlamaForCausalLM (4 heads over 2 kv
#   heads) that save_pretrained wrote in four shards drives `dltrain generate
#   --init-from DIR` (the index's shards, config.json checked) to its own
#   greedy continuations, and `dltrain --init-from DIR` trains from exactly
#   those weights (a step at lr 0, exported back bit for bit);
# - a config.json that disagrees with the network (kv heads, tying) is
#   refused naming the key and both values, a tensor of another shape naming
#   the tensor; a network with Llama 3's rope scaling exports it in
#   config.json's rope_scaling.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/hf_saved.sh"
T="$TMPDIR_TEST"
tap_plan 16
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if ! "$PY" -c "import transformers, torch" 2>/dev/null; then
    for i in $(seq 1 16); do echo "ok $i # SKIP no transformers in $PY (tools/deps installs it)"; done
    exit 0
fi
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
LLAMA="--net $top_srcdir/nets/llama-tiny.yaml --data $TEXT --threads 1"
hf_prompts "$TEXT"

# dltrain -> Hugging Face
expect_status 0 "train llama-tiny 300 steps with a checkpoint" -- \
    $DLTRAIN $LLAMA --max-steps 300 --checkpoint-dir "$T/ckpt" --checkpoint-every 300 --quiet
expect_status 0 "export it to a folder" -- $DLTRAIN export $LLAMA --checkpoint "$T/ckpt" -o "$T/out"
expect_output "Hugging Face LLaMA layout" "  in Hugging Face's LLaMA layout"
for k in 0 1 2 3 4; do
    $DLTRAIN generate $LLAMA --checkpoint "$T/ckpt" --prompt "$(cat "$T/p$k")" --max-tokens 24 --temperature 0 \
        --no-cache > "$T/d$k" 2>/dev/null
done
"$PY" - "$T" "$top_srcdir/tests" "$TEXT" <<'PY'
import glob, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import numpy as np
import torch
from transformers import LlamaForCausalLM
from hf import greedy
import torch_check as tc
m, info = LlamaForCausalLM.from_pretrained(sys.argv[1] + "/out", output_loading_info=True)
m.eval()
bad = {k: v for k, v in info.items() if v}
ref = tc.LlamaTiny()
ref.load_state_dict({k: v for k, v in m.state_dict().items()}, strict=True)
text = open(sorted(glob.glob(sys.argv[3] + "/*.txt"))[0], "rb").read()
x = torch.tensor([list(text[i * 64:(i + 1) * 64]) for i in range(4)])
with torch.no_grad():
    a, b = m(x).logits, ref(x)
rel = float((a - b).abs().max() / b.abs().max())
same = all(greedy(m, open("%s/p%d" % (sys.argv[1], k), "rb").read(), 24) ==
           open("%s/d%d" % (sys.argv[1], k), "rb").read() for k in range(5))
print("# loading info %s; logits against LlamaTiny %.2g relative; greedy continuations equal: %s" % (bad, rel, same))
sys.exit(0 if not bad and rel < 1e-5 and same else 1)
PY
tap_result $? "from_pretrained loads it with nothing missing, unexpected or mismatched; its logits are LlamaTiny's and it continues five prompts as dltrain generate"

# Hugging Face -> dltrain: an untied model (varied greedy text) in four shards
sed 's/, share: {weight: model.embed_tokens}//' "$top_srcdir/nets/llama-tiny.yaml" > "$T/untied.yaml"
UNTIED="--net $T/untied.yaml --data $TEXT --threads 1"
"$PY" - "$T" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from hf import greedy
torch.manual_seed(3)
c = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
                tie_word_embeddings=False)
m = LlamaForCausalLM(c).eval()
m.save_pretrained(sys.argv[1] + "/hf", safe_serialization=True, max_shard_size="120KB")
for k in range(5):
    p = open("%s/p%d" % (sys.argv[1], k), "rb").read()
    open("%s/h%d" % (sys.argv[1], k), "wb").write(greedy(m, p, 24))
PY
[ -f "$T/hf/model.safetensors.index.json" ] && [ "$(ls "$T"/hf/model-*-of-*.safetensors | wc -l)" -ge 3 ]
tap_result $? "save_pretrained writes a random LlamaForCausalLM in shards ($(ls "$T"/hf/model-*.safetensors 2>/dev/null | wc -l) files)"
hf_from_saved "dltrain generate --init-from DIR (its shards; key/value cache) continues five prompts as transformers does" 20 $UNTIED

# refusals
cp -r "$T/hf" "$T/kv4"
"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1])); c['num_key_value_heads'] = 4; json.dump(c, open(sys.argv[1], 'w'))
" "$T/kv4/config.json"
expect_status 2 "a config.json of 4 kv heads" -- $DLTRAIN generate $UNTIED --init-from "$T/kv4" --max-tokens 1
expect_output "config.json: num_key_value_heads: the network has 2, the file 4" "  is refused naming the key and both values"
expect_status 2 "tied weights against an untied config.json" -- $DLTRAIN generate $LLAMA --init-from "$T/hf" --max-tokens 1
expect_output "tie_word_embeddings: the network has true, the file false" "  is refused naming the key"
"$PY" -c "
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)).save_pretrained(sys.argv[1] + '/narrow')
" "$T" 2>/dev/null
rm -f "$T/narrow/config.json"
expect_status 2 "an MLP of 96 against the network's 128" -- \
    $DLTRAIN generate $UNTIED --init-from "$T/narrow" --max-tokens 1
expect_output "tensor 'model.layers.0.mlp.gate_proj.weight': expected shape \\[128, 64\\], found \\[96, 64\\]" \
    "  is refused naming the tensor and both shapes"

# Llama 3's rope scaling goes into config.json
sed 's/type: rope, head_dim: $head_dim, theta: $theta,/type: rope, head_dim: $head_dim, theta: $theta, scaling_factor: 8, original_context: 32,/' \
    "$top_srcdir/nets/llama-tiny.yaml" > "$T/scaled.yaml"
expect_status 0 "export a llama-tiny with Llama 3 rope scaling" -- \
    $DLTRAIN export --net "$T/scaled.yaml" --data "$TEXT" --checkpoint "$T/ckpt" -o "$T/scaled"
/usr/bin/python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))
want = {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
        'original_max_position_embeddings': 32}
print('# rope_scaling', c['rope_scaling'], 'kv heads', c['num_key_value_heads'], 'tied', c['tie_word_embeddings'])
sys.exit(0 if c['rope_scaling'] == want and c['num_key_value_heads'] == 2 and c['tie_word_embeddings'] else 1)
" "$T/scaled/config.json"
tap_result $? "  config.json's rope_scaling is Llama 3's with the layers' factors"
exit $((tap_failed > 0))
