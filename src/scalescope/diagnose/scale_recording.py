"""``ScaleRecording``: a run analysed from its node files (analyze/scale/), as ``Recording`` is
for a run analysed from its rank files: the analysis and the verdict once each, and a rank's
detail read on demand from its rank file (``rank``), never every rank's rows."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from scalescope.analyze.scale.summary import ScaleAnalysis, analyse_node_files
from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.scale_verdict import scale_verdict
from scalescope.events.files import events_path
from scalescope.events.node_stats import summarised_rows
from scalescope.events.reader import read_event_stream
from scalescope.events.run import RunDirError
from scalescope.events.schema import Kind


@dataclass(frozen=True)
class RankDetail:
    """One rank's figures from its rank file."""

    rank: int
    steps: int
    step_ms: float
    """Mean over its steps."""
    phase_ms: dict[str, float]
    """Mean per step of each phase."""
    collectives_per_step: float
    problem: str | None = None
    """What was wrong with the file (a cut stream: its complete batches are used)."""

    @property
    def lines(self) -> list[str]:
        phases = ", ".join(f"{k} {v:.1f}" for k, v in self.phase_ms.items())
        out = [f"rank {self.rank}: {self.steps:,} steps, mean {self.step_ms:.1f} ms; "
               f"{self.collectives_per_step:.1f} collectives per step",
               f"  phases (ms per step): {phases}"]  # fmt: skip
        return out + ([f"  {self.problem}"] if self.problem else [])


def rank_detail(run_dir: Path, rank: int) -> RankDetail:
    """Rank ``rank``'s detail; RunDirError (one line) when the run has no file of it."""
    path = events_path(run_dir, rank)
    if not path.is_file():
        raise RunDirError(f"rank {rank} has no rank file in {run_dir} ({path.name})")
    read = read_event_stream(path)
    t = read.table
    kind = t.column("kind").to_numpy()
    dur = t.column("dur_ns").to_numpy()
    steps = int((kind == int(Kind.STEP)).sum())
    names = np.array(t.column("name").to_pylist(), dtype=object)
    phase = kind == int(Kind.PHASE)
    per = max(steps, 1)
    phase_ms = {str(n): float(dur[phase & (names == n)].sum()) / per / 1e6
                for n in dict.fromkeys(names[phase].tolist())}  # fmt: skip
    step_ms = float(dur[kind == int(Kind.STEP)].mean()) / 1e6 if steps else float("nan")
    return RankDetail(rank, steps, step_ms, phase_ms, _calls(t, kind) / per, read.problem)


def _calls(t: pa.Table, kind: np.ndarray) -> int:
    """The rank's collective calls: their rows, and the SUMMARY rows' counts of the steps
    recorded as summaries only (``--record summary``)."""
    calls = kind == int(Kind.COLLECTIVE)
    step = t.column("step").to_numpy()
    folded = summarised_rows(t, kind) & ~np.isin(step, step[calls])
    return int(calls.sum()) + int(t.column("count").to_numpy()[folded].sum())


class ScaleRecording:
    """A run with node files, analysed from them."""

    def __init__(self, run_dir: Path | str) -> None:
        self.path = Path(run_dir)

    @cached_property
    def analysis(self) -> ScaleAnalysis:
        return analyse_node_files(self.path)

    @cached_property
    def verdict(self) -> Verdict:
        return scale_verdict(self.analysis)

    def rank(self, rank: int) -> RankDetail:
        """Rank ``rank``'s detail from its rank file (sampled and planted ranks have one)."""
        return rank_detail(self.path, rank)
