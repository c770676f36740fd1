"""Shared data model: the event table and the run directory. Imports nothing else of ours."""

from scalescope.events.run import RankMeta, Run, RunDirError, RunMeta, load_run
from scalescope.events.schema import PHASES, Kind
from scalescope.events.table import EventTable, SymbolTable
from scalescope.events.writer import EventWriter

__all__ = [
    "PHASES",
    "EventTable",
    "EventWriter",
    "Kind",
    "RankMeta",
    "Run",
    "RunDirError",
    "RunMeta",
    "SymbolTable",
    "load_run",
]
