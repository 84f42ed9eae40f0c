#!/bin/sh
#SBATCH --output=%x-%j.out
# A stand-in for real work: says where it runs, then sleeps.
echo "job $AQS_JOB_ID"
sleep "$1"
