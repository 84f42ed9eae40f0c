#!/bin/bash

# Resource request
#SBATCH --time=00:05:00
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=4G

# Define array (TASK IDs)
#SBATCH --array=1,6-7,12

# Job handling
#SBATCH -J arrayjob-nonsquential
#SBATCH -o %x-%A_%a.out
# Source: https://github.com/brown-ccv/slurm/blob/4011b91c72b094489c98a1743ead68cbea868029/job_arrays/job-array-nonsequential.sh
# Site: Brown University Center for Computation and Visualization (Oscar)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: AQS probe appended after the original echo line

# Use the $SLURM_ARRAY_TASK_ID variable to provide different inputs for each job
 
echo "Running job array number: "$SLURM_ARRAY_TASK_ID
"$AQS_PROBE"
