#!/bin/bash
# hybrid.sh: hybrid parallelism: the world of ranks is a dp x tp x pp grid
# (data x tensor x pipeline), taken from the network file's `parallel:`
# section (e.g. {strategy: hybrid, dp: 4, tp: 2, pp: 2} for 16 ranks).  Put
# the tensor-parallel ranks, which talk most, on the same node: with 4 tasks
# per node and tp: 2, tensor pairs never cross the network.
#SBATCH --job-name=dltrain-hybrid
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=08:00:00
#SBATCH --output=dltrain-%j.out

DLTRAIN=${DLTRAIN:-build/dltrain}
NET=${NET:-nets/resnet50.yaml}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

# dp x tp x pp must equal $SLURM_NTASKS; dltrain checks it before training.
srun --mpi=pmix --cpu-bind=cores "$DLTRAIN" --net "$NET" --parallel hybrid \
    --threads "$OMP_NUM_THREADS" $DLTRAIN_ARGS
