"""Fits and projections: the α-β communication model, compute models, the hardware catalogue."""
