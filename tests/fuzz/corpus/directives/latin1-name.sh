#!/bin/sh
#SBATCH -J café
true
