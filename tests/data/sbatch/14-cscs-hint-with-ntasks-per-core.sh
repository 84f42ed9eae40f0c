#!/bin/bash -l
#
#SBATCH --nodes=1
#SBATCH --ntasks-per-core=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=12
#SBATCH --hint=nomultithread
# Source: https://github.com/tomlausberg/physics_standalone/blob/1a0fe59f1fde003bd6aae96b52c8954395648a93/radiation/job.sh
# Site: CSCS Swiss National Supercomputing Centre (Piz Daint, project s1053)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program replaced by the AQS probe (srun options kept)

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

srun -C gpu -A s1053 "$AQS_PROBE"
