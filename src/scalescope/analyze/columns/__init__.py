"""Sorting and grouping rows by integer keys, and the measured (rank, step) keys."""
