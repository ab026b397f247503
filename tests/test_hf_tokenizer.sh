#!/bin/sh
# test_hf_tokenizer.sh: Hugging Face tokenizer.json files as a user meets
# them (issue 43): no tokenizer can be downloaded here, so the tokenizers
# library (tools/deps installs it with transformers) trains two on the man
# pages offline: one as Llama 3's (its Split pattern, ByteLevel without a
# pattern, ignore_merges, <|begin_of_text|> before each text by
# TemplateProcessing, specials among the added tokens) and one as
# SmolLM2's (single digits, then ByteLevel with GPT-2's pattern; no
# template, so <|endoftext|> goes before each file; a normal added token).
# `dltrain tokenize --tokenizer` gives token for token what the library's
# encode gives on the corpus and on hostile strings (every byte, invalid
# UTF-8, Unicode spaces and scripts, specials in the text, prefixes of
# them, case-folded contractions), under each Split behavior (a pattern
# that leaves words between its matches) and inverted, single digits where
# merges join digits, a word that ignore_merges takes whole, merges ranked
# by their place in the list (reversed), merges written as pairs as newer
# libraries write them; --decode gives the
# text back, --no-eot drops the template; a LLaMA trains on the tokens and
# `generate --tokenizer` starts from the library's tokens of a prompt.
# What is not byte-level BPE, malformed or unsupported (a truncated file,
# WordPiece, Metaspace, merges of unknown tokens, a normalizer, an added
# token that strips spaces, add_prefix_space, a byte missing) exits 2
# naming the key, and writes nothing.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
PLAN=43
tap_plan $PLAN
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if ! "$PY" -c "import tokenizers" 2>/dev/null; then
    for i in $(seq 1 $PLAN); do echo "ok $i # SKIP no tokenizers library in $PY (tools/deps installs it)"; done
    exit 0
