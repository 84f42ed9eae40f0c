#!/bin/bash
#SBATCH --qos=regular
#SBATCH --nodes=6
#SBATCH --ntasks-per-node 1
#SBATCH --constraint=cpu
#SBATCH --time=12:00:00
#SBATCH --account=desi
# Source: https://github.com/rongpu/desi-misc/blob/ead5b933b13005da01d438bd10d1b455c8baa602/dr10/deep_fields/script/launch-runbrick.sh
# Site: NERSC (Perlmutter CPU nodes), DESI collaboration
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program replaced by the AQS probe (srun --wait=0 kept)

srun --wait=0 "$AQS_PROBE"
