#!/bin/bash
#SBATCH -J lj-melt
#SBATCH -N 4
#SBATCH --ntasks-per-node=16
#SBATCH --time=04:00:00
# A LAMMPS Lennard-Jones melt (the deck of benchmarks/runtime/in.melt). Its -var inputs are
# what the bundled `lmp` runtime model was trained on; the directive names the halo
# exchange the communication model prices.
#HPCPREDICT comm=halo3d comm_bytes=65536
export OMP_NUM_THREADS=1
srun lmp -in in.melt -var x 20 -var y 20 -var z 20 -var steps 2000 -var cutoff 2.5 -var skin 0.3 -var temp 3.0 -var newton on
