"""Across runs: two runs compared, a scale study's table, a suite's efficiency."""
