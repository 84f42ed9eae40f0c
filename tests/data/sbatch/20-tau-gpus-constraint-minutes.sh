#!/bin/sh
#SBATCH --job-name=gpu
#SBATCH --partition=gpu-h100-killable # (see resources section)
#SBATCH --time=1440 # max time (minutes)
#SBATCH --signal=USR1@120 # how to end job when time’s up
#SBATCH --nodes=1 # number of machines
#SBATCH --ntasks=1 # number of processes
#SBATCH --mem=32000 # CPU memory (MB)
#SBATCH --gpus=1 # GPU cores per process
#SBATCH --cpus-per-task=8 # CPU cores per process
#SBATCH --constraint="tesla_v100|quadro_rtx_8000|geforce_rtx_3090|a100|a5000|a6000|l40s|h100"
# Source: https://github.com/omriyakir21/ubinet/blob/1277e4dd03e3fa69d6b5c64449ff2727e4f7f52b/scripts/submit_job.sh
# Site: Tel Aviv University (School of CS Slurm cluster, 'killable' partitions)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program (echo) replaced by the AQS probe
"$AQS_PROBE"
