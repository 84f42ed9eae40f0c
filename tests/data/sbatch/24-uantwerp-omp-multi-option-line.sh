#!/bin/bash

#SBATCH --job-name=omp-demo2
# This is a 10 core job
#SBATCH --ntasks=1 --cpus-per-task=10 --mem=2g
#SBATCH --time=05:00
# Source: https://github.com/klust/cluster-examples/blob/11f44b14792eaacf7865b3f7227915b0586674f8/Slurm/07_Multi-core-jobs-Parallel-Computing/omp2.slurm
# Site: University of Antwerp (CalcUA / VSC), HPC introduction course
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# Build the environment
# [AQS] site environment line disabled (no module system / site paths here): module load calcua/2019b
# [AQS] site environment line disabled (no module system / site paths here): module load intel/2019b

# The next line is not needed when using Intel OpenMP; the runtime detects
# the correct number of threads.
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

# Run the program
"$AQS_PROBE"
