#!/bin/bash
#SBATCH -A tcnufeb
#SBATCH --ntasks=100
#SBATCH -c 1
#SBATCH -N 1-3
# Source: https://github.com/nufeb/NUFEB/blob/8b5b1d018ffe4773fbe43e14867df8494a1dc5c5/examples/PAPER-NUFEB-TOOL/c2-biofilm-100proc/rocket-run
# Site: Newcastle University (Rocket HPC cluster), NUFEB project
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out
# [AQS] site environment line disabled (no module system / site paths here): module load intel

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
export PATH=$PATH:/mnt/nfs/home/nbl21/nufeb/code/lammps5Nov16/src
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/mnt/nfs/home/nbl21/nufeb/code/lammps5Nov16/lib:/mnt/nfs/home/nbl21/local/lib

srun "$AQS_PROBE"
#srun lmp_g++_openmpi -in Inputscript.lammps
