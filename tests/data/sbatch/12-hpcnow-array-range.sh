#!/bin/bash
#SBATCH -J JobArray
#SBATCH --time=01:00:00     # Walltime
#SBATCH -A hpcnow         # Project Account
#SBATCH --ntasks=1          # number of tasks
#SBATCH --mem-per-cpu=8G  # memory/cpu 
#SBATCH --cpus-per-task=2   # 4 OpenMP Threads
#SBATCH --array=100-120      # Array definition
# Source: https://github.com/HPCNow/SubmitScripts/blob/a78559508d7eb5ee845be32d7cb46d7f0828b6d3/Slurm/array.sl
# Site: HPCNow! (HPC consultancy) public submit-script collection
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: the two program lines (srun sleep / srun echo) replaced by one srun AQS probe
srun "$AQS_PROBE"
