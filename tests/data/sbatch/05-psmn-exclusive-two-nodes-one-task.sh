#!/bin/bash
#SBATCH --job-name=test
#SBATCH --partition=E5
#SBATCH --cpus-per-task=1           # -n
#SBATCH --ntasks=1
#SBATCH --time=0-00:10:00           # day-hours:minutes:seconds
#SBATCH --nodes=2                   # -N (2 nodes, exclusive way)
#SBATCH --exclusive                 # exclusive mode, ie: all 2 nodes will be mine
# Source: https://github.com/ltaulell/submission_scripts/blob/0383db43e28b1ef75fda41378cbd735a8d9b585a/Slurm/exclusive.sh
# Site: PSMN (Pôle Scientifique de Modélisation Numérique), ENS de Lyon
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe

"$AQS_PROBE"

