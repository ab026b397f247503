#!/bin/bash
# data_parallel.sh: data-parallel training over several nodes.  Every task is
# one rank holding a full model replica; each global batch is split across
# the ranks and the gradients are summed by allreduce, so the result equals
# one process training on the whole batch.  Ranks come from Slurm/PMIx.
#SBATCH --job-name=dltrain-dp
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=2        # ranks per node (e.g. one per socket)
#SBATCH --cpus-per-task=16         # OpenMP threads per rank
#SBATCH --time=04:00:00
#SBATCH --output=dltrain-%j.out

DLTRAIN=${DLTRAIN:-build/dltrain}
NET=${NET:-nets/resnet18.yaml}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

# --mpi=pmix: Open MPI gets rank and size from Slurm's PMIx server (no mpirun).
# The batch size in the network file is the GLOBAL batch: each of the
# $SLURM_NTASKS ranks computes batch/$SLURM_NTASKS samples per step.
srun --mpi=pmix --cpu-bind=cores "$DLTRAIN" --net "$NET" --parallel data \
    --threads "$OMP_NUM_THREADS" $DLTRAIN_ARGS
