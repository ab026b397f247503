#!/bin/sh
# test_trace.sh: dltrain --trace files checked by tests/check_trace.py
# against the grid and the schedule's definition: LeNet-5 on 4 ranks with
# tp=2,pp=2 (1f1b; one rank's trace clock skewed by 50 ms, which the
# alignment must take out) and dp=2,pp=2 (gpipe, gradient allreduces on the
# communication thread), on one process with 2 chunks, and bench step; a
# stop signal and a non-finite loss still leave a complete file; a path
# that cannot be written stops the run before training.
. "$top_srcdir/tests/tap.sh"
if ! "$DLTRAIN" --help >/dev/null 2>&1; then
    echo "1..0 # SKIP dltrain not available"; exit 0
fi
T="$TMPDIR_TEST"
tap_plan 13
CHECK="/usr/bin/python3 $top_srcdir/tests/check_trace.py"
LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 640 --limit-test 100 --epochs 1 --threads 1 --quiet"

# traced NAME RANKS ARGS...: a run (1 rank: no mpirun) tracing into T/NAME.json; its output in T/NAME.txt.
traced() {
    name=$1 n=$2
    shift 2
    if [ "$n" -eq 1 ]; then
        $DLTRAIN "$@" --trace "$T/$name.json" > "$T/$name.txt" 2>&1
    else
        timeout 300 mpirun --oversubscribe -np "$n" $DLTRAIN "$@" --trace "$T/$name.json" > "$T/$name.txt" 2>&1
    fi
}

# stop_after NAME N SIGNAL PID: sends SIGNAL to PID once T/NAME.jsonl.partial
# (--metrics) has N steps; the run holds there (--debug-hold-at-step N).
stop_after() {
    for i in $(seq 1 1200); do
        [ "$(grep -c '"step"' "$T/$1.jsonl.partial" 2>/dev/null)" -ge "$2" ] 2>/dev/null && break
        sleep 0.05
    done
    kill -"$3" "$4"
    wait "$4"
}

# shows NAME: what went wrong with a run.
shows() {
    sed 's/^/#   /' "$T/$1.txt" | head -8
}

# 1 process: 2 chunks of gradient accumulation (1f1b on one stage: F0 B0 F1 B1).
traced one 1 $LENET --max-steps 5 --trace-steps 4 --pipeline-chunks 2 || shows one
$CHECK "$T/one.json" --chunks 2 --steps 4
tap_result $? "one process: 4 steps of passes, layers and optimizer, nested, in 1f1b order"

traced gpipe1 1 $LENET --max-steps 2 --pipeline-chunks 3 --pipeline-schedule gpipe || shows gpipe1
$CHECK "$T/gpipe1.json" --chunks 3 --steps 2 --schedule gpipe
tap_result $? "one process, gpipe: all forwards, then all backwards"

if command -v mpirun >/dev/null 2>&1; then
    traced tp2pp2 4 $LENET --max-steps 4 --trace-steps 3 --pipeline-chunks 4 --grid tp=2,pp=2 \
        --debug-trace-skew 3:50 || shows tp2pp2
    $CHECK "$T/tp2pp2.json" --grid 1,2,2 --chunks 4 --steps 3 --skew-rank 3 --skew-ms 50
    tap_result $? "tp=2,pp=2, 1f1b: every rank, the schedule, messages and collectives line up (rank 3 skewed 50 ms)"

    traced dp2pp2 4 $LENET --max-steps 3 --pipeline-chunks 4 --grid dp=2,pp=2 --pipeline-schedule gpipe || shows dp2pp2
    $CHECK "$T/dp2pp2.json" --grid 2,1,2 --chunks 4 --steps 3 --schedule gpipe
    tap_result $? "dp=2,pp=2, gpipe: the schedule, messages, and gradient buckets on the communication thread"
    /usr/bin/python3 - "$T/dp2pp2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["dltrain"]["ranks"]
ok = len(s) == 4 and all(0 < r["idle_fraction"] < 1 and r["steps_recorded"] == 3 and r["busy_s"] > 0 for r in s)
print("# idle fraction per rank: %s" % ", ".join("%.2f" % r["idle_fraction"] for r in s))
sys.exit(0 if ok else 1)
PY
    tap_result $? "the summary gives every rank's recorded steps and idle fraction"

    # A stop signal after step 2 (held there; mpirun passes SIGUSR1 on, timeout
    # would not): steps 1-3 recorded on every rank.
    mpirun --oversubscribe -np 4 $DLTRAIN $LENET --pipeline-chunks 4 --grid tp=2,pp=2 \
        --metrics "$T/stop.jsonl" --debug-hold-at-step 2 --trace "$T/stop.json" > "$T/stop.txt" 2>&1 &
    stop_after stop 2 USR1 $!
    grep -q "stopped by a signal after step 3" "$T/stop.txt" && $CHECK "$T/stop.json" --grid 1,2,2 --chunks 4 --steps 3
    tap_result $? "4 ranks stopped by a signal after step 3: the file holds steps 1-3 of every rank"

    traced nan4 4 $LENET --lr 1e6 --max-steps 20 --pipeline-chunks 4 --grid tp=2,pp=2 --no-skip-nonfinite
    st=$?
    grep -q "the loss is -\{0,1\}nan" "$T/nan4.txt" && [ $st -ne 0 ] && \
        $CHECK "$T/nan4.json" --grid 1,2,2 --chunks 4 --steps 3
    tap_result $? "4 ranks stopped by a non-finite loss at step 3: the file holds steps 1-3 of every rank"
else
    for i in 1 2 3 4 5; do tap_result 0 "# SKIP no mpirun"; done
fi

traced nan1 1 $LENET --lr 1e6 --max-steps 20 --no-skip-nonfinite
st=$?
[ $st -eq 1 ] && $CHECK "$T/nan1.json" --steps 3
tap_result $? "one process stopped by a non-finite loss (status $st): the file holds its 3 steps"

$DLTRAIN $LENET --max-steps 2 --trace-steps 0 --pipeline-chunks 2 --debug-hold-at-step 1 --trace "$T/stop1.json" \
    --metrics "$T/stop1.jsonl" > "$T/stop1.txt" 2>&1 &
stop_after stop1 1 TERM $!
grep -q "stopped by a signal after step 2" "$T/stop1.txt" && $CHECK "$T/stop1.json" --chunks 2 --steps 2
tap_result $? "one process stopped by SIGTERM after step 2: a complete file"

expect_status 0 "bench step --trace" -- $DLTRAIN bench step --net "$top_srcdir/nets/lenet5.yaml" --batch 16 \
    --steps 3 --warmup 1 --no-peak --threads 1 --trace "$T/bench.json" --trace-steps 3
$CHECK "$T/bench.json" --schedule none --steps 3
tap_result $? "bench step: its first 3 steps (warm-up included), layers and optimizer"

expect_status 1 "a --trace path that cannot be written stops the run before training" -- \
    $DLTRAIN $LENET --max-steps 2 --trace "$T/no/such/folder/t.json"
expect_output "^dltrain: --trace: .*no/such/folder/t.json" "the message names --trace and the path"

[ "$tap_failed" -eq 0 ]
