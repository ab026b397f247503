#!/bin/sh
# test_tokenizer.sh: GPT-2's tokenizer and token files (issue 28), as a user
# runs them: `dltrain tokenize` over real text (tests/text_corpus.sh: man
# pages rendered by man) and over hostile strings (every byte value, invalid
# UTF-8, lone surrogates' bytes, long runs of spaces and digits, Unicode
# spaces, scripts, emoji; runs of one letter, DNA, base64, digits and
# symbols of 100,000 bytes and more, within a generous timeout) gives token
# for token what tiktoken's gpt2 encoding gives (tiktoken 0.14 built
# offline from the same gpt2.tiktoken and its own r50k pattern; tools/deps
# installs both), with every file after <|endoftext|> and U+FFFD counted
# as Python counts it; --decode gives the text back; the files are llm.c's
# (read here with llm.c's layout, and files written with llm.c's layout,
# uint16 and uint32, train); a GPT trains on them (--dataset tokens); a
# token past the vocabulary, a truncated file, a wrong magic or version, a
# missing vocabulary: a message naming it, before any training (exit 1 as
# every malformed dataset; check exits 2); --decode of a malformed or
# missing token file exits 1 too, of no file 2.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
PLAN=32
tap_plan $PLAN
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
CORPUS="$top_builddir/tests/text-corpus"
VOCAB="$top_srcdir/vocab/gpt2.tiktoken"
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if [ ! -s "$VOCAB" ]; then
    for i in $(seq 1 $PLAN); do echo "ok $i # SKIP no vocab/gpt2.tiktoken (tools/deps fetches it from PyPI)"; done
    exit 0
fi
have_tiktoken=1
"$PY" -c "import tiktoken" 2>/dev/null || have_tiktoken=0
skip_or() { # skip_or DESCRIPTION: prints a skip when tiktoken is missing; status 1 then
    [ $have_tiktoken = 1 ] && return 0
    tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP no tiktoken in $PY (tools/deps installs it)"; return 1
}

# The reference: tiktoken on each file, as Python decodes it, after <|endoftext|>.
cat > "$T/reference.py" <<'PY'
import base64, struct, sys
import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str
vocab, out = sys.argv[1], sys.argv[2]
ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in open(vocab, "rb"))}
enc = tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                        special_tokens={"<|endoftext|>": 50256})
want, replaced = [], 0
for path in sys.argv[3:]:
    raw = open(path, "rb").read()
    text = raw.decode("utf-8", errors="replace")
    replaced += text.count("\ufffd") - raw.decode("utf-8", errors="ignore").count("\ufffd")
    want += [50256] + enc.encode_ordinary(text)
b = open(out, "rb").read()
magic, version, n = struct.unpack("<3i", b[:12])  # llm.c's header: 256 int32
assert (magic, version) == (20240520, 1) and len(b) == 1024 + 2 * n, (magic, version, n, len(b))
got = list(struct.unpack("<%dH" % n, b[1024:]))
if got != want:
    i = next((i for i, (a, c) in enumerate(zip(got, want)) if a != c), min(len(got), len(want)))
    sys.exit("differs at token %d of %d/%d: got %s, tiktoken %s" % (i, len(got), len(want), got[i:i + 8], want[i:i + 8]))
print("replaced", replaced)
PY

