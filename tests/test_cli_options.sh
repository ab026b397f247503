#!/bin/sh
# test_cli_options.sh: every option of every command given a bad value (or
# an unknown name) once: exit status 2 and a message that names the option
# (and the value where there is one); a value of 5,000 characters shortened
# in the message, whose reason stays; then the options and commands no other
# test runs, each once against what it must do: --nesterov takes the first
# step 1 + momentum times as long as plain momentum, --strict-checkpoints
# stops a run whose checkpoint cannot be written (without it the run goes
# on), bench step times every layer, bench comm on 2 ranks reports a
# lossless codec with no error and 1-bit at 1/20 of the bytes or less.
. "$top_srcdir/tests/tap.sh"
NET="$top_srcdir/nets/lenet5.yaml"
# the cost model's and the tuner's caches stay in the test's folder
XDG_CACHE_HOME="$TMPDIR_TEST/cache"
export XDG_CACHE_HOME

# One case per line: the command's words up to the bad option | the bad
# option and its value | what the message must contain besides the option.
cat > "$TMPDIR_TEST/cases" <<EOF
train --net $NET|--compress bogus|bogus
train --net $NET|--compress qsgd:1|qsgd:1
train --net $NET|--compress topk:2|topk:2
train --net $NET|--consistency bogus|bogus
train --net $NET|--consistency ssp:x|x
train --net $NET|--consistency local-sgd:0|0
train --net $NET|--allreduce bogus|bogus
train --net $NET|--kernel conv=bogus|bogus
train --net $NET|--kernel bogus|bogus
train --net $NET|--kernel bogus=direct|bogus
train --net $NET|--kernel conv2=simd|simd
train --net $NET|--threads 0|0
train --net $NET|--threads two|two
train --net $NET|--epochs 0|0
train --net $NET|--batch 0|0
train --net $NET|--lr x|x
train --net $NET|--optimizer bogus|bogus
train --net $NET|--momentum 1.5|1.5
train --net $NET|--weight-decay -1|-1
train --net $NET|--schedule bogus|bogus
train --net $NET|--warmup-epochs -1|-1
train --net $NET|--lr-scaling cube|cube
train --net $NET|--reference-batch 0|0
train --net $NET|--seed -1|-1
train --net $NET|--dataset bogus|bogus
train --net $NET|--limit-train 0|0
train --net $NET|--limit-test x|x
train --net $NET|--max-steps -1|-1
train --net $NET|--device gpu|gpu
train --net $NET --optimizer adam|--nesterov|sgd
train --net $NET|--log-every 0|0
train --net $NET|--comm bogus|bogus
train --net $NET|--parallel bogus|bogus
train --net $NET|--bucket-bytes 1|1
train --net $NET|--bucket-bytes 1Q|1Q
train --net $NET|--ps-servers 0|0
train --net $NET|--stall-warning 0|0
train --net $NET|--stall-timeout x|x
train --net $NET|--debug-slow-rank x|x
train --net $NET|--debug-slow-rank 1:2x|1:2x
train --net $NET|--debug-hold-at-step 0|0
train --net $NET|--trace-steps x|x
train --net $NET|--trace-steps -1|-1
train --net $NET|--debug-trace-skew 1|1
train --net $NET|--debug-plan-keep 0|0
train --net $NET|--debug-plan-keep 9|9
train --net $NET|--checkpoint-every 5y|5y
train --net $NET|--keep 0|0
train --net $NET|--workspace-limit lots|lots
train --net $NET|--workspace-total -5|-5
train --net $NET|--tune-policy bogus|bogus
train --net $NET|--pipeline-schedule interleaved:1|interleaved:1
train --net $NET|--comm-emulate alpha=20|20
train --net $NET|--comm-emulate bw=1GB|1GB
train --net $NET|--bogus|
check --net $NET|--threads 0|0
check --net $NET|--kernel conv=bogus|bogus
check --net $NET|--ranks 0|0
check --net $NET|--pipeline-chunks 0|0
check --net $NET|--pipeline-schedule bogus|bogus
check --net $NET|--bogus|
tune --net $NET --batch 8|--repeats 0|0
tune --net $NET --batch 8|--tune-policy bogus|bogus
tune --net $NET --batch 8|--bogus|
bench step --net $NET|--steps 0|0
bench step --net $NET|--warmup -1|-1
bench step --net $NET|--trace-steps x|x
bench step --net $NET|--batch 0|0
bench step --net $NET|--bogus|
bench pipeline --net $NET|--ranks 0|0
bench pipeline --net $NET|--pipeline-chunks 0|0
bench pipeline --net $NET|--pipeline-chunks 1000|1000
bench pipeline --net $NET|--schedules 1f1b,bogus|bogus
bench pipeline --net $NET|--steps 0|0
bench pipeline --net $NET|--send-latency x|x
bench pipeline --net $NET|--bogus|
plan --net $NET --flops 1e9|--ranks 0|0
plan --net $NET --flops 1e9|--ranks 2,x|x
plan --net $NET --flops 1e9 --ranks 2|--ranks-per-node 0|0
plan --net $NET --flops 1e9 --ranks 2|--link alpha=5us,bw=fast|fast
plan --net $NET --flops 1e9 --ranks 2|--node-link alpha=5,bw=1GB/s|alpha: expected a time
plan --net $NET --flops 1e9 --ranks 2|--memory-per-rank 1X|1X
plan --net $NET --ranks 2|--flops 0|0
plan --net $NET --flops 1e9 --ranks 2|--top 0|0
plan --net $NET --flops 1e9 --ranks 2|--bogus|
train --net $NET|--plan-flops x|x
bench comm --sizes 1K|--comm bogus|bogus
bench comm|--sizes bogus|bogus
bench comm|--algorithms bogus|bogus
bench comm|--compress bogus|bogus
bench comm|--repeat 0|0
bench comm|--ps-servers 0|0
bench comm|--segment x|x
bench comm|--suite bogus|bogus
bench comm|--comm-emulate alpha=1ms,latency=1|latency
bench comm|--bogus|
bench conv --suite resnet50|--rows 0|0
bench conv --suite resnet50|--repeats 0|0
bench conv --suite resnet50|--batch 0|0
bench conv --suite resnet50|--workspace-limit x|x
bench conv --suite resnet50|--threads 0|0
bench conv --suite resnet50|--tune-policy bogus|bogus
bench conv|--shape 1,2|1,2
bench conv|--bogus|
bench|bogus|
help|bogus|
|bogus|
EOF
tap_plan $(($(wc -l < "$TMPDIR_TEST/cases") + 17))

