#!/bin/bash
#SBATCH -J kth-job
#SBATCH -N 8
#SBATCH --ntasks-per-node=1
#SBATCH -t 4:00:00
# An example job of KTH-SP2 user 91, the trace's busiest user (the Parallel Workloads Archive
# trace identifies users by number and records no executable). `hpcpredict predict` reads the
# #SBATCH lines above; run it with `--user 91` to predict from that user's real history.
srun ./solver
