#!/usr/bin/env bash

#SBATCH --job-name=panasas
#SBATCH --account=stackhpc
#SBATCH --partition=stackhpc
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --dependency=singleton
#SBATCH --time=2:0:0
# Source: https://github.com/stackhpc/jasmin-fs-benchmark/blob/5703d11036dbf05eedaccf94e6272addda3e5f12/io500/runs/panasas-2-8-300-0-POSIX/io500.panasas-2-8-300-0-POSIX.sh
# Site: JASMIN / LOTUS (STFC / CEDA, UK), StackHPC filesystem benchmark runs
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program (singularity io500) replaced by the AQS probe (mpirun kept); module and site mkdir lines commented out

set -euo pipefail

export IO500_CONTAINER_TAG="bb942db"


echo SLURM_JOB_ID: $SLURM_JOB_ID
echo dimensions: '{"nodes": 2, "ntasks_per_node": 8, "filesystem": {"name": "panasas", "mountpoint": "/gws/pw/j07/perf_testing3"}, "stonewall": 300, "iters": 0, "time": "2:0:0", "git_describe": "heads/main-0-g1f83e4c-dirty", "ior_api": "POSIX"}'
echo SLURM_JOB_NODELIST: $SLURM_JOB_NODELIST

# [AQS] site environment line disabled (no module system / site paths here): mkdir -p /gws/pw/j07/perf_testing3/steveb
# [AQS] site environment line disabled (no module system / site paths here): module load eb/OpenMPI/gcc/4.0.0
timestamp=$(date +%Y.%m.%d-%H.%M.%S)
mpirun "$AQS_PROBE"
