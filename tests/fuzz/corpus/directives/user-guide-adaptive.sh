#!/bin/bash
#AQS --adaptive --min 2 --max 8
mpirun -np $AQS_NPROCS ./jacobi2d --rows 4096 --cols 4096 --iters 5000
