#!/bin/bash 
#SBATCH --export=ALL,LD_PRELOAD=
#SBATCH --partition=rome 
#SBATCH --mem=0
#SBATCH --ntasks 4
#SBATCH --ntasks-per-node=4
# Source: https://github.com/as-grm/of_school/blob/6448b3343aef6b5d27230c3efa5fbe2063841e5c/day-02/03_cavity_with_hole/gmsh/transient/run_hpc.sh
# Site: not stated (OpenFOAM school material; cluster with a 'rome' partition)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: OpenFOAM solver replaced by the AQS probe (srun --mpi=pmix kept); module/OpenFOAM environment lines commented out

# [AQS] site environment line disabled (no module system / site paths here): module purge
# [AQS] site environment line disabled (no module system / site paths here): module load OpenFOAM
# [AQS] site environment line disabled (no module system / site paths here): source $FOAM_BASH

# [AQS] disabled: under Slurm $0 is the spooled copy of the script, so this cd goes to the spool dir: cd ${0%/*} || exit 1    # Run from this directory

# Source tutorial run functions
# [AQS] site environment line disabled (no module system / site paths here): . $WM_PROJECT_DIR/bin/tools/RunFunctions

# decompose the case (number of decompositions is equal to --ntasks)
# [AQS] site environment line disabled (no module system / site paths here): runApplication decomposePar

# run parallel
# [AQS] getApplication is an OpenFOAM function: echo "Start $(getApplication) in parallel. Log is written in case/log.$(getApplication)!"
srun --mpi=pmix  "$AQS_PROBE"

# Check the running process with: tail -f case/log.$(getApplication)
