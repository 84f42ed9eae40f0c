#!/bin/bash
#SBATCH -q normal
#SBATCH -N 4
#SBATCH --ntasks-per-node=37
#SBATCH --mem=375000
#SBATCH -p bii
#SBATCH -t 600
#SBATCH --account=nssac_students
# Source: https://github.com/loimos/loimos/blob/14fadfa4d9a2f05d94b4a52309ade77c32cc1c6e/scripts/batch/run-location-heuristics.sh
# Site: University of Virginia Research Computing (Rivanna, Biocomplexity Institute partition 'bii')
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# [AQS] site environment line disabled (no module system / site paths here): module load gcc/9.2.0 cuda/11.0.228 openmpi/3.1.6 \
#  openmpi/3.1.6 python #mvapich2/2.3.3

SCRIPTS_DIR="${HOME}/biocomplexity/loimos/loimos/scripts/preprocessing"
OUT_DIR="/scratch/${USER}/loimos/data/populations/$1"
TASKS_PER_NODE=148

echo ${SCRIPTS_DIR}/location_heuristics.py ${OUT_DIR} -n ${TASKS_PER_NODE}
echo -------------------------------------------------------------------------
time "$AQS_PROBE"
