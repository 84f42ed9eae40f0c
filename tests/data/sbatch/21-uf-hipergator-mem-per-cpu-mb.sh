#!/bin/sh
#SBATCH --job-name=step1                 #Job name
#SBATCH --nodes=1                        #Number of nodes (servers, 32 proc/node)
#SBATCH --ntasks=32                      #Number of tasks/MPI RankS
#SBATCH --ntasks-per-node=32             #Tasks per node
#SBATCH --ntasks-per-socket=8            #Tasks per socket
#SBATCH --cpus-per-task=1                #Number of CPU per task
#SBATCH --mem-per-cpu=3600mb             #Memory (120 gig/server)
#SBATCH --distribution=cyclic:cyclic     #Distribute tasks cyclically
#SBATCH --time=2:00:00                  #Walltime days-hh:mm:ss
#SBATCH --output=moose-%j.out            #Output and error log
#SBATCH --mail-type=END,FAIL             #When to email user
#SBATCH --mail-user=msessim@ufl.edu      #Email address to send mail to
#SBATCH --account=michael.tonks          #Allocation group name, add -b for burst job
# Source: https://github.com/tonkmr/macawupdated/blob/8e9d9ac4a40faece1a627064d7b8ce5706dd0584/examples/char_oxidation/step1/slurm_picachu.sh
# Site: University of Florida Research Computing (HiPerGator)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program replaced by the AQS probe (srun options kept)

srun --mpi=pmix_v3 "$AQS_PROBE"
