#!/bin/bash -l

#SBATCH --partition=gpu-v100s
#SBATCH --job-name=run_43
#SBATCH --output=./log/out/%x-%j.txt
#SBATCH --error=./log/err/%x-%j.txt
#SBATCH --gpus=v100s:2
#SBATCH --nodes=1
#SBATCH --ntasks=16
#SBATCH --mem=16G
#SBATCH --qos=long
#SBATCH --mail-type=ALL
#SBATCH --hint=nomultithread
#SBATCH --mail-user=tingweijingting2000@gmail.com
# Source: https://github.com/TINGWEIJING/dataset-inference/blob/bef62e1074950bfae99747ff0009f22661ae0b9b/dicc/run_43.sh
# Site: Data Intensive Computing Centre (DICC), Universiti Malaya
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program line replaced by the AQS probe; module lines commented out

# [AQS] site environment line disabled (no module system / site paths here): module load miniconda/miniconda3
# [AQS] site environment line disabled (no module system / site paths here): module load cuda/cuda-10.2
# [AQS] site environment line disabled (no module system / site paths here): source activate /home/user/tingweijing/env/DIenv
"$AQS_PROBE"

