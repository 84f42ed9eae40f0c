#!/bin/bash
#SBATCH -J Hybrid_JOB
#SBATCH -A hpcnow         # Project Account
#SBATCH --time=01:00:00     # Walltime
#SBATCH --ntasks=4          # number of tasks
#SBATCH --mem-per-cpu=4G  # memory/cpu 
#SBATCH --cpus-per-task=8   # 8 OpenMP Threads
# Source: https://github.com/HPCNow/SubmitScripts/blob/a78559508d7eb5ee845be32d7cb46d7f0828b6d3/Slurm/hybrid.sl
# Site: HPCNow! (HPC consultancy) public submit-script collection
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out
# [AQS] site environment line disabled (no module system / site paths here): module load intel/intel-2015a
srun "$AQS_PROBE"
