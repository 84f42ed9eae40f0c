#!/bin/bash -l
#SBATCH --time=00:01:00
#SBATCH --nodes=1
#SBATCH --ntasks-per-core=1
#SBATCH --ntasks-per-node=12
#SBATCH --cpus-per-task=1
#SBATCH --partition=normal
#SBATCH --constraint=gpu
#SBATCH -A d108
# Source: https://github.com/rupanshusoi/index-launches/blob/02fc9579cf1112bb50f6089d517dfc73889e4bb1/job.sh
# Site: CSCS Swiss National Supercomputing Centre (Piz Daint, project d108)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program ($1) replaced by the AQS probe (srun options kept)

srun -v -C gpu "$AQS_PROBE"
