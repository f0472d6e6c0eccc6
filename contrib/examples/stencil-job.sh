#!/bin/bash
#SBATCH -J stencil
#SBATCH -N 4
#SBATCH --ntasks-per-node=1
#SBATCH -t 00:10:00
# The 2-D stencil of benchmarks/scaling/mpi_stencil.c: the bundled `stencil` scaling model
# was fitted on its real runs at 1..24 processes, so the estimate carries node-count advice.
srun ./stencil 200 200
