#!/bin/bash
#SBATCH -p debug_queue 
#SBATCH -J gsXXX
#SBATCH -o out_%A.out
#SBATCH --time=00-04:00:00   #format days-hh:mm:ss
#SBATCH -N 2     #previous tests (601, 605): N=1, ntasks per node = 1. old test with this one (605): n=2, tasks/node=2, cpus/task = 22, num threads = 44.
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=11
#SBATCH --threads-per-core=1
#SBATCH --hint=nomultithread
# Source: https://github.com/mld1812/pynfam/blob/62d812f28a1913f349ceb0d5d42f84ab275e1d1c/slurm_dogwood_openmp.sh
# Site: UNC Chapel Hill Research Computing (Dogwood cluster)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program replaced by the AQS probe (mpirun kept)
export OMP_NUM_THREADS=11
export OMP_STACKSIZE=256m
export OMP_DYNAMIC=false
export OMP_PROC_BIND=true
export OMP_WAIT_POLICY=active

ulimit -s unlimited
mpirun "$AQS_PROBE"
