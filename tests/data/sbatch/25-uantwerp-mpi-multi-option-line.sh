#!/bin/bash

#SBATCH -J mpihello
#SBATCH -t 00:05:00
# assume a 40 core job
#SBATCH -n 40 -c 1 --mem-per-cpu=512m
# Source: https://github.com/klust/cluster-examples/blob/11f44b14792eaacf7865b3f7227915b0586674f8/Slurm/13_Compiling-and-testing-your-software-on-the-HPC/mpihello2.slurm
# Site: University of Antwerp (CalcUA / VSC), HPC introduction course
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# First create your executable, which is not included in this script
# E.g., 
# module load intel/2019b
# mpiicc -O2 -xHost hello.c -o hello
#
# Then use this job script to run the program on the cluster.

# Build the environment
# [AQS] site environment line disabled (no module system / site paths here): ml calcua/2019b
# [AQS] site environment line disabled (no module system / site paths here): ml intel/2019b

# Run the MPI program
srun "$AQS_PROBE"
