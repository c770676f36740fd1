"""The batches' copies to the device (``to_device`` phase rows), per rank: bytes, time and
how much came from pageable memory, over the measured steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.grouping import group_by
from scalescope.events import EventTable, Kind
from scalescope.events.schema import TO_DEVICE

PAGEABLE_TAGS = ("pageable", "mixed")


@dataclass(frozen=True)
class RankCopies:
    rank: int
    steps: int
    """Measured steps with at least one copy."""
    tensors_per_step: float
    nbytes_per_step: float
    ms_per_step: float
    pageable_nbytes_per_step: float
    """Bytes of copies whose source was not pinned (all of a ``mixed`` row's)."""


def batch_copies(events: EventTable, warmup_steps: int) -> tuple[RankCopies, ...]:
    """Each rank's copies per measured step that had any (empty where none was recorded)."""
    name = events.symbols.id_of(TO_DEVICE)
    if len(events) == 0 or name < 0:
        return ()
    rows = events.of_kind(Kind.PHASE)
    rows = rows.select((rows.name == name) & (rows.step >= warmup_steps))
    if len(rows) == 0:
        return ()
    pageable = np.isin(rows.tag, [rows.symbols.id_of(t) for t in PAGEABLE_TAGS])
    by_rank = group_by(rows.rank)
    steps = group_by(group_by(rows.rank, rows.step).key(0)).count()
    tensors, nbytes = by_rank.sum(rows.count) / steps, by_rank.sum(rows.nbytes) / steps
    ms = by_rank.sum(np.maximum(rows.dur_ns, 0)) / steps / 1e6
    paged = by_rank.sum(np.where(pageable, rows.nbytes, 0)) / steps
    out = [
        RankCopies(
            rank=int(r), steps=int(steps[i]), tensors_per_step=float(tensors[i]),
            nbytes_per_step=float(nbytes[i]), ms_per_step=float(ms[i]),
            pageable_nbytes_per_step=float(paged[i]),
        )
        for i, r in enumerate(by_rank.key(0))
    ]  # fmt: skip
    return tuple(out)
