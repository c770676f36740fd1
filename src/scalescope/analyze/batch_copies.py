"""The batches' copies to the device (``to_device`` phase rows), per rank: bytes, time and
how much came from pageable memory, over the measured steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    out = []
    for rank in np.unique(rows.rank):
        mine = rows.rank == rank
        steps = len(np.unique(rows.step[mine]))
        out.append(
            RankCopies(
                rank=int(rank), steps=steps,
                tensors_per_step=float(rows.count[mine].sum()) / steps,
                nbytes_per_step=float(rows.nbytes[mine].sum()) / steps,
                ms_per_step=float(np.maximum(rows.dur_ns[mine], 0).sum()) / steps / 1e6,
                pageable_nbytes_per_step=float(rows.nbytes[mine & pageable].sum()) / steps,
            )
        )  # fmt: skip
    return tuple(out)
