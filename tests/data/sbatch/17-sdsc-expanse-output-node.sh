#!/usr/bin/env bash

#SBATCH --job-name=hello-my-hostname-is
#SBATCH --account=use300
#SBATCH --partition=debug
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --time=00:05:00
#SBATCH --output=%x.o%j.%N
# Source: https://github.com/ciml-org/ciml-summer-institute-2023/blob/73462a68abfaf688eb7e5184ea4b9a2cf7b24cc6/2.3_running_batch_jobs_sdsc_systems/hello-my-hostname-is.sh
# Site: San Diego Supercomputer Center (Expanse), CIML Summer Institute 2023
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program (hostname) replaced by the AQS probe

"$AQS_PROBE"
