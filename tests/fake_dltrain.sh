#!/bin/sh
# fake_dltrain.sh: stands in for dltrain in tests/test_slurm.sh, to check the
# preemption plumbing of examples/slurm/preemptible.sh (signal delivery to the
# tasks, exit status 75, requeue, --resume) before and apart from the real
# training.  Counts FAKE_STEPS steps of 0.1 s; rank 0 records the step in
# CKPT/step; SIGUSR1/SIGTERM: record, exit 75; --resume: continue from CKPT/step.
# FAKE_HOLD_AT=N: after step N wait (up to 60 s) for the signal, as dltrain's
# --debug-hold-at-step does, so that the test's signal cannot come too late.
dir=""; resume=0
while [ $# -gt 0 ]; do
    case $1 in
    --checkpoint-dir) dir=$2; shift ;;
    --resume) resume=1 ;;
    esac
    shift
done
rank=${SLURM_PROCID:-0}
step=0
[ $resume -eq 1 ] && [ -f "$dir/step" ] && step=$(cat "$dir/step")
echo "rank $rank starts at step $step"
stop=0
trap 'stop=1' USR1 TERM
while [ "$step" -lt "${FAKE_STEPS:-100}" ]; do
    sleep 0.1
    step=$((step + 1))
    [ "$rank" -eq 0 ] && { echo "$step" > "$dir/step.tmp" && mv "$dir/step.tmp" "$dir/step"; }
    if [ "$step" -eq "${FAKE_HOLD_AT:-0}" ]; then
        i=0
        while [ $stop -eq 0 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    fi
    if [ $stop -eq 1 ]; then
        echo "rank $rank: signal, checkpoint at step $step, exit 75"
        exit 75
    fi
done
echo "rank $rank finished at step $step"
