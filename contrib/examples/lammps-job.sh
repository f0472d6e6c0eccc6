#!/bin/bash
#SBATCH -J lj-melt
#SBATCH -N 4
#SBATCH --ntasks-per-node=16
#SBATCH --time=04:00:00
# A LAMMPS run with a halo-exchange communication phase the comm model can price.
#HPCPREDICT comm=halo3d comm_bytes=65536
export OMP_NUM_THREADS=1
srun lmp -in in.melt -var size 40 -var steps 5000