fi
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
CORPUS="$top_builddir/tests/text-corpus"
FILES=$(ls "$CORPUS"/*.txt | LC_ALL=C sort)

# Two tokenizers, and the Llama 3 one under every Split behavior.
"$PY" - "$T" $FILES <<'PY' || { echo "Bail out! the tokenizers library could not train"; exit 1; }
import copy, json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, processors, Regex
out, files = sys.argv[1], sys.argv[2:]
pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
       r"\s*[\r\n]+|\s+(?!\S)|\s+")
def train(pre, specials, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.train(files, trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                         special_tokens=specials, show_progress=False))
    return tok
specials = ["<|begin_of_text|>", "<|end_of_text|>"] + ["<|reserved_special_token_%d|>" % i for i in range(8)]
llama = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pat), behavior="isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
              specials, True)
llama.post_processor = processors.Sequence([
    processors.ByteLevel(trim_offsets=False),
    processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])])
llama.save(out + "/llama3.json")
smol = train(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                      pre_tokenizers.ByteLevel(add_prefix_space=False)]), ["<|endoftext|>"], False)
smol.post_processor = processors.ByteLevel(trim_offsets=False)
smol.add_tokens(["manual page"])
smol.save(out + "/smollm2.json")
base = json.load(open(out + "/llama3.json"))
for behavior, invert in [("Removed", False), ("MergedWithPrevious", False), ("MergedWithNext", False),
                         ("Contiguous", False), ("Isolated", True)]:
    d = copy.deepcopy(base)  # a pattern that leaves text between its matches (words), some of which meet
    d["pre_tokenizer"]["pretokenizers"][0].update(behavior=behavior, invert=invert,
                                                  pattern={"Regex": r"\s|[.,;:!?()-]"})
    json.dump(d, open("%s/split-%s%s.json" % (out, behavior, "-inverted" if invert else ""), "w"))
d = copy.deepcopy(base)  # single digits where the merges join digits
d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                      {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
json.dump(d, open(out + "/split-digits.json", "w"))
d = copy.deepcopy(base)  # a word in the vocabulary that no merge makes: ignore_merges takes it whole
d["model"]["vocab"]["\u0120zqzq"] = len(d["model"]["vocab"])
json.dump(d, open(out + "/split-ignore-merges.json", "w"))
d = json.load(open(out + "/smollm2.json"))
d["model"]["merges"] = [m.split(" ") for m in d["model"]["merges"]]
json.dump(d, open(out + "/pairs.json", "w"))
d = json.load(open(out + "/smollm2.json"))
d["model"]["merges"].reverse()  # ranks by place in the list, not by the ids the merges make
json.dump(d, open(out + "/split-reversed-merges.json", "w"))
PY

# The reference: the library's encode of each file (its template's tokens
# included), after <|endoftext|> where the template adds none (--no-eot:
# without either).
cat > "$T/reference.py" <<'PY'
import struct, sys
from tokenizers import Tokenizer
tokenizer, out, mode = sys.argv[1:4]
tok = Tokenizer.from_file(tokenizer)
eot = tok.token_to_id("<|endoftext|>") if mode == "documents" and not tok.encode("").ids else None
want = []
for path in sys.argv[4:]:
    text = open(path, "rb").read().decode("utf-8", errors="replace")
    want += ([eot] if eot is not None else []) + tok.encode(text, add_special_tokens=mode == "documents").ids
b = open(out, "rb").read()
magic, version, n = struct.unpack("<3i", b[:12])
got = list(struct.unpack("<%d%s" % (n, "H" if magic == 20240520 else "I"), b[1024:]))
if got != want:
    i = next((i for i, (a, c) in enumerate(zip(got, want)) if a != c), min(len(got), len(want)))
    sys.exit("differs at token %d of %d/%d: got %s, the library %s" % (i, len(got), len(want), got[i:i + 8],
                                                                         want[i:i + 8]))
print("%d tokens" % n)
PY
same() { # same TOKENIZER OUT MODE DESCRIPTION FILES...: OUT against the library
    tok=$1; bin=$2; mode=$3; desc=$4; shift 4
    R=$("$PY" "$T/reference.py" "$tok" "$bin" "$mode" "$@" 2>&1); tap_result $? "$desc"
    echo "$R" | tail -3 | sed 's/^/# /'
}

# Hostile strings.
mkdir -p "$T/hostile"
/usr/bin/python3 - "$T/hostile" <<'PY'
import os, random, sys
random.seed(2)
cases = {
    "a_every_byte": bytes(range(256)) * 3,
    "b_invalid": b"ok \xff\xfe \xc0\xaf \xe0\x80\xaf \xf4\x90\x80\x80 \xf0\x9f\x98 trunc\xe2\x82",
    "c_spaces": b" " * 300 + b"x" + b" " * 299 + b"\n" + b"\t \t  \r\n\r\n  " * 20 + b"   ",
    "d_digits": b"1" * 1000 + b" " + b"0123456789" * 50 + b" 3.14159 1,000,000 \xd9\xa3\xd9\xa4 \xe2\x85\xab",
    "e_unicode_spaces": "\u0085a\u00a0b\u2028c\u3000d\u2009e\u200bf\ufeffg\u1680 h\u180ei  \u00a0\u00a0 j\n\u2029".encode(),
    "f_scripts": "h\u00e9llo w\u00f6rld \ufb01 \u01c5 \u216b \u00bd \u00b2 \u0663\u0664 \u4f60\u597d\uff0c\u4e16\u754c "
                 "\uc548\ub155 \u041f\u0440\u0438\u0432\u0435\u0442 \U0001f389\U0001f44d\U0001f3fd e\u0301 \u0301x".encode(),
    "g_contractions": "I'm YOU'RE we'Ve they'LL she'D it'S 'S '\u017f '\u212a ''s ' s O'Neil rock'n'roll".encode(),
    "h_specials": b"<|begin_of_text|>x<|end_of_text|><|begin_of_text|> <|endoftext|>y<|endoftext|><|endoftext"
                  b" <|begin_of <|reserved_special_token_7|><|reserved_special_token_1|> manual page manual pages zqzq zqzqz",
    "i_trailing": b"ends with spaces \n\n   ",
    "j_empty": b"",
    "k_random_bytes": bytes(random.getrandbits(8) for _ in range(6000)),
    "l_random_text": "".join(chr(random.choice([random.randint(32, 126), random.randint(0xA0, 0x2FFF),
                                                random.randint(0x3000, 0xD7FF), random.randint(0x10000, 0x1FFFF)]))
                             for _ in range(3000)).encode(),
    "m_symbols": "!!\u00a0!! ..\u3000.. --\u2003-- --x-- -\n- ((\u2028)) {\u0085} ,\u205f, a-b--c---".encode(),
}
for name, data in cases.items():
    open(os.path.join(sys.argv[1], name), "wb").write(data)
PY
HOSTILE=$(ls "$T"/hostile/* | LC_ALL=C sort)

for t in llama3 smollm2; do
    expect_status 0 "$t: tokenize the corpus" -- $DLTRAIN tokenize --tokenizer "$T/$t.json" --validation 0 \
        -o "$T/$t-corpus.bin" $FILES
    same "$T/$t.json" "$T/$t-corpus.bin" documents "$t: the corpus, token for token as the tokenizers library" $FILES
    expect_status 0 "$t: tokenize the hostile strings" -- $DLTRAIN tokenize --tokenizer "$T/$t.json" \
        --validation 0 -o "$T/$t-hostile.bin" $HOSTILE
    same "$T/$t.json" "$T/$t-hostile.bin" documents "$t: hostile strings, token for token as the library" $HOSTILE
done
expect_output "^tokenize: 13 files, [0-9]+ bytes \([1-9][0-9]* ill-formed UTF-8 sequences replaced by U\+FFFD\)" \
    "  it counts the repaired bytes"
SOME=$(echo "$FILES" | head -20)
for v in split-Removed split-MergedWithPrevious split-MergedWithNext split-Contiguous split-Isolated-inverted \
    split-digits split-ignore-merges split-reversed-merges; do
    $DLTRAIN tokenize --tokenizer "$T/$v.json" --validation 0 -o "$T/$v.bin" $HOSTILE $SOME >/dev/null 2>&1
    same "$T/$v.json" "$T/$v.bin" documents "${v#split-}: hostile strings and man pages as the library" \
        $HOSTILE $SOME
done
$DLTRAIN tokenize --tokenizer "$T/pairs.json" --validation 0 -o "$T/pairs.bin" $HOSTILE >/dev/null 2>&1
cmp -s "$T/pairs.bin" "$T/smollm2-hostile.bin"; tap_result $? "merges as [a, b] pairs (tokenizers 0.20 on) as \"a b\""

expect_status 0 "--no-eot: no template" -- $DLTRAIN tokenize --tokenizer "$T/llama3.json" --no-eot --validation 0 \
    -o "$T/plain.bin" $HOSTILE
same "$T/llama3.json" "$T/plain.bin" plain "  the library's encode without special tokens" $HOSTILE
$DLTRAIN tokenize --tokenizer "$T/llama3.json" --decode "$T/llama3-hostile.bin" > "$T/decoded" 2>"$T/decode.err"
/usr/bin/python3 - "$T/decoded" $HOSTILE <<'PY'
import sys
want = b"".join(b"<|begin_of_text|>" + open(p, "rb").read().decode("utf-8", errors="replace").encode()
                for p in sys.argv[2:])
sys.exit(0 if open(sys.argv[1], "rb").read() == want else 1)
PY
tap_result $? "--decode gives the repaired text back, <|begin_of_text|> before each file"

# A LLaMA of this vocabulary trains on the tokens.
mkdir -p "$T/data"
$DLTRAIN tokenize --tokenizer "$T/llama3.json" -o "$T/data" $FILES >/dev/null 2>&1
expect_status 0 "llama-tiny over the 2,000 tokens trains on them" -- $DLTRAIN --net "$top_srcdir/nets/llama-tiny.yaml" \
    --set args.vocab=2000 --dataset tokens --data "$T/data" --threads 1 --max-steps 40 --limit-test 64 \
    --metrics "$T/m.json" --checkpoint-dir "$T/ck" --checkpoint-every 40
/usr/bin/python3 - "$T/m.json" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
losses = [s["loss"] for s in steps if "loss" in s]
sys.exit(0 if len(losses) >= 40 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5 else 1)
PY
tap_result $? "  its loss falls"
PROMPT="The system call returns"
expect_status 0 "generate --tokenizer continues a prompt" -- $DLTRAIN generate --net "$top_srcdir/nets/llama-tiny.yaml" \
    --set args.vocab=2000 --dataset tokens --data "$T/data" --checkpoint "$T/ck" --tokenizer "$T/llama3.json" \
    --prompt "$PROMPT" --max-tokens 8 --temperature 0 --verbose
want=$("$PY" -c "import sys; from tokenizers import Tokenizer
print(len(Tokenizer.from_file(sys.argv[1]).encode(sys.argv[2]).ids))" "$T/llama3.json" "$PROMPT")
case "$STDOUT" in "$PROMPT"*) echo "$STDERR" | grep -q "with the prompt's $want;" ;; *) false ;; esac
tap_result $? "  the prompt's tokens are the library's ($want, <|begin_of_text|> first), the text continues it"

# Refusals: exit 2, the key named, nothing written.
refused() { # refused DESCRIPTION PATTERN FILE
    rm -f "$T/none.bin"
    expect_status 2 "$1" -- $DLTRAIN tokenize --tokenizer "$3" -o "$T/none.bin" "$CORPUS/done"
    if echo "$STDERR" | grep -Eq -- "$2" && [ ! -e "$T/none.bin" ]; then tap_result 0 "  names it: /$2/"; else
        echo "# stderr: $STDERR"; tap_result 1 "  names it: /$2/"; fi
}
head -c 3000 "$T/llama3.json" > "$T/truncated.json"
refused "a truncated file" "truncated.json:[0-9]+:[0-9]+: " "$T/truncated.json"
"$PY" - "$T" <<'PY'
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, normalizers
out = sys.argv[1]
base = json.load(open(out + "/llama3.json"))
def variant(name, change):
    d = json.loads(json.dumps(base))
    change(d)
    json.dump(d, open("%s/%s.json" % (out, name), "w"))
wp = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
wp.save(out + "/wordpiece.json")
variant("metaspace", lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "\u2581",
                                                       "prepend_scheme": "always", "split": True}))
variant("unknown-merge", lambda d: d["model"]["merges"].insert(5, "\u0120the zzzq"))
variant("normalizer", lambda d: d.update(normalizer={"type": "NFC"}))
variant("lstrip", lambda d: d["added_tokens"][0].update(lstrip=True))
variant("prefix-space", lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True))
variant("no-byte", lambda d: d["model"]["vocab"].update({"\u0100\u0100\u0100": d["model"]["vocab"].pop("\u0100")}))
def gap(d):  # token 300 moved past the end
    v = d["model"]["vocab"]
    v[next(k for k, i in v.items() if i == 300)] = len(v) + 2
variant("gap", gap)
PY
refused "WordPiece" "model.type: expected BPE.*WordPiece" "$T/wordpiece.json"
refused "a Metaspace pre-tokenizer" "pre_tokenizer.type: expected ByteLevel, Split, Digits.*Metaspace" "$T/metaspace.json"
refused "a merge of an unknown token" "model.merges\[5\]: 'zzzq' is not in the vocabulary" "$T/unknown-merge.json"
refused "a normalizer" "normalizer: not supported.*NFC" "$T/normalizer.json"
refused "an added token that strips spaces" "added_tokens\[0\].lstrip: not supported" "$T/lstrip.json"
refused "add_prefix_space" "pre_tokenizer.pretokenizers\[1\].add_prefix_space: not supported" "$T/prefix-space.json"
refused "a vocabulary without byte 0" "byte 0 has no token" "$T/no-byte.json"
refused "a gap in the ids" "no token has id 300 \(ids run from 0 to [0-9]+ without gaps\)" "$T/gap.json"
