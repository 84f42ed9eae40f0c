#!/bin/bash
#SBATCH -c 10 -p gpu --gres=gpu:v100:1 -t 1:00:00 --mem=64G
# Source: https://github.com/CSCfi/machine-learning-scripts/blob/d350815b2831166805fb3baedc57446bef7ace40/slurm/run-puhti-pytorch.sh
# Site: CSC - IT Center for Science, Finland (Puhti GPU partition)
# Licence/terms: public GitHub file of CSC (licence not checked); only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# [AQS] site environment line disabled (no module system / site paths here): module load pytorch/1.2.0
# [AQS] site environment line disabled (no module system / site paths here): module list

set -xv
srun "$AQS_PROBE"
