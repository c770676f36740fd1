"""Pure functions over a loaded run, returning frozen, presentation-free results."""

from scalescope.analyze.comm.collectives import (
    CollectiveAnalysis,
    IncompleteCalls,
    OpTotals,
    SizeStats,
    TagPerStep,
    analyze_collectives,
    bus_factor,
)
from scalescope.analyze.rank_status import RankStatus
from scalescope.analyze.steps.steps import (
    MemoryPeak,
    PhaseStats,
    RankSteps,
    StepAnalysis,
    analyze_steps,
)
from scalescope.analyze.summary import RunAnalysis

__all__ = [
    "CollectiveAnalysis",
    "IncompleteCalls",
    "MemoryPeak",
    "OpTotals",
    "PhaseStats",
    "RankStatus",
    "RankSteps",
    "RunAnalysis",
    "SizeStats",
    "StepAnalysis",
    "TagPerStep",
    "analyze_collectives",
    "analyze_steps",
    "bus_factor",
]
