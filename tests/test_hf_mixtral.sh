#!/bin/sh
# test_hf_mixtral.sh: Hugging Face's MixtralForCausalLM both ways (issue
# 44), with transformers (4.40 on Debian's torch 1.13; tools/deps installs
# it):
# - `dltrain export -o DIR` of a trained nets/moe-tiny.yaml checkpoint
#   writes a config.json of model_type mixtral (its experts, top k and
#   router_aux_loss_coef) and model.safetensors with one tensor per expert
#   (block_sparse_moe.experts.N.w1.weight) that from_pretrained loads with
#   no key missing, unexpected or mismatched, and whose greedy
#   continuations of five prompts equal dltrain generate's (with and
#   without the key/value cache);
# - the other way, a random untied MixtralForCausalLM that save_pretrained
#   wrote in shards drives `dltrain generate --init-from DIR` to its own
#   greedy continuations, and `dltrain --init-from DIR` trains from exactly
#   those weights (a step at lr 0, exported back bit for bit);
# - a config.json of another top k is refused naming the key and both
#   values, an expert's tensor of another shape naming the tensor, and a
#   mixture that is not Mixtral's (gates not renormalised) is not exported.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/hf_saved.sh"
T="$TMPDIR_TEST"
tap_plan 12
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if ! "$PY" -c "import transformers, torch; from transformers import MixtralForCausalLM" 2>/dev/null; then
    for i in $(seq 1 12); do echo "ok $i # SKIP no transformers with Mixtral in $PY (tools/deps installs it)"; done
    exit 0
fi
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
MOE="--net $top_srcdir/nets/moe-tiny.yaml --data $TEXT --threads 1"
hf_prompts "$TEXT"

# dltrain -> Hugging Face
expect_status 0 "train moe-tiny 300 steps with a checkpoint" -- \
    $DLTRAIN $MOE --max-steps 300 --checkpoint-dir "$T/ckpt" --checkpoint-every 300 --quiet
expect_status 0 "export it to a folder" -- $DLTRAIN export $MOE --checkpoint "$T/ckpt" -o "$T/out"
expect_output "Hugging Face Mixtral layout" "  in Hugging Face's Mixtral layout"
ok=0
for k in 0 1 2 3 4; do
    $DLTRAIN generate $MOE --checkpoint "$T/ckpt" --prompt "$(cat "$T/p$k")" --max-tokens 24 --temperature 0 \
        --no-cache > "$T/d$k" 2>/dev/null || ok=1
    $DLTRAIN generate $MOE --checkpoint "$T/ckpt" --prompt "$(cat "$T/p$k")" --max-tokens 24 --temperature 0 \
        > "$T/c$k" 2>/dev/null && cmp -s "$T/c$k" "$T/d$k" || ok=1
done
[ $ok = 0 ]; tap_result $? "dltrain generate continues five prompts alike with and without the key/value cache"
"$PY" - "$T" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from transformers import MixtralForCausalLM
from hf import greedy
c = json.load(open(sys.argv[1] + "/out/config.json"))
m, info = MixtralForCausalLM.from_pretrained(sys.argv[1] + "/out", output_loading_info=True)
m.eval()
bad = {k: v for k, v in info.items() if v}
same = [greedy(m, open("%s/p%d" % (sys.argv[1], k), "rb").read(), 24) == open("%s/d%d" % (sys.argv[1], k), "rb").read()
        for k in range(5)]
keys = "model.layers.1.block_sparse_moe.experts.3.w2.weight" in m.state_dict()
print("# config %s %d experts, %d a token; loading info %s; greedy continuations equal: %s" %
      (c["model_type"], c["num_local_experts"], c["num_experts_per_tok"], bad, same))
sys.exit(0 if not bad and all(same) and keys and c["model_type"] == "mixtral" and c["num_local_experts"] == 4 and
         c["num_experts_per_tok"] == 2 else 1)
PY
tap_result $? "from_pretrained loads it (one tensor an expert) with nothing missing, unexpected or mismatched; it continues five prompts as dltrain generate"

# Hugging Face -> dltrain: an untied model in shards
sed 's/, share: {weight: model.embed_tokens}//' "$top_srcdir/nets/moe-tiny.yaml" > "$T/untied.yaml"
UNTIED="--net $T/untied.yaml --data $TEXT --threads 1"
"$PY" - "$T" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import torch
from transformers import MixtralConfig, MixtralForCausalLM
from hf import greedy
torch.manual_seed(5)
c = MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
                  num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.01, tie_word_embeddings=False)
m = MixtralForCausalLM(c).eval()
m.save_pretrained(sys.argv[1] + "/hf", safe_serialization=True, max_shard_size="150KB")
for k in range(5):
    p = open("%s/p%d" % (sys.argv[1], k), "rb").read()
    open("%s/h%d" % (sys.argv[1], k), "wb").write(greedy(m, p, 24))
PY
[ -f "$T/hf/model.safetensors.index.json" ]
tap_result $? "save_pretrained writes a random MixtralForCausalLM in shards ($(ls "$T"/hf/model-*.safetensors 2>/dev/null | wc -l) files)"
hf_from_saved "dltrain generate --init-from DIR continues five prompts as transformers does" 40 $UNTIED

# refusals
cp -r "$T/hf" "$T/top1"
"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1])); c['num_experts_per_tok'] = 1; json.dump(c, open(sys.argv[1], 'w'))
" "$T/top1/config.json"
expect_status 2 "a config.json of top 1" -- $DLTRAIN generate $UNTIED --init-from "$T/top1" --max-tokens 1
expect_output "num_experts_per_tok: the network has 2, the file 1" "  is refused naming the key and both values"
sed 's/top_k: $top_k, units: $mlp,/top_k: $top_k, normalize: false, units: $mlp,/' "$T/untied.yaml" > "$T/olmoe.yaml"
grep -q "normalize: false" "$T/olmoe.yaml" || echo "# moe-tiny.yaml's args line moved"
$DLTRAIN --net "$T/olmoe.yaml" --data "$TEXT" --threads 1 --max-steps 1 --limit-test 16 --checkpoint-dir "$T/ol" \
    --checkpoint-every 1 > /dev/null 2>&1
expect_status 2 "export of gates that are not renormalised" -- $DLTRAIN export --net "$T/olmoe.yaml" \
    --data "$TEXT" --checkpoint "$T/ol" -o "$T/ol-out"
