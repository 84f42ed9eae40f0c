#!/bin/bash
#SBATCH --job-name=test-nodes        # name
#SBATCH --nodes=4                    # nodes
#SBATCH --ntasks-per-node=1          # crucial - only 1 task per dist per node!
#SBATCH --cpus-per-task=1           # number of cores per tasks
#SBATCH --time 0:05:00               # maximum execution time (HH:MM:SS)
#SBATCH --output=%x-%j.out           # output file name
# Source: https://github.com/skypilot-org/skypilot/blob/8278fc161cfb5549c475a296a66d5f00f0a33c02/examples/slurm_cloud_deploy/run.sh
# Site: SkyPilot project (Slurm-on-cloud example)
# Licence/terms: public GitHub file (skypilot-org/skypilot, Apache-2.0); quoted for interoperability testing
# Changed: program (bash -c hostname|tee) replaced by the AQS probe (srun --jobid kept); trailing 'sleep 100' removed

srun --jobid $SLURM_JOBID "$AQS_PROBE"

