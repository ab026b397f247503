#!/bin/sh
# test_checkpoint_kill.sh: a writer saving checkpoints in a loop (with --keep 2
# rotation) is SIGKILLed at random moments, many times; after every kill the
# folder must still hold a checkpoint that loads and verifies, and each
# restart must find a step at least as far as before.
. "${top_srcdir:-.}/tests/tap.sh"
ROUNDS=${CKPT_KILL_ROUNDS:-20}
tap_plan 4
TOOL="$top_builddir/tests/ckpt_tool"
[ -x "$TOOL" ] || { echo "Bail out! $TOOL not built"; exit 1; }
D="$TMPDIR_TEST/ckpts"
mkdir -p "$D"
"$TOOL" write "$D/ckpt-0000000000.safetensors"
ok=0; last=0; monotonic=0; tmpleft=0
i=0
while [ $i -lt $ROUNDS ]; do
    i=$((i + 1))
    "$TOOL" loop "$D" &
    pid=$!
    # 40-390 ms: start-up takes ~30 ms and one checkpoint ~35 ms (two fsyncs),
    # so most kills land while a file is being written or renamed
    sleep "0.$(( (i * 7919 + $$) % 35 + 4 ))"
    kill -9 $pid
    wait $pid 2>/dev/null
    ls "$D" | grep -q '\.tmp\.' && tmpleft=$((tmpleft + 1))
    if out=$("$TOOL" check "$D" 2>&1); then
        ok=$((ok + 1))
        step=$(echo "$out" | sed -n 's/^step \([0-9]*\),.*/\1/p')
        [ "${step:-0}" -ge "$last" ] || { monotonic=1; echo "# step went back: $step < $last"; }
        last=${step:-0}
    else
        echo "# round $i: $out"
    fi
done
echo "# $ROUNDS kills, $ok loadable afterwards, $tmpleft left a temporary file, last step $last"
[ $ok -eq $ROUNDS ]; tap_result $? "after each of $ROUNDS SIGKILLs the latest checkpoint loads"
[ $monotonic -eq 0 ]; tap_result $? "the checkpoint found never goes back in steps"
[ "$last" -ge 2 ]; tap_result $? "training made progress across the kills (step $last)"
"$TOOL" loop "$D" & pid=$!; sleep 0.3; kill -9 $pid; wait $pid 2>/dev/null
"$TOOL" check "$D" >/dev/null 2>&1
n=$(ls "$D" | grep -c 'safetensors$')
[ "$n" -le 3 ]; tap_result $? "rotation keeps the folder small ($n checkpoints)"
[ $tap_failed -eq 0 ]
