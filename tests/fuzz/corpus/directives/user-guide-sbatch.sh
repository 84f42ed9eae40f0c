#!/bin/bash
#SBATCH --job-name=heat
#SBATCH -n 8
#SBATCH --time=1:00:00
#SBATCH --output=%x-%j.out
mpirun ./heat --steps 1000
