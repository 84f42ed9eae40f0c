#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gpus-per-node=p100:4
#SBATCH --ntasks-per-node=24
#SBATCH --exclusive
#SBATCH --mem=125G
#SBATCH --time=3:00
#SBATCH --account=def-someuser
# Source: https://github.com/wywywyp/mkdocstest/blob/84194d80d4345a5ccc50ec331fe17f71c569caf5/docs/files/high_perf_computing/using_gpus_with_slurm/gpu_node_job.sh
# Site: Digital Research Alliance of Canada documentation ('Using GPUs with Slurm'), mirrored in a docs test repository
# Licence/terms: documentation example (Alliance 'Using GPUs with Slurm' page) mirrored in a public GitHub repository; licence not checked; quoted for interoperability testing
# Changed: program (nvidia-smi) replaced by the AQS probe
"$AQS_PROBE"
