#!/bin/bash --login

#SBATCH --output=%x.out
#SBATCH --partition=work
#SBATCH --ntasks=1
#SBATCH --ntasks-per-node=1
#SBATCH --ntasks-per-socket=1
#SBATCH --distribution=block:block:block
#SBATCH --cpus-per-task=1
#SBATCH --mem=58G
#SBATCH --time=00:01:00
# Source: https://github.com/PawseySC/supercomputing-user-training/blob/b16b3d99d8a063dac8ceaad1e5fed6146a389975/running-jobs/examples/job_Memory_shared.sh
# Site: Pawsey Supercomputing Research Centre (Setonix), user training
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe

srun "$AQS_PROBE"
