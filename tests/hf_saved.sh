# hf_saved.sh: sourced by test_hf_llama.sh and test_hf_mixtral.sh (after
# tap.sh; T, PY and DLTRAIN set): five prompts and greedy decoding in
# transformers, and the checks both tests make of a random model that
# save_pretrained wrote into $T/hf.

# hf_prompts TEXT: $T/p0..p4, 30 bytes each of the corpus's last file, and
# $T/hf.py's greedy(model, prompt, n) on windows of 64 bytes.
hf_prompts() {
    last=$(ls "$1"/*.txt | LC_ALL=C sort | tail -1)
    for k in 0 1 2 3 4; do tail -c +$((k * 400 + 1)) "$last" | head -c 30 | tr -d '\000' > "$T/p$k"; done
    cat > "$T/hf.py" <<'PY'
import torch
def greedy(m, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(m(torch.tensor([ids[-64:]])).logits[0, -1].argmax()))
    return bytes(ids)
PY
}

# hf_from_saved DESCRIPTION MIN NETARGS...: dltrain generate --init-from
# $T/hf continues the five prompts as transformers did ($T/h0..h4); one
# training step at lr 0 from it, exported back, holds every tensor of its
# shards bit for bit (at least MIN of them).  Three TAP lines.
hf_from_saved() {
    desc=$1 min=$2
    shift 2
    ok=0
    for k in 0 1 2 3 4; do
        $DLTRAIN generate "$@" --init-from "$T/hf" --prompt "$(cat "$T/p$k")" --max-tokens 24 --temperature 0 \
            > "$T/g$k" 2>/dev/null && cmp -s "$T/g$k" "$T/h$k" || ok=1
    done
    [ $ok = 0 ]; tap_result $? "$desc"
    expect_status 0 "dltrain --init-from DIR: one step at lr 0, checkpointed" -- \
        $DLTRAIN "$@" --init-from "$T/hf" --lr 0 --max-steps 1 --limit-test 16 --checkpoint-dir "$T/from" \
            --checkpoint-every 1
    $DLTRAIN export "$@" --checkpoint "$T/from" -o "$T/again.safetensors" > /dev/null 2>&1
    "$PY" - "$T" "$min" <<'PY'
import glob, sys
from safetensors.torch import load_file
a = {}
for f in glob.glob(sys.argv[1] + "/hf/model-*.safetensors"):
    a.update(load_file(f))
b = load_file(sys.argv[1] + "/again.safetensors")
same = set(a) == set(b) and all(a[k].shape == b[k].shape and bool((a[k] == b[k]).all()) for k in a)
print("# %d tensors compared" % len(a))
sys.exit(0 if same and len(a) >= int(sys.argv[2]) else 1)
PY
    tap_result $? "training started from exactly those weights (exported back, bit for bit)"
}
