#!/bin/bash
# preemptible.sh: a long run that survives time limits and preemption.
# 120 s before the end of its time (or when an admin sends USR1), Slurm sends
# SIGUSR1 to every task; each rank finishes its step, rank 0 writes a
# checkpoint, and dltrain exits with status 75.  The script then requeues the
# job, which starts again from this script and continues with --resume from
# the latest valid checkpoint (a fresh start when there is none yet).
#SBATCH --job-name=dltrain-preemptible
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=8
#SBATCH --time=02:00:00
#SBATCH --signal=USR1@120          # SIGUSR1 to the tasks 120 s before the time limit
#SBATCH --requeue                  # the job may be put back in the queue
#SBATCH --open-mode=append         # keep the output of every attempt
#SBATCH --output=dltrain-%j.out

DLTRAIN=${DLTRAIN:-build/dltrain}
NET=${NET:-nets/resnet18.yaml}
CKPT_DIR=${CKPT_DIR:-checkpoints/$SLURM_JOB_NAME}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
mkdir -p "$CKPT_DIR"
echo "dltrain job $SLURM_JOB_ID attempt $((${SLURM_RESTART_COUNT:-0} + 1)) on $SLURM_JOB_NODELIST"

# A checkpoint every 10 minutes (or "--checkpoint-every 1000" for steps),
# the 3 newest kept; the signal adds one more just before stopping.
srun --mpi=pmix "$DLTRAIN" --net "$NET" --parallel data --threads "$OMP_NUM_THREADS" \
    --checkpoint-dir "$CKPT_DIR" --checkpoint-every 10m --keep 3 --resume $DLTRAIN_ARGS
status=$?

if [ $status -eq 75 ]; then
    # Stopped after a checkpoint: back into the queue, to resume from it.
    echo "dltrain stopped by a signal after a checkpoint; requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
fi
exit $status
