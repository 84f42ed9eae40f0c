#!/bin/bash --login

#SBATCH --output=%x.out
#SBATCH --partition=work
#SBATCH --ntasks=4
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=64
#SBATCH --time=00:01:00
#SBATCH --exclusive
# Source: https://github.com/PawseySC/supercomputing-user-training/blob/45a2cae9b5c2047d94d99293427b1d628ddab077/running-jobs/examples/job_hybrid_mpi_openmp_exclusive.sh
# Site: Pawsey Supercomputing Research Centre (Setonix), user training
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe (srun options kept)

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK}
export OMP_PLACES=cores
export OMP_PROC_BIND=close

srun -c 64 "$AQS_PROBE"