FILES=$(ls "$CORPUS"/*.txt | LC_ALL=C sort)
expect_status 0 "tokenize the corpus into train.bin and val.bin" -- $DLTRAIN tokenize -o "$T/corpus" $FILES
expect_output "^tokenize: [0-9]+ files, [0-9]+ bytes \(0 ill-formed UTF-8 sequences replaced by U\+FFFD\), [0-9]+ tokens" \
    "it says how many files, bytes, replacements and tokens"
$DLTRAIN tokenize --validation 0 -o "$T/corpus.bin" $FILES >/dev/null 2>&1
if skip_or "the corpus: the same tokens as tiktoken's gpt2 encoding"; then
    R=$("$PY" "$T/reference.py" "$VOCAB" "$T/corpus.bin" $FILES 2>&1); tap_result $? "the corpus: the same tokens as tiktoken's gpt2 encoding"
    echo "$R" | sed 's/^/# /'
fi
/usr/bin/python3 - "$T/corpus" "$T/corpus.bin" <<'PY'
import struct, sys
def read(p):
    b = open(p, "rb").read()
    return list(struct.unpack("<%dH" % struct.unpack("<3i", b[:12])[2], b[1024:]))
train, val, whole = read(sys.argv[1] + "/train.bin"), read(sys.argv[1] + "/val.bin"), read(sys.argv[2])
cut = len(whole) - int(len(whole) * 0.1)
sys.exit(0 if train + val == whole and len(val) == len(whole) - cut else 1)
PY
tap_result $? "train.bin then val.bin is the whole stream; val.bin its last tenth"

# Hostile strings, written here.
mkdir -p "$T/hostile"
/usr/bin/python3 - "$T/hostile" <<'PY'
import os, random, sys
random.seed(1)
cases = {
    "a_every_byte": bytes(range(256)) * 3,
    "b_byte_pairs": bytes(b for i in range(256) for b in (i, 0x80 | (i & 0x3F))),
    "c_invalid": b"ok \xff\xfe \xc0\xaf \xe0\x80\xaf \xf4\x90\x80\x80 \xf0\x9f\x98 trunc\xe2\x82",
    "d_surrogates": b"\xed\xa0\x80\xed\xb0\x80 x\xed\xa0\xbdy \xed\xb2\xa9 \xed\xbf\xbf",
    "e_spaces": b" " * 1000 + b"x" + b" " * 999 + b"\n" + b"\t \t  \r\n\r\n  " * 50 + b"   ",
    "f_digits": b"1" * 3000 + b" " + b"0123456789" * 200 + b" 3.14159 1,000,000",
    "g_unicode_spaces": "\u0085a\u00a0b\u2028c\u3000d\u2009e\u200bf\ufeffg\u1680 h\u180ei  \u00a0\u00a0 j\n\u2029".encode(),
    "h_scripts": "h\u00e9llo w\u00f6rld \ufb01 \u01c5 \u216b \u00bd \u00b2 \u0663\u0664 \u0966 \u4f60\u597d\uff0c\u4e16\u754c "
                 "\u3053\u3093 \uc548\ub155 \u041f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627 "
                 "\U0001f389\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469 e\u0301 \u0301\u0301x".encode(),
    "i_contractions": b"I'm you're we've they'll she'd it's don't 'S 'T 'RE ''s ''' ' s O'Neil rock'n'roll",
    "j_trailing_spaces": b"ends with spaces   ",
    "k_trailing_newline": b"ends with a newline \n",
    "l_empty": b"",
    "m_random_bytes": bytes(random.getrandbits(8) for _ in range(20000)),
    "n_random_text": "".join(chr(random.choice([random.randint(32, 126), random.randint(0xA0, 0x2FFF),
                                                random.randint(0x3000, 0xD7FF), random.randint(0x10000, 0x1FFFF)]))
                             for _ in range(5000)).encode(),
    "o_endoftext": b"<|endoftext|> is text here <|endoftext|>",
    # Unicode's white space between symbols splits them (\s is Unicode's)
    "p_symbols_spaces": "!!\u00a0!! ..\u3000.. --\u2003-- ''\u00a0'' ((\u2028)) {\u0085} ,\u205f,".encode(),
    "q_space_then_unicode_space": " \u3000x \u00a0y a \u2003b c \u00a0\u00a0d \u3000\u3000 e\u00a0 \u00a0".encode(),
}
for name, data in cases.items():
    open(os.path.join(sys.argv[1], name), "wb").write(data)
PY
HOSTILE=$(ls "$T"/hostile/* | LC_ALL=C sort)
expect_status 0 "tokenize the hostile strings" -- $DLTRAIN tokenize --validation 0 -o "$T/hostile.bin" $HOSTILE
said=$(echo "$OUT" | sed -n 's/.*(\([0-9]*\) ill-formed UTF-8 sequences* replaced.*/\1/p')
if skip_or "hostile strings: the same tokens as tiktoken's gpt2 encoding"; then
    R=$("$PY" "$T/reference.py" "$VOCAB" "$T/hostile.bin" $HOSTILE 2>&1); tap_result $? "hostile strings: the same tokens as tiktoken's gpt2 encoding"
    echo "$R" | sed 's/^/# /'
    [ "$R" = "replaced $said" ] && [ "$said" -gt 0 ]
    tap_result $? "U+FFFD replacements counted as Python's decode(errors='replace') makes them ($said)"
else
    skip_or "U+FFFD replacements counted as Python's decode" || :
fi
$DLTRAIN tokenize --decode "$T/hostile.bin" > "$T/hostile.decoded" 2>"$T/decode.err"
/usr/bin/python3 - "$T/hostile.decoded" $HOSTILE <<'PY'
import sys
want = b"".join(b"<|endoftext|>" + open(p, "rb").read().decode("utf-8", errors="replace").encode() for p in sys.argv[2:])
sys.exit(0 if open(sys.argv[1], "rb").read() == want else 1)
PY
tap_result $? "--decode gives the repaired text back, <|endoftext|> before each file"

# Long runs (issue 40: the merge rescanned a piece after each merge, 16-19 s
# for 200,000 a's): each file but the base64 (where letters, digits and
# symbols alternate) holds pieces of 100,000 bytes or more.  The rescan
# would take half an hour over 2,000,000 a's, the heap about a second, so a
# generous timeout bounds it without timing it.  tiktoken's tokens.
mkdir -p "$T/runs"
/usr/bin/python3 - "$T/runs" <<'PY'
import base64, os, random, sys
random.seed(40)
letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
runs = {
    "a_letter": "a" * 2000000,
    "b_dna": "".join(random.choice("ACGT") for _ in range(300000)),
    "c_letters": "".join(random.choice(letters) for _ in range(300000)),
    "d_base64": base64.b64encode(random.randbytes(150000)).decode(),
    "e_digits": "7" * 100000 + " " + "".join(random.choice("0123456789") for _ in range(200000)),
    "f_symbols": "=" * 100000 + " " + "-+" * 50000 + "\n" + " " * 100000 + "x",
}
for name, text in runs.items():
    open(os.path.join(sys.argv[1], name), "w").write(text)
PY
RUNS=$(ls "$T"/runs/* | LC_ALL=C sort)
timeout 60 $DLTRAIN tokenize --validation 0 -o "$T/runs.bin" $RUNS >/dev/null 2>"$T/runs.err"; s=$?
[ $s = 0 ] || sed 's/^/# /' "$T/runs.err"
[ $s = 0 ]; tap_result $? "long runs (2,000,000 a's, DNA, letters, base64, digits, symbols, spaces) within 60 s (status $s)"
if skip_or "long runs: the same tokens as tiktoken's gpt2 encoding"; then
    R=$("$PY" "$T/reference.py" "$VOCAB" "$T/runs.bin" $RUNS 2>&1); tap_result $? "long runs: the same tokens as tiktoken's gpt2 encoding"
    echo "$R" | sed 's/^/# /'
fi
rm -rf "$T/runs" "$T/runs.bin"

# Training on token files: a GPT of GPT-2's vocabulary (gpt-tiny with vocab 50257).
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --set args.vocab=50257 --dataset tokens --threads 1 --set data.limit_test=16"
expect_status 0 "check: gpt-tiny with GPT-2's vocabulary on the token files" -- $DLTRAIN check $GPT --data "$T/corpus"
expect_output "data: .*tokens.*validation 0\.1, train_files '\*train\*\.bin', val_files '\*val\*\.bin'" \
    "check prints the token dataset's settings"
expect_status 0 "an epoch of 40 steps on train.bin (its first 160 windows), validated on val.bin" -- \
    $DLTRAIN $GPT --data "$T/corpus" --batch 4 --set data.limit_train=160 --metrics "$T/gpt.jsonl"
/usr/bin/python3 - "$T/gpt.jsonl" <<'PY'
import json, math, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l and '"loss"' in l]
first, last = steps[0]["loss"], steps[-1]["loss"]
print("# loss %.3f -> %.3f (ln 50257 = %.3f)" % (first, last, math.log(50257)))
sys.exit(0 if abs(first - math.log(50257)) < 1.0 and last < first - 3 else 1)
PY
tap_result $? "the loss starts near ln 50257 and falls by more than 3 nats"

# Files in llm.c's layout written by Python: uint16 (GPT-2) and uint32 (LLaMA 3) headers.
mkdir -p "$T/llmc" "$T/llama"
/usr/bin/python3 - "$T/corpus.bin" "$T/llmc" "$T/llama" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<3i", b[:12])[2]
toks = struct.unpack("<%dH" % n, b[1024:])
def write(path, magic, version, fmt, toks):
    head = [magic, version, len(toks)] + [0] * 253
    open(path, "wb").write(struct.pack("<256i", *head) + struct.pack("<%d%s" % (len(toks), fmt), *toks))
cut = n - n // 10
write(sys.argv[2] + "/tiny_train.bin", 20240520, 1, "H", toks[:cut])
write(sys.argv[2] + "/tiny_val.bin", 20240520, 1, "H", toks[cut:cut + 5 * 64 + 1])  # 5 windows of 64 + 1
write(sys.argv[3] + "/shard_train_000.bin", 20240801, 7, "I", toks[:cut // 2])
write(sys.argv[3] + "/shard_train_001.bin", 20240801, 7, "I", toks[cut // 2:cut])
write(sys.argv[3] + "/shard_val_000.bin", 20240801, 7, "I", toks[cut:])
PY
expect_status 0 "llm.c's names and uint16 layout, written by Python, train" -- \
    $DLTRAIN $GPT --data "$T/llmc" --batch 4 --max-steps 2
expect_output "on tokens: [0-9]+ training / 5 test samples" "the test split is tiny_val.bin's 5 windows"
expect_status 0 "the uint32 (LLaMA 3) layout in two training shards trains" -- \
    $DLTRAIN $GPT --data "$T/llama" --batch 4 --max-steps 2 --debug-dump-batches "$T/llama.dump"
# The windows are read from the shards (data/token_windows.h): each
# dumped window is the stream's ids from a multiple of 64, the labels the
# next ids (test_data reads every window of a stream of several files,
# seams inside windows among them).
/usr/bin/python3 - "$T/llama.dump" "$T/llama" <<'PY'
import sys
import numpy as np
folder = sys.argv[2]
shards = [np.fromfile(folder + "/shard_train_%03d.bin" % i, dtype=np.uint32)[256:] for i in range(2)]
stream, seam = np.concatenate(shards), shards[0].size
a = np.fromfile(sys.argv[1], dtype=np.int32).reshape(2, 2, 4, 64)
ok = True
for s in range(2):
    for i in range(4):
        x, y = a[s, 0, i], a[s, 1, i]
        starts = [k for k in range(0, stream.size - 64, 64) if (stream[k:k + 64] == x).all() and (stream[k + 1:k + 65] == y).all()]
        ok = ok and len(starts) > 0
print("# seam at %d; windows checked: 8" % seam)
sys.exit(0 if ok else 1)
PY
tap_result $? "each window of the two uint32 shards is the stream's 64 + 1 ids from a multiple of 64"
# A 64M-token file (128 MiB) trains with its windows read where they lie,
# in windows of 8 (8M of them: more than the batcher shuffles through an
# array, so their order is computed position by position, data/
# permutation.h): the process's peak memory is within 8 MiB of a 64K-token
# file's (reading the ids into memory took 8 bytes a token; mapping the
# files, 64 KiB of resident pages for every window drawn; an array of the
# windows' indices, 4 bytes each).
/usr/bin/python3 - "$T/big" <<'PY'
import array, os, random, struct, sys
os.makedirs(sys.argv[1], exist_ok=True)
random.seed(7)
base = array.array("H", [random.randrange(256) for _ in range(1 << 16)])
for name, toks in (("small.bin", base), ("big.bin", base * 1024)):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
        toks.tofile(f)
PY
/usr/bin/python3 - $DLTRAIN --net "$top_srcdir/nets/gpt-tiny.yaml" --dataset tokens --threads 1 \
    --set data.limit_test=16 --batch 4 --max-steps 50 --context 8 --data "$T/big" <<'PY'
import resource, subprocess, sys
peak = {}
for name in ("small", "big"):
    cmd = sys.argv[1:-1] + [sys.argv[-1] + "/" + name + ".bin"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print("# " + name + ": exit %d: %s" % (r.returncode, r.stderr[-300:]))
        sys.exit(1)
    peak[name] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert peak[name] >= before / 1024  # the small run first: the big run's peak is the later maximum
print("# peak RSS: %.1f MiB with 64K tokens, %.1f MiB with 64M tokens" % (peak["small"], peak["big"]))
sys.exit(0 if peak["big"] - peak["small"] < 8 else 1)
PY
tap_result $? "a 64M-token file (8M windows) costs less than 8 MiB more than a 64K-token one (peak RSS)"
rm -rf "$T/big"

# Bad input: each stops before training with what was wrong: exit 1, as every
# malformed dataset (dltrain(1)), and check, the preflight, exits 2 on it.
expect_status 1 "a token past the vocabulary (gpt-tiny's 256 bytes)" -- \
    $DLTRAIN --net "$top_srcdir/nets/gpt-tiny.yaml" --dataset tokens --data "$T/corpus" --max-steps 1
expect_output "train.bin: token [0-9]+ is [0-9]+, not an id below 256 \(the network's vocabulary" \
    "the message names the file, the token, its id and the vocabulary"
head -c 5000 "$T/corpus/train.bin" > "$T/cut.bin"
expect_status 1 "a truncated token file" -- $DLTRAIN $GPT --data "$T/cut.bin" --max-steps 1
expect_output "cut.bin: truncated: the header says [0-9]+ tokens of 2 bytes" "the message says truncated and how many tokens the header says"
/usr/bin/python3 -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[0] ^= 1; open(sys.argv[2], 'wb').write(b)
b[0] ^= 1; b[4] = 2; open(sys.argv[3], 'wb').write(b)" "$T/corpus/train.bin" "$T/magic.bin" "$T/version.bin"
$DLTRAIN check $GPT --data "$T/magic.bin" > "$T/magic.out" 2>&1; s1=$?
$DLTRAIN check $GPT --data "$T/version.bin" > "$T/version.out" 2>&1; s2=$?
[ $s1 = 2 ] && grep -q "magic.bin: not a token file: its first int32 is 20240521" "$T/magic.out" &&
    [ $s2 = 2 ] && grep -q "version.bin: token file version 2 with magic 20240520" "$T/version.out"
tap_result $? "a wrong magic and a wrong version: check exits 2, naming each"
expect_status 2 "a vocabulary that is not there" -- $DLTRAIN tokenize --vocab nosuch -o "$T/x" $FILES
expect_output "vocabulary 'nosuch': no nosuch.tiktoken \(looked in .*\): tools/deps fetches" "the message says where it looked and how to fetch it"

# --decode reads a token file as training does: a malformed or unreadable
# file is a run-time failure, exit 1, naming what is wrong; a usage error
# stays 2.
/usr/bin/python3 -c "
import struct, sys
open(sys.argv[1], 'wb').write(struct.pack('<256i', *([20240520, 1, 3] + [0] * 253)) + struct.pack('<3H', 50256, 64, 50300))
" "$T/past.bin"
for f in cut past nosuch; do
    $DLTRAIN tokenize --decode "$T/$f.bin" >/dev/null 2>"$T/decode_$f.err"; eval "s_$f=\$?"
done
[ "$s_cut" = 1 ] && grep -q "cut.bin: truncated: the header says" "$T/decode_cut.err"
tap_result $? "--decode of a truncated token file exits 1, as training does (status $s_cut)"
[ "$s_past" = 1 ] && grep -q "past.bin: token 2 is 50300, not in the vocabulary (50257 tokens)" "$T/decode_past.err"
tap_result $? "--decode of a token past the vocabulary exits 1, naming it (status $s_past)"
[ "$s_nosuch" = 1 ] && grep -q "nosuch.bin" "$T/decode_nosuch.err"
tap_result $? "--decode of a missing file exits 1, naming it (status $s_nosuch)"
$DLTRAIN tokenize --decode >/dev/null 2>"$T/decode_usage.err"; s=$?
[ $s = 2 ] && grep -q "Try 'dltrain tokenize --help'" "$T/decode_usage.err"
tap_result $? "--decode without a file is a usage error: exit 2 (status $s)"
# Outputs (issue 40): one that cannot be written (a file size limit, as a
# full disk) is a run-time failure, status 1 as for export; a symbolic link
# given as -o keeps pointing at the tokens.
sh -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' sh $DLTRAIN tokenize --validation 0 -o "$T/big.bin" $FILES \
    > /dev/null 2> "$T/big.err"; st=$?
[ $st -eq 1 ] && grep -q "big.bin: cannot write: File too large" "$T/big.err" && [ ! -e "$T/big.bin" ]
tap_result $? "tokenize -o past the file size limit: status 1 (got $st), the reason, no file"
ln -s linked.bin "$T/link.bin"
$DLTRAIN tokenize --validation 0 -o "$T/link.bin" $FILES > /dev/null 2>&1
[ $? -eq 0 ] && [ -L "$T/link.bin" ] && cmp -s "$T/linked.bin" "$T/corpus.bin"
tap_result $? "tokenize -o through a symbolic link writes the file it names and keeps the link"
exit $((tap_failed > 0))
