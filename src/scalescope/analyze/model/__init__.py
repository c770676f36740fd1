"""The step model: the measured steps as a grid, replayed, and the what-if."""
