#!/bin/bash

# Slurm job options (job-name, compute nodes, job time)
#SBATCH --job-name=Example_MPI_Job
#SBATCH --time=12:00:0
#SBATCH --nodes=1
#SBATCH --tasks-per-node=128
#SBATCH --cpus-per-task=1

# Replace [budget code] below with your budget code (e.g. t01)
#SBATCH --account=e607             
#SBATCH --partition=standard
#SBATCH --qos=standard
# Source: https://github.com/rd1042/stella_benchmarking_new/blob/3ca3246d153a767bb0c5439f00016883d8f26132/test_cbc_nonlinear_beta0/sims/stella_nonlinear_2species_leapfrog_nonlinear/run_archer2_nisl.sh
# Site: EPCC, ARCHER2 UK national supercomputer (budget e607)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program replaced by the AQS probe (srun options kept)

# Set the number of threads to 1
#   This prevents any threaded system libraries from automatically 
#   using threading.
export OMP_NUM_THREADS=1

# Launch the parallel job
#   Using 512 MPI processes and 128 MPI processes per node
#   srun picks up the distribution from the sbatch options

srun --distribution=block:block --hint=nomultithread "$AQS_PROBE"
