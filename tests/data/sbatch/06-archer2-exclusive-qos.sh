#!/bin/bash

# Slurm job options (name, compute nodes, job time)
#SBATCH --job-name=test_write
#SBATCH --time=00-00:05:00
#SBATCH --exclusive
#SBATCH --nodes=4
#SBATCH --partition=standard
#SBATCH --exclusive
#SBATCH --account=z04
#SBATCH  -q standard
#SBATCH --tasks-per-node=1
#SBATCH --cpus-per-task=1
# Source: https://github.com/lucaparisi91/cbenchio/blob/54bfe48e46905246dce92fadf6a8880c3857a787/submit.sh
# Site: EPCC, ARCHER2 UK national supercomputer (budget z04)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out


# [AQS] site environment line disabled (no module system / site paths here): module load gcc/10.2.0
# [AQS] site environment line disabled (no module system / site paths here): module load openmpi

srun  "$AQS_PROBE"
