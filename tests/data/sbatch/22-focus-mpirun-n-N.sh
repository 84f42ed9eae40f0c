#!/bin/bash
#SBATCH -p h006m
#SBATCH -t 0:06:00
#SBATCH -n 16
#SBATCH -N 2
#SBATCH -J PHASE0
#SBATCH -o stdout.%J.log
#SBATCH -e stderr.%J.log
# Source: https://github.com/Materials-Science-Software-Consortium/phase0_install/blob/0fafffea3861c4f6fd5aaecc120c29a51914e9ae/FOCUS/phase0.sh
# Site: FOCUS supercomputer (Foundation for Computational Science, Kobe, Japan)
# Licence/terms: public GitHub file; repository licence not checked; only the #SBATCH header is the object of study, quoted for interoperability testing
# Changed: program ($PHASE) replaced by the AQS probe (mpirun -n 16 kept); Intel setvars line commented out

# [AQS] site environment line disabled (no module system / site paths here): source /home1/share/x86_64/archive/opt/intel-2023.0.0/setvars.sh

PHASE=~/phase0_2025/bin/phase

mpirun -n 16 "$AQS_PROBE" # ne=1 nk=16
