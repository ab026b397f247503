#!/bin/bash
# one_node.sh: dltrain on one node, one process using all the cores Slurm
# gives it (OpenMP, oneDNN and OpenBLAS threads all follow --threads).
#SBATCH --job-name=dltrain-1node
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8          # threads of the one process
#SBATCH --time=01:00:00
#SBATCH --output=dltrain-%j.out

DLTRAIN=${DLTRAIN:-build/dltrain}
NET=${NET:-nets/lenet5.yaml}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

# --metrics keeps a JSON-lines log of every step next to the job output.
srun "$DLTRAIN" --net "$NET" --threads "$OMP_NUM_THREADS" \
    --metrics "dltrain-$SLURM_JOB_ID.jsonl" $DLTRAIN_ARGS
