#!/bin/sh
# test_tensorboard.sh: --tensorboard DIR, read by TensorBoard's own loader
# (tests/check_tensorboard.py, in the virtual environment of tools/deps;
# skipped where PyPI could not be reached).
# - every scalar, tag and step equals the --metrics JSON lines of the run;
# - a file cut at any byte of its last record reads as the records before it,
#   and so does one whose middle record has a byte flipped (the checksums);
# - a run killed after step 25 has all 25 steps in its file; resumed from
#   its step-20 checkpoint it gives one curve, steps 1-40 once each (the
#   resumption's START event drops the killed run's steps 21-25), the later
#   values the resumed run's;
# - a run stopped by SIGTERM keeps every step it reported;
# - a token network's curves include tokens/s (window x samples/s);
# - rank 0 alone writes under mpirun; a parameter server's workers each get
#   their own curves; a folder that cannot be made is refused;
# - a full disk (a file size limit) fails the run and leaves whole records.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
VENV_PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
if ! "$VENV_PY" -c "import tensorboard" 2>/dev/null; then
    echo "1..0 # SKIP TensorBoard is not installed in ${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv} (tools/deps installs it from PyPI)"
    exit 0
fi
if "$DLTRAIN" --version | grep -q "TensorBoard: no"; then
    echo "1..0 # SKIP this dltrain was built without TensorBoard event files (protobuf-c, ISA-L)"
    exit 0
fi
tap_plan 27
CHECK="$VENV_PY $top_srcdir/tests/check_tensorboard.py"
B="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 500 --epochs 2 --threads 1 --eval-every 10 --quiet"

# ---------------------------------------------------------------- one run
expect_status 0 "a run with --tensorboard and --metrics" -- $DLTRAIN $B --tensorboard "$T/tb/run1" --metrics "$T/m1.jsonl"
ls "$T/tb/run1" | grep -Eq "^events\.out\.tfevents\.[0-9]+\.$(hostname)\.[0-9]+\.0$"
tap_result $? "the file is named as TensorBoard's writers name it (events.out.tfevents.TIME.HOST.PID.N)"
expect_status 0 "TensorBoard reads every scalar, tag and step of the JSON lines" -- $CHECK compare "$T/tb/run1" "$T/m1.jsonl"
echo "$OUT" | sed 's/^/# /'
expect_status 0 "a cut at any byte of the last record: the records before it, read whole" -- $CHECK truncate "$T/tb/run1"
echo "$OUT" | sed 's/^/# /'
expect_status 0 "a byte flipped in a record's length or data: the records before it, read whole" -- \
    $CHECK corrupt "$T/tb/run1"
echo "$OUT" | sed 's/^/# /'

# ---------------------------------------------------------------- killed, resumed
D="$T/ckpt"
$DLTRAIN $B --checkpoint-dir "$D" --checkpoint-every 10 --tensorboard "$T/tb/run2" --metrics "$T/m2.jsonl" \
    --debug-hold-at-step 25 > "$T/killed.txt" 2>&1 &
pid=$!
wait_steps "$T/m2.jsonl" 25
kill -KILL $pid; wait $pid 2> /dev/null
expect_status 0 "the killed run's event file holds every step it reported (1-25)" -- \
    $CHECK compare "$T/tb/run2" "$T/m2.jsonl.partial"
echo "$OUT" | sed 's/^/# /'
expect_status 0 "the killed run resumes from its step-20 checkpoint" -- \
    $DLTRAIN $B --checkpoint-dir "$D" --resume --tensorboard "$T/tb/run2" --metrics "$T/m3.jsonl"
[ "$(ls "$T/tb/run2" | wc -l)" -eq 2 ]; tap_result $? "the resumed run writes a second event file in the same folder"
expect_status 0 "one curve: steps 1-20 the killed run's, 21-40 the resumed run's, none twice" -- \
    $CHECK compare "$T/tb/run2" "$T/m2.jsonl.partial" "$T/m3.jsonl"
echo "$OUT" | sed 's/^/# /'
grep -q '"global_step":25,' "$T/m2.jsonl.partial"; tap_result $? "the killed run had reported steps 21-25 (which the curve drops)"

# ---------------------------------------------------------------- SIGTERM
$DLTRAIN $B --tensorboard "$T/tb/run3" --metrics "$T/m4.jsonl" --debug-hold-at-step 15 > "$T/stopped.txt" 2>&1 &
pid=$!
stop_after "$T/m4.jsonl" 15 TERM $pid
wait $pid; st=$?
[ $st -eq 1 ]; tap_result $? "SIGTERM stops the run (status 1: no checkpoint folder; got $st)"
expect_status 0 "the stopped run's event file holds every step it reported" -- $CHECK compare "$T/tb/run3" "$T/m4.jsonl"
echo "$OUT" | sed 's/^/# /'

# ---------------------------------------------------------------- token inputs
. "$top_srcdir/tests/text_corpus.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
expect_status 0 "gpt-tiny on text, 12 steps" -- $DLTRAIN --net "$top_srcdir/nets/gpt-tiny.yaml" \
    --data "$top_builddir/tests/text-corpus" --threads 1 --max-steps 12 --eval-every 6 --limit-test 64 --quiet \
    --tensorboard "$T/tb/gpt" --metrics "$T/gpt.jsonl"
