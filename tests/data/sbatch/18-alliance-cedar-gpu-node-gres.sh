#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gres=gpu:4
#SBATCH --ntasks-per-node=24
#SBATCH --exclusive
#SBATCH --mem=125G
#SBATCH --time=3:00
# Source: https://github.com/AbtinDjavadifar/ComputeCanada/blob/51f1f08bb652b7af3c20a69fdab7af47b0c13f98/cedar_gpu_node_job.sh
# Site: Digital Research Alliance of Canada / Compute Canada (Cedar); copy of the 'Using GPUs with Slurm' wiki example
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program (nvidia-smi) replaced by the AQS probe
"$AQS_PROBE"
