#!/bin/sh
# test_job_messages.sh: one message per job (comm/agree.h, cli/job_output.h).
# Under mpirun with 4 ranks, a message every rank would print (a bad network
# file, a bad option, a grid that does not fit, a schedule the trainer
# refuses) is printed once, without a rank, and every rank exits with the
# same status (each rank's status recorded by a wrapper shell, mpirun told
# not to end the job when the first rank exits); a failure
# only some ranks meet (MPMD: other options on some ranks) is printed by the
# lowest of them, naming its rank, while rank 0 trains on.
. "$top_srcdir/tests/tap.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 15
LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 256 --limit-test 64 --threads 1 --quiet"

# job NAME ARGS...: dltrain on 4 ranks, each rank's exit status in T/NAME.status
# ("RANK STATUS" lines), stdout and stderr in T/NAME.txt.
job() {
    name=$1
    shift
    rm -f "$T/$name.status"
    timeout 120 mpirun --oversubscribe --mca orte_abort_on_non_zero_status 0 -np 4 sh -c '"$0" "$@"; s=$?; echo "$OMPI_COMM_WORLD_RANK $s" >> "'"$T/$name.status"'"; exit $s' \
        "$DLTRAIN" "$@" > "$T/$name.txt" 2>&1
}

# once NAME PATTERN STATUS DESCRIPTION: PATTERN is on exactly one line of
# the output, naming no rank, and all 4 ranks exited with STATUS.
once() {
    n=$(grep -c -- "$2" "$T/$1.txt")
    named=$(grep -- "$2" "$T/$1.txt" | grep -c 'rank [0-9]')
    statuses=$(cut -d' ' -f2 "$T/$1.status" 2>/dev/null | sort | uniq -c | sed 's/^ *//')
    ok=1
    [ "$n" -eq 1 ] && [ "$named" -eq 0 ] || { echo "# $n lines match /$2/, $named of them name a rank:"; ok=0; }
    [ "$statuses" = "4 $3" ] || { echo "# statuses (count status): $statuses, expected 4 x $3"; ok=0; }
    [ $ok -eq 1 ] || sed 's/^/#   /' "$T/$1.txt" | head -12
    [ $ok -eq 1 ]; tap_result $? "$4"
}

cat > "$T/bad.yaml" <<'YAML'
input: {shape: [1, 28, 28], classes: 10}
layers:
  - {name: conv1, type: conv, filters: 6, kernal: 5}
loss: softmax_cross_entropy
YAML
job badfile --net "$T/bad.yaml"
once badfile "bad.yaml:3:43: layer 'conv1' (conv): unknown key 'kernal'" 2 "a bad network file: one message, every rank exits 2"
grep -v "^dltrain" "$T/badfile.txt" | grep -q "kernal"
[ $? -ne 0 ]; tap_result $? "and no other line repeats it"

job badvalue $LENET --lr -1
once badvalue "--lr -1: train.optimizer.lr: expected a number" 2 "a bad option value: one message, every rank exits 2"

job badoption $LENET --learning-rate 0.1
once badoption "unrecognized option '--learning-rate'" 2 "an unknown option: one message, every rank exits 2"

job badcomm $LENET --comm bogus
once badcomm "unknown communication backend 'bogus'" 2 "an unknown --comm backend: one message, every rank exits 2"

job badgrid $LENET --grid dp=3
once badgrid "dp=3 x tp=1 x pp=1 = 3 ranks, but 4 are running" 2 "a grid that does not fit: one message, every rank exits 2"

job chunks $LENET --parallel pipeline --pipeline-chunks 1
once chunks "1 chunks for 4 pipeline stages" 2 "a schedule the trainer refuses: one message, every rank exits 2"

job missing $LENET --resume="$T/none.safetensors"
once missing "none.safetensors: cannot open" 1 "a checkpoint no rank can read: one message, every rank exits 1"

# A warning every rank prints while reading the file: once too.
sed 's/optimizer: {type: sgd, lr: 0.02, momentum: 0.9}/optimizer: {type: adam, lr: 0.001, momentum: 0.9}/' \
    "$top_srcdir/nets/lenet5.yaml" > "$T/adam.yaml"
job warned --net "$T/adam.yaml" --limit-train 256 --limit-test 64 --threads 1 --quiet --max-steps 2
once warned "momentum" 0 "a warning about the file: printed once, every rank trains and exits 0"

# Ranks that read other files: the lowest of those that fail prints,
# naming its rank; every rank exits 2, rank 0 too, which read a good file
# (were it to go on, it would wait for the others until the timeout).
WRAP='"$0" "$@"; s=$?; echo "$OMPI_COMM_WORLD_RANK $s" >> "'"$T/mpmd.status"'"; exit $s'
timeout 60 mpirun --oversubscribe --mca orte_abort_on_non_zero_status 0 -np 1 sh -c "$WRAP" $DLTRAIN $LENET : \
    -np 3 sh -c "$WRAP" $DLTRAIN --net "$T/bad.yaml" > "$T/mpmd.txt" 2>&1
statuses=$(cut -d' ' -f2 "$T/mpmd.status" 2>/dev/null | sort | uniq -c | sed 's/^ *//')
[ "$statuses" = "4 2" ]; tap_result $? "MPMD, ranks 1-3 with a bad file: every rank exits 2, rank 0 too ($statuses)"
[ "$(grep -c "unknown key 'kernal'" "$T/mpmd.txt")" -eq 1 ] && grep -q "^dltrain: rank 1: .*bad.yaml:3:43" "$T/mpmd.txt"
tap_result $? "printed once, by rank 1, naming it"

# A failure in training on rank 3 alone (its checkpoint is missing) while
# ranks 0-2 resume: rank 3 names itself and ends the job.
$DLTRAIN $LENET --max-steps 2 --checkpoint-dir "$T/ck" --checkpoint-every 1 > /dev/null 2>&1
ck=$(ls "$T"/ck/ckpt-*.safetensors | tail -1)
start=$(date +%s)
timeout 120 mpirun --oversubscribe -np 3 $DLTRAIN $LENET --epochs 50 --resume="$ck" : \
    -np 1 $DLTRAIN $LENET --epochs 50 --resume="$T/none.safetensors" > "$T/rank3.txt" 2>&1
st=$?
took=$(( $(date +%s) - start ))
[ -n "$ck" ] && [ $st -ne 0 ] && [ $took -lt 60 ]; tap_result $? "one rank fails: the job ends (status $st after $took s)"
[ "$(grep -c "none.safetensors: cannot open" "$T/rank3.txt")" -eq 1 ] &&
    grep -q "^dltrain: rank 3: .*none.safetensors: cannot open" "$T/rank3.txt"
tap_result $? "its message is printed once, naming rank 3"
[ $tap_failed -eq 0 ] || sed 's/^/#   /' "$T/rank3.txt" | head -20

# One process: no launcher, messages at once as before.
expect_status 2 "one process: a bad file exits 2" -- $DLTRAIN --net "$T/bad.yaml"
[ "$(echo "$OUT" | grep -c "unknown key 'kernal'")" -eq 1 ]; tap_result $? "with its message once"
