"""Collectives by op and size, the comm micro-benchmark's columns, the α-β fits."""
