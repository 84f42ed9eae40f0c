#!/bin/sh
#SBATCH -n4
#AQS --min=2 --max=4 --adaptive -o 'out %j.log'
#SBATCH --array=1-10
exit 0