expect_status 0 "its curves, tokens/s among them, are the JSON lines'" -- $CHECK compare "$T/tb/gpt" "$T/gpt.jsonl"
echo "$OUT" | sed 's/^/# /'
# a mixture of experts (capacity 0.5: choices dropped): the balancing loss,
# the load of all layers and of each layer ("experts" lines) as TensorBoard curves
expect_status 0 "moe-tiny on text, 8 steps" -- $DLTRAIN --net "$top_srcdir/nets/moe-tiny.yaml" \
    --data "$top_builddir/tests/text-corpus" --set args.capacity_factor=0.5 --threads 1 --max-steps 8 --limit-test 16 \
    --quiet --tensorboard "$T/tb/moe" --metrics "$T/moe.jsonl"
expect_status 0 "its curves, each layer's expert load among them, are the JSON lines'" -- \
    $CHECK compare "$T/tb/moe" "$T/moe.jsonl"
echo "$OUT" | sed 's/^/# /'
/usr/bin/python3 - "$T/moe.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if r["event"] == "step"]
layers = [r for r in rows if r["event"] == "experts"]
names = sorted({r["layer"] for r in layers})
# batch 16 x 64 positions x top_k 2 choices a layer and step, each taken or dropped
ok = names == ["model.layers.%d.block_sparse_moe" % i for i in range(2)] and len(layers) == 2 * len(steps) == 16
ok = ok and all(r["choices"] == 2048 and sum(r["taken"]) + r["dropped"] == 2048 and len(r["taken"]) == 4 for r in layers)
ok = ok and all(abs(s["expert_dropped"] - sum(r["dropped"] for r in layers if r["global_step"] == s["global_step"])
                    / 4096) < 1e-6 for s in steps)
print("# %d experts lines for %s; step 1 taken %s, dropped %g" % (len(layers), names, layers[0]["taken"], layers[0]["dropped"]))
sys.exit(0 if ok else 1)
EOF
tap_result $? "  its --metrics holds each layer's choices per expert and dropped every step, adding up to the step's share dropped"
/usr/bin/python3 - "$T/gpt.jsonl" <<'EOF'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "step"]
sys.exit(0 if rows and all(abs(r["tokens_per_s"] - 64 * r["samples_per_s"]) <= 1e-6 * r["tokens_per_s"] for r in rows) else 1)
EOF
tap_result $? "tokens/s is 64 (gpt-tiny's window) times samples/s"

# ---------------------------------------------------------------- ranks, refusals
if command -v mpirun > /dev/null; then
    expect_status 0 "2 data-parallel ranks" -- mpirun --oversubscribe -np 2 $DLTRAIN $B --tensorboard "$T/tb/run4" \
        --metrics "$T/m5.jsonl"
    [ "$(ls "$T/tb/run4" | wc -l)" -eq 1 ] && $CHECK compare "$T/tb/run4" "$T/m5.jsonl" > /dev/null
    tap_result $? "rank 0 alone writes, the JSON lines' values"
    expect_status 0 "a parameter server and 2 workers (ssp:2)" -- mpirun --oversubscribe -np 3 $DLTRAIN $B \
        --consistency ssp:2 --tensorboard "$T/tb/run5" --metrics "$T/m6.jsonl"
    expect_status 0 "each worker's steps its own curves (workerW/loss, ...), the JSON lines' values" -- \
        $CHECK compare "$T/tb/run5" "$T/m6.jsonl"
    echo "$OUT" | sed 's/^/# /'
else
    for i in 1 2 3 4; do tap_result 0 "# SKIP no mpirun"; done
fi
v=$(dpkg-query -W -f='${Version}' libprotobuf-c-dev 2>/dev/null | sed 's/-.*//')
"$DLTRAIN" --version | grep -q "^TensorBoard: protobuf-c ${v:-?}, ISA-L "
tap_result $? "--version names protobuf-c ${v:-(no dpkg)} as dpkg does, and ISA-L"
expect_status 1 "a folder that cannot be made fails the run" -- $DLTRAIN $B --tensorboard /dev/null/tb
expect_output "cannot create folder /dev/null/tb: Not a directory" "naming the folder and the reason"

# ---------------------------------------------------------------- a full disk
# A file size limit stands in for a full disk (EFBIG part-way through a
# write, SIGXFSZ ignored): the run fails with status 1 and the reason, and
# the file ends on a whole record (each record's framing and checksums read
# here), none cut off.
sh -c 'trap "" XFSZ; ulimit -f 4; exec "$@"' sh $DLTRAIN $B --tensorboard "$T/tb/full" > /dev/null 2> "$T/full.err"; st=$?
[ $st -eq 1 ] && grep -q "^dltrain: --tensorboard: cannot write .*: File too large" "$T/full.err"
tap_result $? "a run whose event file meets a file size limit fails with status 1 (got $st), naming the reason"
/usr/bin/python3 - "$T"/tb/full/events.* <<'EOF2'
import struct, sys
table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
def masked(b):
    c = 0xFFFFFFFF
    for x in b:
        c = table[(c ^ x) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
data, pos, n = open(sys.argv[1], "rb").read(), 0, 0
while pos < len(data):
    head = data[pos:pos + 12]
    assert len(head) == 12, "a record cut in its header at byte %d of %d" % (pos, len(data))
    size, = struct.unpack("<Q", head[:8])
    assert struct.unpack("<I", head[8:])[0] == masked(head[:8]), "bad length checksum at byte %d" % pos
    body = data[pos + 12:pos + 12 + size + 4]
    assert len(body) == size + 4, "a record cut in its data at byte %d of %d" % (pos, len(data))
    assert struct.unpack("<I", body[size:])[0] == masked(body[:size]), "bad data checksum at byte %d" % pos
    pos, n = pos + 16 + size, n + 1
assert n >= 2, n
print("# %d whole records, %d bytes" % (n, len(data)))
EOF2
tap_result $? "its event file ends on a whole record"
exit $((tap_failed > 0))
