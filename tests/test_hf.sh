#!/bin/sh
# test_hf.sh: Hugging Face interop (issue 28), with transformers'
# GPT2LMHeadModel (4.40 on Debian's torch 1.13; tools/deps installs it):
# `dltrain export` of a trained gpt-tiny checkpoint loads with
# load_state_dict(strict=True), and its greedy continuations of five
# prompts equal dltrain generate's (on the window, --no-cache); -o through
# a symbolic link or into a FIFO writes the same bytes, keeping both; with
# --save-dtype bf16 each tensor is that export rounded as torch rounds, and a
# bf16 GPT2LMHeadModel loads it strictly; the other
# way, a GPT2LMHeadModel of random weights that save_pretrained wrote
# drives `dltrain generate --init-from` (with its key/value cache) to its
# own greedy continuations, and `dltrain --init-from`
# trains from those weights (a step at lr 0 keeps them, as a checkpoint
# shows); a model of another size is refused naming the tensor.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
tap_plan 11
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if ! "$PY" -c "import transformers, torch" 2>/dev/null; then
    for i in $(seq 1 8); do echo "ok $i # SKIP no transformers in $PY (tools/deps installs it)"; done
    exit 0
fi
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1"
cat > "$T/hf.py" <<'PY'
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
def model():
    return GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                      resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)).eval()
def greedy(m, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(m(torch.tensor([ids[-64:]])).logits[0, -1].argmax()))
    return bytes(ids)
