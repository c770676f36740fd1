"""Beside the launcher: the hang watch and the slowdown watch over the ranks' live states."""
