#!/bin/bash
#SBATCH -J GPU_JOB
#SBATCH --time=01:00:00     # Walltime
#SBATCH -A hpcnow         # Project Account
#SBATCH --ntasks=4          # number of tasks
#SBATCH --ntasks-per-node=2 # number of tasks per node
#SBATCH --mem-per-cpu=8G  # memory/cpu 
#SBATCH --cpus-per-task=4   # 4 OpenMP Threads
#SBATCH --gres=gpu:2        # GPUs per node
# Source: https://github.com/HPCNow/SubmitScripts/blob/a78559508d7eb5ee845be32d7cb46d7f0828b6d3/Slurm/cuda-mpi.sl
# Site: HPCNow! (HPC consultancy) public submit-script collection
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe
srun "$AQS_PROBE"
