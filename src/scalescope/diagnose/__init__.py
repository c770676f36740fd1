"""Diagnose: name what slows a run or an environment, with the evidence and the remedy.

``env_checks`` recognises the known traps of a software build, its threads and its hardware
from the fact dicts of ``scalescope.launch.facts`` (pure functions over data).
"""
