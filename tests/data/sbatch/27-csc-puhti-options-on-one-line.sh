#!/bin/bash
#SBATCH --job-name=D1_location_selection
#SBATCH --account=project_2003104
#SBATCH --output=output/%A
#SBATCH --ntasks=1 --cpus-per-task=128
#SBATCH --mem=230G
#SBATCH --time=02:15:00 --partition=small
# Source: https://github.com/szwinter/realtime-birds/blob/50d74f8cc12751cd7e15ac5dfaef633787acd9bc/puhti_D1_location_selection.sh
# Site: CSC - IT Center for Science, Finland (Puhti)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

SPN=${1:-15}
AREA="${2:-all}"

mkdir -p output
# [AQS] site environment line disabled (no module system / site paths here): module load pytorch
hostname

srun "$AQS_PROBE"
