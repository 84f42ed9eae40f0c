#!/bin/bash

# same as -n
#SBATCH --ntasks 2

#SBATCH --mem-per-cpu=3800
#same as -t
#SBATCH --time 00:30:00


#same as -c
#SBATCH --cpus-per-task 96
# Source: https://github.com/tudasc/MPI-precompute/blob/045e00ee2076669a648fccb345b3949066011b3d/scripts/SLURM_Header.sh
# Site: TU Darmstadt, Scientific Computing group (Lichtenberg cluster)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: the original is a header without a program; an 'srun' probe line was appended
# one node per process
srun "$AQS_PROBE"
