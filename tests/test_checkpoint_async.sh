#!/bin/sh
# test_checkpoint_async.sh: --checkpoint-async as a user meets it (issue
# 46): the step waits only for the state's copy, a thread writes the file.
# Its files are byte for byte a synchronous run's (one process, and a
# dp=2 x pp=2 grid, whose shards are gathered into the copy); 20 runs
# SIGKILLed at random moments each leave only complete checkpoints, the
# newest of which resumes to the uninterrupted run's weights bit for bit;
# SIGTERM still writes its checkpoint before the run stops (status 75).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
tap_plan 7
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --limit-test 32 --quiet"

same_files() { # DIR1 DIR2: the same checkpoint names, each byte for byte
    [ "$(ls "$1")" = "$(ls "$2")" ] && [ -n "$(ls "$1")" ] || { echo "# $1: $(ls "$1" | tr '\n' ' '); $2: $(ls "$2" | tr '\n' ' ')"; return 1; }
    for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || { echo "# $(basename "$f") differs"; return 1; }; done
}
$DLTRAIN $GPT --max-steps 20 --checkpoint-dir "$T/sync" --checkpoint-every 5 > /dev/null 2>&1 &&
    $DLTRAIN $GPT --max-steps 20 --checkpoint-dir "$T/async" --checkpoint-every 5 --checkpoint-async > "$T/async.txt" 2>&1 &&
    same_files "$T/sync" "$T/async" && grep -q "^last checkpoint: $T/async/ckpt-0000000020.safetensors" "$T/async.txt"
tap_result $? "one process: the asynchronous checkpoints are the synchronous ones byte for byte (and the last is reported)"
if command -v mpirun > /dev/null; then
    MPI="timeout 200 mpirun --oversubscribe -np 4"
    $MPI $DLTRAIN $GPT --max-steps 20 --grid dp=2,pp=2 --checkpoint-dir "$T/gsync" --checkpoint-every 5 > /dev/null 2>&1 &&
        $MPI $DLTRAIN $GPT --max-steps 20 --grid dp=2,pp=2 --checkpoint-dir "$T/gasync" --checkpoint-every 5 \
            --checkpoint-async > /dev/null 2>&1 && same_files "$T/gsync" "$T/gasync"
    tap_result $? "dp=2 x pp=2: the shards gathered into the copy, written as the synchronous run writes them"
else
    tap_result 0 "# SKIP no mpirun"
fi

# SIGKILL at random moments (a run of 45 steps, a checkpoint every 3, the 2 newest kept): within
# the time the uninterrupted run took here (so a loaded machine still kills them mid-run)
t0=$(date +%s.%N)
$DLTRAIN $GPT --max-steps 45 --dump-weights "$T/kill-whole.bin" > /dev/null 2>&1 &&
    t45=$(/usr/bin/python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)") &&
    $DLTRAIN $GPT --max-steps 60 --dump-weights "$T/whole.bin" > /dev/null 2>&1
tap_result $? "the uninterrupted runs (45 and 60 steps)"
bad=0 resumed=0
for trial in $(seq 1 20); do
    d="$T/kill$trial"
    $DLTRAIN $GPT --max-steps 45 --checkpoint-dir "$d" --checkpoint-every 3 --keep 2 --checkpoint-async \
        > /dev/null 2>&1 &
    pid=$!
    sleep "$(/usr/bin/python3 -c "import random; random.seed($trial); print('%.3f' % (random.uniform(0.1, 0.95) * $t45))")"
    kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    newest=$(ls "$d" 2> /dev/null | grep '^ckpt-[0-9]*\.safetensors$' | sort | tail -1)
    [ -z "$newest" ] && continue # killed before its first checkpoint
    for f in "$d"/ckpt-*.safetensors; do # every file under a checkpoint's name is whole
        step=$(basename "$f" .safetensors | sed 's/ckpt-0*//')
        $DLTRAIN $GPT --max-steps "$step" --resume "$f" > /dev/null 2> "$T/load.err" ||
            { echo "# trial $trial: $(basename "$f") does not load: $(head -1 "$T/load.err")"; bad=$((bad + 1)); }
    done
    $DLTRAIN $GPT --max-steps 45 --resume "$d/$newest" --dump-weights "$T/r$trial.bin" > /dev/null 2>&1 &&
        cmp -s "$T/kill-whole.bin" "$T/r$trial.bin" || { echo "# trial $trial: resumed from $newest, other weights"; bad=$((bad + 1)); }
    resumed=$((resumed + 1))
done
echo "# $resumed of 20 killed runs had written a checkpoint"
[ "$bad" -eq 0 ] && [ "$resumed" -ge 10 ]
tap_result $? "20 runs SIGKILLed at random: every checkpoint loads, the newest resumes to the uninterrupted weights bit for bit"

# SIGTERM: the stop's checkpoint is written before the run ends
$DLTRAIN $GPT --max-steps 60 --checkpoint-dir "$T/term" --checkpoint-every 4 --checkpoint-async \
    --debug-hold-at-step 7 > "$T/term.txt" 2>&1 &
pid=$!
for i in $(seq 1 100); do grep -q . "$T/term.txt" 2> /dev/null && [ -e "$T/term/ckpt-0000000004.safetensors" ] && break; sleep 0.1; done
sleep 0.5
kill -TERM "$pid"
wait "$pid"; st=$?
[ "$st" -eq 75 ]; tap_result $? "SIGTERM stops an asynchronous run with status 75 (got $st)"
ls "$T/term" | grep -q 'ckpt-0000000008.safetensors'
tap_result $? "  after writing the stop's checkpoint (step 8) at once"
$DLTRAIN $GPT --max-steps 60 --resume "$T/term/ckpt-0000000008.safetensors" --dump-weights "$T/term.bin" > /dev/null 2>&1 &&
    cmp -s "$T/whole.bin" "$T/term.bin"
tap_result $? "  which resumes to the uninterrupted weights bit for bit"
exit 0
