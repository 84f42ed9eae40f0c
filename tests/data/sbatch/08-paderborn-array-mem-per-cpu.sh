#!/bin/bash
#SBATCH --job-name=array_job
#SBATCH --output=array_job_%A_%a.out
#SBATCH --error=array_job_%A_%a.err
#SBATCH --array=1-10    # 000%1000, after % is the number of simultaneous jobs
#SBATCH --mem-per-cpu=1G
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00 # For full run this is 2 hours
#SBATCH -p normal
#SBATCH --mail-user=irddcc1@mail.uni-paderborn.de   # Where to send mail	
# Source: https://github.com/jeremiahpslewis/AlgorithmicCompetition.jl/blob/0634701f019c286103f0885bb97c9f9d394b14aa/src/hpc_slurm.sh
# Site: Paderborn University (PC2, Noctua), per the mail-user domain
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe

"$AQS_PROBE"
