#!/bin/sh
# test_generate.sh: `dltrain generate` as a user runs it after training
# (issue 28): gpt-tiny trained 300 steps on the man pages (tests/
# text_corpus.sh) with a checkpoint; greedy decoding (--temperature 0)
# continues prompts token for token as the same weights in PyTorch
# (tests/torch_check.py's GPT, in float64, fed the window of the last 64
# bytes) decode them: on the window (--no-cache, 70-byte prompts, so the
# window slides) and with the key/value cache (30-byte prompts and 24
# tokens, within its 64 positions); sampling is the same for the same
# --seed and differs for another; --top-k 1 is greedy; under --precision bf16
# the cache decodes in f32 (fp32's bytes); llama-tiny (rotary positions
# from the cache's length, grouped kv heads in the cache) decodes five
# prompts with its cache as PyTorch's LlamaForCausalLM-shaped model does
# and samples with the cache what it samples on the whole window;
# a network that reads no token ids and a missing checkpoint are refused.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
tap_plan 15
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1"

expect_status 0 "train gpt-tiny 300 steps with a checkpoint" -- \
    $DLTRAIN $GPT --max-steps 300 --checkpoint-dir "$T/ckpt" --checkpoint-every 300 --quiet
PROMPT="On success, the number of bytes read is returned, and the file position is advanced"
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$PROMPT" --max-tokens 40 --temperature 0 --verbose > "$T/greedy1" 2>"$T/err1"
s1=$?
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$PROMPT" --max-tokens 40 --temperature 0 > "$T/greedy2" 2>"$T/err2"
[ $s1 = 0 ] && [ "$(head -c ${#PROMPT} "$T/greedy1")" = "$PROMPT" ] && [ "$(wc -c < "$T/greedy1")" -eq $((${#PROMPT} + 40)) ]
tap_result $? "greedy: the prompt, then 40 bytes"
grep -Eq "^dltrain generate: 40 tokens in [0-9.]+ s \([0-9.]+ ms a token after the first, which took [0-9.]+ ms with the prompt's 83; a window of 64, key/value cache\)" "$T/err1"
tap_result $? "with --verbose it reports the tokens, the time and the window on stderr"
[ ! -s "$T/err2" ]; tap_result $? "without it stderr stays empty"
cmp -s "$T/greedy1" "$T/greedy2"; tap_result $? "greedy decoding is the same twice"
# Five prompts of 70 bytes from the last file of the corpus, 24 greedy bytes each.
last=$(ls "$TEXT"/*.txt | LC_ALL=C sort | tail -1)
: > "$T/greedy_all"
for k in 0 1 2 3 4; do
    p=$(tail -c +$((k * 400 + 1)) "$last" | head -c 70 | tr -d '\000')
    printf '%s' "$p" > "$T/prompt$k"
    $DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$p" --max-tokens 24 --temperature 0 --no-cache \
        > "$T/g$k" 2>/dev/null
    # a prompt of 30 bytes, 24 more: within the 64 positions the cache holds
    $DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$(printf '%s' "$p" | head -c 30)" --max-tokens 24 \
        --temperature 0 > "$T/c$k" 2>/dev/null
done
/usr/bin/python3 - "$top_srcdir/tests" "$T/ckpt" "$T" <<'PY'
import glob, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import torch_check as tc
ckpt = tc.st_read(sorted(glob.glob(sys.argv[2] + "/ckpt-*.safetensors"))[-1])
model = tc.GPTTiny(V=256, C=64, H=4, context=64, layers=2).double()
state = {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in ckpt.items()
         if not k.startswith(("optim.", "rng."))}
model.load_state_dict(state, strict=False)
ok = True
for k in range(5):
    prompt = open("%s/prompt%d" % (sys.argv[3], k), "rb").read()
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(24):
            ids.append(int(model(torch.tensor([ids[-64:]]))[0, -1].argmax()))
    want, got = bytes(ids), open("%s/g%d" % (sys.argv[3], k), "rb").read()
    print("# %r: PyTorch %r, dltrain %r" % (prompt[-12:], want[len(prompt):], got[len(prompt):]))
    ok = ok and want == got
    ids = list(prompt[:30])
    with torch.no_grad():
        for _ in range(24):
            ids.append(int(model(torch.tensor([ids[-64:]]))[0, -1].argmax()))
    cached = open("%s/c%d" % (sys.argv[3], k), "rb").read()
    print("# %r: PyTorch %r, dltrain with its key/value cache %r" % (prompt[18:30], bytes(ids)[30:], cached[30:]))
    ok = ok and bytes(ids) == cached
sys.exit(0 if ok else 1)
PY
tap_result $? "greedy decoding of five prompts equals PyTorch's on the same weights (float64), on the window (70-byte prompts) and with the key/value cache (30)"
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --max-tokens 200 --seed 7 --top-k 40 > "$T/s7a" 2>/dev/null
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --max-tokens 200 --seed 7 --top-k 40 > "$T/s7b" 2>/dev/null
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --max-tokens 200 --seed 8 --top-k 40 > "$T/s8" 2>/dev/null
cmp -s "$T/s7a" "$T/s7b" && ! cmp -s "$T/s7a" "$T/s8"
tap_result $? "sampling: the same for the same --seed, different for another"
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$PROMPT" --max-tokens 40 --top-k 1 --seed 3 > "$T/top1" 2>/dev/null
cmp -s "$T/top1" "$T/greedy1"; tap_result $? "--top-k 1 is greedy"
# A network trained in bf16 (train.precision) decodes in f32 with the key/value cache: the same bytes
# as fp32 (the caches, and the reference's cached pass, are f32; a bf16 attention kernel refuses a cache).
$DLTRAIN generate $GPT --checkpoint "$T/ckpt" --prompt "$(cat "$T/prompt0" | head -c 30)" --max-tokens 24 \
    --temperature 0 --precision bf16 > "$T/c0bf16" 2>"$T/err_bf16"
s=$?
[ $s = 0 ] && cmp -s "$T/c0bf16" "$T/c0"
tap_result $? "--precision bf16 with the key/value cache decodes in f32: fp32's bytes"
# llama-tiny: rope turns each new q and k by its place after the cache's positions; k and v of
# 2 kv heads join the cache
LLAMA="--net $top_srcdir/nets/llama-tiny.yaml --data $TEXT --threads 1"
expect_status 0 "train llama-tiny 300 steps with a checkpoint" -- \
    $DLTRAIN $LLAMA --max-steps 300 --checkpoint-dir "$T/lckpt" --checkpoint-every 300 --quiet
for k in 0 1 2 3 4; do
    $DLTRAIN generate $LLAMA --checkpoint "$T/lckpt" --prompt "$(head -c 30 "$T/prompt$k")" --max-tokens 24 \
        --temperature 0 > "$T/l$k" 2>/dev/null
done
/usr/bin/python3 - "$top_srcdir/tests" "$T/lckpt" "$T" <<'PY'
import glob, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import torch_check as tc
ckpt = tc.st_read(sorted(glob.glob(sys.argv[2] + "/ckpt-*.safetensors"))[-1])
model = tc.LlamaTiny().double()
state = {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in ckpt.items()
         if not k.startswith(("optim.", "rng."))}
model.load_state_dict(state, strict=False)
ok = True
for k in range(5):
    ids = list(open("%s/prompt%d" % (sys.argv[3], k), "rb").read()[:30])
    with torch.no_grad():
        for _ in range(24):
            ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    got = open("%s/l%d" % (sys.argv[3], k), "rb").read()
    print("# %r: PyTorch %r, dltrain with its key/value cache %r" % (bytes(ids[18:30]), bytes(ids)[30:], got[30:]))
    ok = ok and bytes(ids) == got
sys.exit(0 if ok else 1)
PY
tap_result $? "llama-tiny: greedy decoding of five prompts with the key/value cache equals PyTorch's (float64)"
# sampled (varied text, unlike greedy's at this size): the cache's bytes are the whole window's
same=0
for k in 0 1 2 3 4; do
    p=$(head -c 30 "$T/prompt$k")
    $DLTRAIN generate $LLAMA --checkpoint "$T/lckpt" --prompt "$p" --max-tokens 30 --seed $k > "$T/ls$k" 2>/dev/null
    $DLTRAIN generate $LLAMA --checkpoint "$T/lckpt" --prompt "$p" --max-tokens 30 --seed $k --no-cache \
        > "$T/lw$k" 2>/dev/null
    cmp -s "$T/ls$k" "$T/lw$k" && [ "$(wc -c < "$T/ls$k")" -eq 60 ] && same=$((same + 1))
    printf '# %s\n' "$(tail -c 30 "$T/ls$k" | tr -c '[:print:]' '.')"
done
[ $same -eq 5 ]
tap_result $? "llama-tiny: sampling with the key/value cache gives the whole window's bytes ($same of 5 prompts)"
expect_status 2 "a network that reads no token ids" -- $DLTRAIN generate --net lenet5 --checkpoint "$T/ckpt"
expect_output "reads no token ids with a loss at every position" "the message says why"
expect_status 1 "a missing checkpoint" -- $DLTRAIN generate $GPT --checkpoint "$T/nosuch"
exit $((tap_failed > 0))