PY
last=$(ls "$TEXT"/*.txt | LC_ALL=C sort | tail -1)
for k in 0 1 2 3 4; do
    tail -c +$((k * 400 + 1)) "$last" | head -c 70 | tr -d '\000' > "$T/prompt$k"
    head -c 30 "$T/prompt$k" > "$T/short$k" # with 24 more, within the 64 positions a key/value cache holds
done

# dltrain -> Hugging Face
$DLTRAIN $GPT --max-steps 200 --checkpoint-dir "$T/ckpt" --checkpoint-every 200 --quiet > /dev/null 2>&1
expect_status 0 "export a trained gpt-tiny checkpoint" -- \
    $DLTRAIN export $GPT --checkpoint "$T/ckpt" -o "$T/export.safetensors"
# -o through a symbolic link (the link kept) and into a FIFO (it stays one): the same bytes
ln -s linked.safetensors "$T/link.safetensors"
mkfifo "$T/export.fifo"
cat "$T/export.fifo" > "$T/fifo.safetensors" &
reader=$!
$DLTRAIN export $GPT --checkpoint "$T/ckpt" -o "$T/link.safetensors" > /dev/null 2>&1 &&
    timeout 60 $DLTRAIN export $GPT --checkpoint "$T/ckpt" -o "$T/export.fifo" > /dev/null 2>&1; st=$?
timeout 10 sh -c "while kill -0 $reader 2>/dev/null; do sleep 0.05; done"
kill $reader 2> /dev/null # a reader whose FIFO was replaced waits for ever
[ $st -eq 0 ] && [ -L "$T/link.safetensors" ] && [ -p "$T/export.fifo" ] &&
    cmp -s "$T/linked.safetensors" "$T/export.safetensors" && cmp -s "$T/fifo.safetensors" "$T/export.safetensors"
tap_result $? "export -o through a symbolic link and into a FIFO writes the same bytes, keeping both"
for k in 0 1 2 3 4; do
    $DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$(cat "$T/prompt$k")" --max-tokens 24 --temperature 0 \
        --no-cache > "$T/d$k" 2>/dev/null
done
"$PY" - "$T" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from hf import model, greedy
from safetensors.torch import load_file
m = model()
m.load_state_dict(load_file(sys.argv[1] + "/export.safetensors"), strict=True)
ok = True
for k in range(5):
    p = open("%s/prompt%d" % (sys.argv[1], k), "rb").read()
    want, got = greedy(m, p, 24), open("%s/d%d" % (sys.argv[1], k), "rb").read()
    print("# %r: transformers %r, dltrain %r" % (p[-10:], want[len(p):], got[len(p):]))
    ok = ok and want == got
sys.exit(0 if ok else 1)
PY
tap_result $? "GPT2LMHeadModel loads it strictly and continues five prompts as dltrain generate does"
# --save-dtype bf16: transformers' bf16 model loads it; each tensor is PyTorch's rounding of the fp32 export's
expect_status 0 "export it in bf16 (--save-dtype bf16)" -- \
    $DLTRAIN export $GPT --checkpoint "$T/ckpt" -o "$T/export16.safetensors" --save-dtype bf16
"$PY" - "$T" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import torch
from hf import model
from safetensors.torch import load_file
f32, b16 = (load_file(sys.argv[1] + n) for n in ("/export.safetensors", "/export16.safetensors"))
m = model().to(torch.bfloat16)
m.load_state_dict(b16, strict=True)
same = all(b16[k].dtype == torch.bfloat16 and torch.equal(b16[k], f32[k].to(torch.bfloat16)) for k in f32)
size = os.path.getsize(sys.argv[1] + "/export16.safetensors") / os.path.getsize(sys.argv[1] + "/export.safetensors")
print("# %d tensors, bf16 file %.3f of the fp32 one's bytes" % (len(b16), size))
sys.exit(0 if same and set(b16) == set(f32) and size < 0.51 else 1)
PY
tap_result $? "  a bf16 GPT2LMHeadModel loads it strictly; every tensor is the fp32 export rounded as torch rounds, half the bytes"

# Hugging Face -> dltrain
"$PY" - "$T" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import torch
from hf import model, greedy
torch.manual_seed(3)
m = model()
m.save_pretrained(sys.argv[1] + "/hf", safe_serialization=True)
for k in range(5):
    p = open("%s/short%d" % (sys.argv[1], k), "rb").read()
    open("%s/h%d" % (sys.argv[1], k), "wb").write(greedy(m, p, 24))
PY
tap_result $? "save_pretrained writes a random GPT2LMHeadModel and its greedy continuations"
ok=0
for k in 0 1 2 3 4; do
    $DLTRAIN generate $GPT --init-from "$T/hf/model.safetensors" --prompt "$(cat "$T/short$k")" --max-tokens 24 \
        --temperature 0 > "$T/g$k" 2>/dev/null && cmp -s "$T/g$k" "$T/h$k" || ok=1
done
[ $ok = 0 ]; tap_result $? "dltrain generate --init-from (with its key/value cache) continues five prompts as transformers does"
expect_status 0 "dltrain --init-from: one step at lr 0, checkpointed" -- \
    $DLTRAIN $GPT --init-from "$T/hf/model.safetensors" --lr 0 --max-steps 1 --limit-test 16 \
        --checkpoint-dir "$T/from" --checkpoint-every 1
expect_output "starting from the weights of .*model\.safetensors" "it says where the weights come from"
$DLTRAIN export $GPT --checkpoint "$T/from" -o "$T/again.safetensors" > /dev/null 2>&1
"$PY" - "$T" <<'PY'
import sys
from safetensors.torch import load_file
a, b = load_file(sys.argv[1] + "/hf/model.safetensors"), load_file(sys.argv[1] + "/again.safetensors")
names = [k for k in a if not k.endswith((".attn.bias", ".attn.masked_bias"))]
same = all(k in b and a[k].shape == b[k].shape and bool((a[k] == b[k]).all()) for k in names)
print("# %d tensors compared" % len(names))
sys.exit(0 if same and len(names) >= 20 else 1)
PY
tap_result $? "training started from exactly those weights (exported back, bit for bit)"
"$PY" -c "
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4)).save_pretrained(sys.argv[1])
" "$T/small" 2>/dev/null
expect_status 2 "a model of another width is refused" -- \
    $DLTRAIN generate $GPT --init-from "$T/small/model.safetensors" --max-tokens 1
exit $((tap_failed > 0))