while IFS='|' read -r cmd bad value; do
    # shellcheck disable=SC2086 # words on purpose
    OUT=$($DLTRAIN $cmd $bad 2>&1); got=$?
    option=${bad%% *}
    if [ "$got" -eq 2 ] && echo "$OUT" | grep -qF -- "$option" && { [ -z "$value" ] || echo "$OUT" | grep -qF -- "$value"; }; then
        tap_result 0 "dltrain ${cmd%% --net*} $bad: status 2, the message names $option"
    else
        echo "# exit status $got, expected 2 and '$option'${value:+ and '$value'} in:"
        echo "$OUT" | head -5 | sed 's/^/#   /'
        tap_result 1 "dltrain ${cmd%% --net*} $bad: status 2, the message names $option"
    fi
done < "$TMPDIR_TEST/cases"

# A value of 5,000 characters: status 2 and a short message on stderr that
# keeps the reason, the value cut to its first 60 characters and its length.
LONG=$(printf '%05000d' 0 | tr 0 x)
for bad in "--set train.optimizer.lr=$LONG|expected a finite number" "--lr $LONG|expected a finite number" \
    "--net /no/such/$LONG|no such file" "--set layers.$LONG.units=3|expected a key of at most"; do
    words=${bad%%|*} reason=${bad#*|}
    # shellcheck disable=SC2086 # words on purpose
    $DLTRAIN check --net "$NET" $words >/dev/null 2>"$TMPDIR_TEST/long.err"; got=$?
    size=$(wc -c < "$TMPDIR_TEST/long.err")
    if [ "$got" -eq 2 ] && [ "$size" -lt 400 ] && grep -qF -- "$reason" "$TMPDIR_TEST/long.err" &&
        grep -qE -- "x\.\.\. \(50[0-9][0-9] characters\)" "$TMPDIR_TEST/long.err"; then
        tap_result 0 "${words%% *} with 5,000 characters: status 2, $size bytes on stderr with '$reason'"
    else
        echo "# exit status $got, expected 2; $size bytes on stderr, expected under 400 with '$reason':"
        head -c 600 "$TMPDIR_TEST/long.err" | sed 's/^/#   /'; echo
        tap_result 1 "${words%% *} with 5,000 characters: status 2, a short message on stderr with '$reason'"
    fi
done

# --nesterov: after one step from the same weights and gradient, SGD with
# momentum mu moves the weights by lr*g and Nesterov by lr*(g + mu*g).
ONE="--net $NET --max-steps 1 --limit-train 640 --limit-test 64 --threads 1 --quiet --momentum 0.9"
expect_status 0 "one step with lr 0 (the initial weights)" -- $DLTRAIN $ONE --lr 0 --dump-weights "$TMPDIR_TEST/w0.bin"
expect_status 0 "one step of SGD with momentum 0.9" -- $DLTRAIN $ONE --dump-weights "$TMPDIR_TEST/wm.bin"
expect_status 0 "one step of --nesterov" -- $DLTRAIN $ONE --nesterov --dump-weights "$TMPDIR_TEST/wn.bin"
/usr/bin/python3 - "$TMPDIR_TEST/w0.bin" "$TMPDIR_TEST/wm.bin" "$TMPDIR_TEST/wn.bin" <<'PY'
import sys
import numpy as np
w0, wm, wn = (np.fromfile(f, dtype=np.float32).astype(np.float64) for f in sys.argv[1:4])
dm, dn = w0 - wm, w0 - wn
# where the step is at least 1e-3 of the weight, the float weights give it
# to 1e-4 (a step of 1e-5 on a weight of 0.1 would be known to 1%)
moved = np.abs(dm) > 1e-3 * np.abs(w0)
err = np.max(np.abs(dn[moved] - 1.9 * dm[moved]) / np.abs(dm[moved]))
print("# %d weights moved by 1e-3 or more; Nesterov's step / momentum's: 1.9 within %.2g" % (moved.sum(), err))
sys.exit(0 if moved.sum() > 1000 and err < 1e-3 else 1)
PY
tap_result $? "--nesterov's first step is 1.9 times plain momentum's (the flag reaches the optimizer)"

# --strict-checkpoints: a directory where the second checkpoint goes makes
# its write fail.
mkdir -p "$TMPDIR_TEST/ck1/ckpt-0000000002.safetensors/x" "$TMPDIR_TEST/ck2/ckpt-0000000002.safetensors/x"
CK="--net $NET --max-steps 3 --limit-train 640 --limit-test 64 --threads 1 --checkpoint-every 1"
expect_status 0 "a checkpoint that cannot be written: training goes on" -- $DLTRAIN $CK --checkpoint-dir "$TMPDIR_TEST/ck1"
expect_output "warning: checkpoint not written .*ckpt-0000000002" "the warning names the checkpoint"
expect_status 1 "with --strict-checkpoints the run stops" -- $DLTRAIN $CK --checkpoint-dir "$TMPDIR_TEST/ck2" \
    --strict-checkpoints
expect_output "ckpt-0000000002" "the error names the checkpoint"
[ -f "$TMPDIR_TEST/ck1/ckpt-0000000003.safetensors" ] && [ ! -e "$TMPDIR_TEST/ck2/ckpt-0000000003.safetensors" ]
tap_result $? "without it step 3 was checkpointed, with it the run ended at step 2"

# bench step: every layer of LeNet-5 timed (the fused ReLUs as such).
expect_status 0 "dltrain bench step" -- $DLTRAIN bench step --net "$NET" --batch 16 --steps 2 --warmup 1 --no-peak \
    --threads 1
rows=$(echo "$OUT" | grep -cE '^[0-9]+ +(conv|relu|maxpool|fc|loss)[0-9]* ')
fused=$(echo "$OUT" | grep -cE '^[0-9]+ +relu[12] +relu +fused ')
echo "# $rows layer rows, $fused fused ReLUs"
[ "$rows" -eq 12 ] && [ "$fused" -eq 2 ] && echo "$OUT" | grep -q '^step time: '
tap_result $? "bench step prints all 12 layers (2 ReLUs fused) and the step time"

# bench comm on 2 ranks: topk:1 sends everything, so its error is 0.
if command -v mpirun >/dev/null 2>&1; then
    expect_status 0 "dltrain bench comm on 2 ranks" -- mpirun --oversubscribe -np 2 $DLTRAIN bench comm \
        --sizes 1K,64K --algorithms ring,tree,auto --compress topk:1,1bit --repeat 3 --csv
    echo "$STDOUT" | /usr/bin/python3 -c '
import sys
rows = [l.strip().split(",") for l in sys.stdin if l[:1].isdigit()]
algos = [r for r in rows if len(r) == 9]
codecs = {(r[0], r[1]): r for r in rows if len(r) == 8}
assert len(algos) == 6 and len(codecs) == 4, (len(algos), len(codecs))
for n in ("256", "16384"):
    assert float(codecs[(n, "topk:1")][6]) == 0, codecs[(n, "topk:1")]
    bit = codecs[(n, "1bit")]
    assert float(bit[5]) >= 20 and 0 < float(bit[6]) < 1, bit
print("# 6 algorithm rows; topk:1 exact, 1bit %s and %s times fewer bytes" % (
    codecs[("256", "1bit")][5], codecs[("16384", "1bit")][5]))'
    tap_result $? "bench comm: a row per size and algorithm, topk:1 without error, 1bit at 1/20 of the bytes or less"
else
    tap_result 0 "# SKIP bench comm: no mpirun"
    tap_result 0 "# SKIP bench comm: no mpirun"
fi
