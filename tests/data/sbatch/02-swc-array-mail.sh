#!/bin/bash

#SBATCH -p gpu # partition (queue)
#SBATCH -N 1   # number of nodes
#SBATCH --mem 2G # memory pool for all cores
#SBATCH -n 2 # number of cores
#SBATCH -t 0-0:10 # time (D-HH:MM)
#SBATCH -o slurm_array_%A-%a.out
#SBATCH -e slurm_array_%A-%a.err
#SBATCH --mail-type=ALL
#SBATCH --mail-user=adam.tyson@ucl.ac.uk
#SBATCH --array=0-9%4
# Source: https://github.com/neuroinformatics-unit/slurm-demo/blob/b29fe019a1154a98b049022a17c75ea663397917/array_example.sh
# Site: Sainsbury Wellcome Centre (UCL), NeuroInformatics Unit Slurm demo
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# Array job runs 10 separate jobs, but not more than four at a time.
# This is flexible and the array ID ($SLURM_ARRAY_TASK_ID) can be used in any way.

# [AQS] site environment line disabled (no module system / site paths here): module load miniconda
# [AQS] site environment line disabled (no module system / site paths here): conda activate slurm_demo

echo "Multiplying $SLURM_ARRAY_TASK_ID by 10"
"$AQS_PROBE"

