#!/bin/bash
#SBATCH -J "my job" --mem=4G -N 2 --partition=short
#SBATCH --ntasks=16 --time=2-00:00:00 --error=err-%j.txt
#SBATCH --dependency=afterok:40:41 --requeue
#SBATCH --chdir=/scratch/alice   # trailing comment

# comment
#SBATCH --mail-type=END --mail-user=alice@example.org
srun ./a.out
