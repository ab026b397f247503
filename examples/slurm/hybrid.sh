#!/bin/bash
# hybrid.sh: hybrid parallelism: the world of ranks is a dp x tp x pp grid
# (data x tensor x pipeline).  The grid is the network file's `parallel:`
# section when it gives one (e.g. {strategy: hybrid, dp: 4, tp: 2, pp: 2} for
# 16 ranks), or --grid in DLTRAIN_ARGS; without one, rank 0 asks the planner
# for the fastest layout that splits at least two ways (`dltrain plan`) and
# prints it before training.  dltrain puts the tensor-parallel ranks, which
# talk most, next to each other: with 4 tasks per node and tp=2, tensor pairs
# never cross the network.
#SBATCH --job-name=dltrain-hybrid
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=08:00:00
#SBATCH --output=dltrain-%j.out

DLTRAIN=${DLTRAIN:-build/dltrain}
NET=${NET:-resnet50}   # a shipped network by name, or a path
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

# A given grid's dp x tp x pp must equal $SLURM_NTASKS; dltrain checks it
# before training.
srun --mpi=pmix --cpu-bind=cores "$DLTRAIN" --net "$NET" --parallel hybrid \
    --threads "$OMP_NUM_THREADS" $DLTRAIN_ARGS
