"""Layouts: point-to-point pairs, pipeline stages, each rank's place in the mesh."""
