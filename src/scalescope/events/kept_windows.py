"""The full rows the flight recorders kept (``events/window-*``: a slowdown's copy, a flush
request's, probe/ring_flush.py), read beside the streams of a run recorded as summaries.

At ``--record summary`` a step's calls are in SUMMARY rows unless the step is a regular
window (probe/windows.py). A kept window holds a rank's full rows of some steps; where every
rank's kept windows hold a step whole (its STEP row; the writers leave out a step the ring
had begun to overwrite) and its stream has only summaries of that step, its COLLECTIVE and
WAIT rows join the stream's: the step is then a full-row window like the regular ones, and
the what-if replays it. A step some rank's windows lack stays summarised on every rank (a
step of full rows on some ranks only would be replayed without the others' calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from scalescope.events.files import EVENTS_DIR
from scalescope.events.reader import read_event_stream
from scalescope.events.schema import Kind

FOLDED = (int(Kind.COLLECTIVE), int(Kind.WAIT))
"""The kinds a summary folds: what a kept window adds to a summarised step."""


@dataclass(frozen=True)
class KeptWindows:
    """Per rank, its kept windows' folded rows of the steps every rank's windows hold."""

    rows: dict[int, pa.Table]
    steps: frozenset[int]

    def added(self, rank: int, stream: pa.Table) -> pa.Table | None:
        """The rank's kept rows of the steps its ``stream`` holds as summaries only."""
        kept = self.rows.get(rank)
        if kept is None or not kept.num_rows:
            return None
        kind = stream["kind"].to_numpy()
        step = stream["step"].to_numpy()
        summarised = np.setdiff1d(step[kind == int(Kind.SUMMARY)], step[np.isin(kind, FOLDED)])
        rows = kept.filter(pa.array(np.isin(kept["step"].to_numpy(), summarised)))
        return rows if rows.num_rows else None


def _rank_of(path: Path) -> int:
    return int(path.stem.rsplit("-", 1)[1])


def _whole(table: pa.Table, taken: set[int]) -> pa.Table:
    """The rows of the steps ``table`` holds whole (its STEP row) and no earlier file gave."""
    step = table["step"].to_numpy()
    steps = set(np.unique(step[table["kind"].to_numpy() == int(Kind.STEP)]).tolist()) - taken
    taken |= steps
    return table.filter(pa.array(np.isin(step, sorted(steps))))


def read_kept_windows(run_dir: Path, ranks: list[int]) -> KeptWindows | None:
    """The kept windows of ``ranks``' (None: none kept, or none of a step every rank has)."""
    paths = sorted((Path(run_dir) / EVENTS_DIR).glob("window-*-rank-*.arrows"))
    if not paths:
        return None
    by_rank: dict[int, list[pa.Table]] = {}
    taken: dict[int, set[int]] = {}
    for path in paths:
        read = read_event_stream(path)
        rank = _rank_of(path)
        if read.table.num_rows and rank in ranks:
            by_rank.setdefault(rank, []).append(_whole(read.table, taken.setdefault(rank, set())))
    common = set.intersection(*(taken.get(r, set()) for r in ranks)) if ranks else set()
    if not common:
        return None
    rows = {}
    for rank, tables in by_rank.items():
        table = pa.concat_tables(tables)
        keep = np.isin(table["step"].to_numpy(), sorted(common))
        keep &= np.isin(table["kind"].to_numpy(), FOLDED)
        rows[rank] = table.filter(pa.array(keep))
    return KeptWindows(rows, frozenset(common))
