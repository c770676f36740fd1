"""The world an external launcher started (srun, mpirun, torchrun) and where its ranks meet."""
