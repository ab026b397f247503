#!/bin/sh
# test_flight_recorder.sh: the flight recorder as a user meets it (issue
# 46).  A rank that stops entering collectives (--debug-stop-calls, a
# testing aid) at a chosen gradient bucket (dp=4) or a chosen layer's
# tensor-parallel sum (tp=2 x pp=2): within the stall timeout the job
# ends, and its message names the group, the rank that never entered the
# collective, the collective's number, what it was for (the bucket, the
# layer) and the step, and where every rank's record is; each record is
# JSON lines (a header naming the rank's groups, then its calls) that
# Python reads, the stopped rank's last collective one short of the
# others'.  A rank dying of a fatal signal says which, where, and leaves
# its record.  A run without a stall writes no record.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 13
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --max-steps 20
    --limit-test 32 --quiet --stall-timeout 3s"
MPI="timeout 120 mpirun --oversubscribe -np 4"

expect_status 1 "dp=4, rank 3 never enters step 3's bucket 0" -- \
    $MPI $DLTRAIN $GPT --flight-recorder "$T/dp" --debug-stop-calls "3:3:bucket 0"
expect_output "in the data group, ranks 0, 1, 2 entered gradients collective #[0-9]+ \\(sum \\(allreduce\\), [0-9]+ bytes, bucket 0\\) in step 3, and rank 3 never did" \
    "  the message names the group, the ranks in it and the one that never entered, the bucket and the step"
expect_output "flight records of 4 of 4 ranks in $T/dp/flight-rank\\*\\.jsonl" "  and where the four records are"
/usr/bin/python3 - "$T/dp" <<'PY'
import json, sys
last = {}
for r in range(4):
    lines = [json.loads(l) for l in open("%s/flight-rank%05d.jsonl" % (sys.argv[1], r))]
    head, calls = lines[0], lines[1:]
    assert head["rank"] == r and head["world"] == 4 and head["groups"][0] == {"group": "data", "ranks": [0, 1, 2, 3]}
    last[r] = max(c["seq"] for c in calls if c["thread"] == "gradients")
print("# last gradients collective per rank: %s" % last)
sys.exit(0 if last[0] == last[1] == last[2] == last[3] + 1 else 1)
PY
tap_result $? "  every record reads as JSON lines; the stopped rank's last collective is one short of the others'"

# the same folder again: the last run's request and records are not taken for this one's
expect_status 1 "dp=4 again in the same folder, rank 1 never enters step 4's bucket 0" -- \
    $MPI $DLTRAIN $GPT --flight-recorder "$T/dp" --debug-stop-calls "4:1:bucket 0"
expect_output "ranks 0, 2, 3 entered gradients collective #[0-9]+ \\(sum \\(allreduce\\), [0-9]+ bytes, bucket 0\\) in step 4, and rank 1 never did" \
    "  the finding is this run's, not the records the last one left there"

expect_status 1 "tp=2 x pp=2, rank 2 never enters h.1.attn.c_proj's sum in step 3" -- \
    $MPI $DLTRAIN $GPT --grid tp=2,pp=2 --flight-recorder "$T/tp" --debug-stop-calls "3:2:h.1.attn.c_proj"
expect_output "in the tensor group, rank 3 entered main collective #[0-9]+ \\(sum \\(allreduce\\), [0-9]+ bytes, h\\.1\\.attn\\.c_proj\\) in step 3, and rank 2 never did" \
    "  the message names the tensor group's missing rank and the layer"
# with sequence parallelism the bands of rows are gathered in a step of their own before h.1.mlp.c_fc
expect_status 1 "tp=2 x pp=2 with sequence parallelism, rank 2 never enters the gather before h.1.mlp.c_fc" -- \
    $MPI $DLTRAIN $GPT --grid tp=2,pp=2 --sequence-parallel --flight-recorder "$T/sp" \
    --debug-stop-calls "3:2:h.1.mlp.c_fc"
expect_output "in the tensor group, rank 3 entered main collective #[0-9]+ \\(allgather, [0-9]+ bytes, h\\.1\\.mlp\\.c_fc\\) in step 3, and rank 2 never did" \
    "  the gather is named by the layer it serves"

# a rank that dies of a fatal signal (--debug-crash-calls: SIGSEGV inside
# a layer's tensor-parallel sum) says so, in which layer and step, and
# leaves its record (the header's "fatal"; its last call the one it died in)
$MPI $DLTRAIN $GPT --grid tp=2,pp=2 --flight-recorder "$T/crash" --debug-crash-calls "3:2:h.1.attn.c_proj" \
    > "$T/crash.out" 2> "$T/crash.err"
st=$?
grep -q "dltrain: rank 2: SIGSEGV (Segmentation fault) at step 3 in 'h.1.attn.c_proj'; its flight record: $T/crash/flight-rank00002.jsonl" "$T/crash.err"
tap_result $(( st == 0 || $? )) "a rank that dies of SIGSEGV names the signal, the step, the layer and its record"
/usr/bin/python3 - "$T/crash/flight-rank00002.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, calls = lines[0], lines[1:]
print("# the record's header:", {k: head[k] for k in ("rank", "step", "fatal")}, "; its last call:", calls[-1]["label"])
sys.exit(0 if head["fatal"] == "SIGSEGV" and head["rank"] == 2 and head["step"] == 3 and
         calls[-1]["label"] != "h.1.attn.c_proj" and calls[-1]["step"] == 3 else 1)
PY
tap_result $? "  its record reads as JSON, its header says SIGSEGV at step 3"

$MPI $DLTRAIN $GPT --max-steps 5 --flight-recorder "$T/none" > /dev/null 2>&1 && [ ! -e "$T/none" ]
tap_result $? "a run without a stall writes no record"
exit 0
