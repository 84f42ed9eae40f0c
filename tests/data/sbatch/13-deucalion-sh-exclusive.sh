#!/bin/sh
#SBATCH --time=00:10:00
#SBATCH --partition=normal-x86
#SBATCH -A f202500010hpcvlabuminhox
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=128
#SBATCH --cpus-per-task=1
#SBATCH --exclusive
# Source: https://github.com/joaoalves03/uminho-vc/blob/b5ed82270216c4078f8f09326d2514afa44dac5e/x86-run.sh
# Site: Deucalion supercomputer (MACC, Portugal), University of Minho course project
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: OpenFOAM ./Allclean + ./Allrun replaced by the AQS probe; ml/source/scontrol lines commented out

# [AQS] site environment line disabled (no module system / site paths here): ml OpenFOAM/v2412-foss-2023a
# [AQS] site environment line disabled (no module system / site paths here): source $FOAM_INST_DIR/OpenFOAM-v2412/etc/bashrc

echo "Running on nodes:"
# [AQS] scontrol is not part of the test machine: scontrol show hostname $SLURM_NODELIST

"$AQS_PROBE"
