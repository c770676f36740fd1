"""Across ranks: one time base, the process groups, each collective matched by (group,
seq), slow links."""
