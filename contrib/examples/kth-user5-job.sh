#!/bin/bash
#SBATCH -J kth-app7
#SBATCH -N 8
#SBATCH --ntasks-per-node=1
#SBATCH -t 2:00:00
# An example job of a KTH-SP2 user (the bundled trace identifies users and executables by
# number: user 5, executable 7). `hpcpredict predict` reads the #SBATCH lines above.
#HPCPREDICT app=7
srun ./app7
