"""Each rank's measured steps of a pipeline, for all ranks at once (its STEP rows of steps
>= the warm-up), and the rows that lie in them: the figures per stage (stage_figures.py) and
the own time at the steps' ends (step_ends.py) are read through it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.events import EventTable, Kind


@dataclass(frozen=True)
class MeasuredSteps:
    """Each rank's measured steps (its STEP rows of steps >= the warm-up; all of them where
    none is), for all ranks at once: a 1,024-rank run has millions of rows, and a pass over
    them per rank was the pipeline analysis' whole cost."""

    ranks: np.ndarray
    """Ascending."""
    position: np.ndarray
    """Per rank number: its index in ``ranks``, -1 for any other."""
    count: np.ndarray
    """Per rank: measured STEP rows."""
    step_ms: np.ndarray
    keys: np.ndarray
    """The measured (rank index, step) pairs packed in one key, ascending."""
    steps_of: list[np.ndarray]
    """Per rank: its measured step numbers, as recorded."""
    span: int

    @classmethod
    def of(cls, events: EventTable, ranks: list[int], warmup: int) -> MeasuredSteps:
        ranks_arr = np.array(sorted(ranks), dtype=np.int64)
        position = np.full(max(int(events.rank.max(initial=0)), int(ranks_arr[-1])) + 1, -1)
        position[ranks_arr] = np.arange(len(ranks_arr))
        rows = events.of_kind(Kind.STEP)
        pos = position[rows.rank]
        mine = pos >= 0
        late = mine & (rows.step >= warmup)
        any_late = np.bincount(pos[late], minlength=len(ranks_arr)) > 0
        keep = np.flatnonzero(mine & (late | ~any_late[np.maximum(pos, 0)]))
        at, step = pos[keep], rows.step[keep].astype(np.int64)
        n = len(ranks_arr)
        count = np.bincount(at, minlength=n)
        total = np.bincount(at, weights=rows.dur_ns[keep].astype(np.float64), minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            step_ms = np.where(count > 0, total / np.maximum(count, 1) / 1e6, 0.0)
        span = int(step.max(initial=0)) + 1
        order = np.argsort(at, kind="stable")
        steps_of = np.split(step[order], np.cumsum(count)[:-1])
        return cls(ranks_arr, position, count, step_ms, np.unique(at * span + step), steps_of,
                   span)  # fmt: skip

    def rows_in(self, rows: EventTable) -> tuple[np.ndarray, np.ndarray]:
        """Of ``rows``: those of a rank's measured step, and their rank index."""
        pos = self.position[rows.rank]  # sized for every rank of the table
        inside = (pos >= 0) & (rows.step >= 0) & (rows.step < self.span)
        key = np.where(inside, pos * self.span + rows.step, -1)
        hit = inside & np.isin(key, self.keys)
        return hit, pos

    def phase_ms(self, events: EventTable, name: str) -> np.ndarray:
        """Per rank: the ``name`` phases' time per measured step (ms)."""
        rows = events.of_kind(Kind.PHASE)
        rows = rows.select(rows.name == events.symbols.id_of(name))
        hit, pos = self.rows_in(rows)
        total = np.bincount(pos[hit], weights=rows.dur_ns[hit].astype(np.float64),
                            minlength=len(self.ranks))  # fmt: skip
        return total / 1e6 / np.maximum(self.count, 1)

    def peaks(self, events: EventTable) -> list[int | None]:
        rows = events.of_kind(Kind.MEMORY)
        hit, pos = self.rows_in(rows)
        peak = np.full(len(self.ranks), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(peak, pos[hit], rows.nbytes[hit].astype(np.int64))
        has = np.bincount(pos[hit], minlength=len(self.ranks)) > 0
        return [int(v) if h else None for v, h in zip(peak, has, strict=True)]
