"""``comm:dropped@tag:NAME``: the calls of a tag taken out of every step, the fix the
exposed-communication findings tell a user to make for the script's own per-step collectives
("drop per-step collectives outside DDP": a reduced loss's ``.item()``, metrics) and for DDP's
buffer broadcasts (``broadcast_buffers=False``).

It buys more than ``comm:hidden@tag:NAME``, which keeps each call and only its transfer goes:
a call dropped has no transfer, no wait for its group's last arrival and is no point the ranks
meet at, and the host work that builds its message goes with it. That work runs just before
the call (a metrics tensor made, a 3 MB ``torch.ones`` filled), in the rank's own time before
it (step_grid.py) and outside every phase the probe records (data, forward, backward, the
optimizer, ...): the own time before a dropped call less the phases in it is that work, the
rest of that own time moves to the next call kept (or the step's tail), as a call that merges
away hands it on in unit_fuse.py. Where the run records no forward and backward phases, the
time outside them may be the step's compute: no host work is then taken away. The free of
the message after the call is left: it lies in the next call's own time, among the rest.

On the fault matrix's ddp-exposed-comm (tiny DDP buckets; planted, a 394,000-element float64
all-reduce of the script's own after each step, tag ``user``; 2026-11-29 kept runs, 5 pairs
of seed 49 and 3 of seed 4902), the own time before the user's call was 0.52-0.70 ms a step,
all of it outside every phase (a 3 MB tensor on fresh pages: 1.0 ms alone on this machine
with every allocation mapped anew), time ``comm:hidden@tag:user`` keeps and the clean re-run
does not spend. The clean arms' mean step was 1.41-5.23 ms shorter (median of 5: 4.35; of
seed 4902's 3: 2.54), ``comm:hidden@tag:user`` replayed 1.95-3.33 (medians 2.42 and 2.08),
this fix 2.49-4.04 (medians 3.15 and 3.06; mean of all 8 pairs 3.19 against 3.24 measured and
2.48 for ``comm:hidden@tag:user``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.unit_fuse import FusePlan, columns_kept, own_time_moved, parts_moved
from scalescope.events.schema import EXTRA_PHASES, PHASES
from scalescope.events.tags import GRADIENTS, tag_kind

DROPPED = "comm:dropped"
DROP_FORM = f"{DROPPED}@tag:NAME (NAME[,NAME...])"
ALL_PHASES = (*PHASES, *EXTRA_PHASES)
"""The phases the grid needs for this fix: every one, so that the own time outside them is
the host work around the calls."""
COMPUTE_PHASES = ("forward", "backward")
"""Phases without which the time outside phases may be the step's compute."""


def is_drop(part: str) -> bool:
    return part == DROPPED or part.startswith(f"{DROPPED}@")


def drop_plan(grid: StepGrid, mask: np.ndarray, part: str) -> FusePlan:
    """Each place of ``mask`` ((ranks, collectives) of bool: the scope's calls) dropped,
    every other kept. ValueError where the ranks' steps do not drop the same places, a
    place is one of DDP's gradient buckets (no fix drops a model's gradient sync: its
    transfers hidden are ``comm:hidden@tag:gradients``) or of a batch of sends and
    receives, or nothing would be left to replay."""
    if not (mask == mask[:1]).all():
        raise ValueError(f"bad cause {part!r}: the ranks hold the tag's calls at other places")
    places = mask[0]
    tags = grid.tags[0] if grid.tags is not None else np.array([""] * len(places))
    if any(tag_kind(str(t)) == GRADIENTS for t in tags[places]):
        raise ValueError(f"bad cause {part!r}: DDP's gradient buckets cannot be dropped")
    if _batched(grid.waits_with, places):
        raise ValueError(f"bad cause {part!r}: the calls are batched sends and receives")
    if places.all():
        raise ValueError(f"bad cause {part!r}: no call would be left to replay")
    into = np.arange(len(places))
    into[places] = -1
    return FusePlan(into)


def _batched(waits: np.ndarray | None, places: np.ndarray) -> bool:
    """Whether a place dropped is a send or recv of a batch, or the one a batch waits at."""
    if waits is None:
        return False
    return bool((waits[:, places] >= 0).any() or np.isin(waits, np.flatnonzero(places)).any())


def host_work_ns(grid: StepGrid, plan: FusePlan) -> np.ndarray:
    """(steps, ranks, collectives): the own time before each dropped call outside every
    recorded phase (the host work that builds its message); 0 at the places kept, and
    everywhere when the run records no forward and backward (``COMPUTE_PHASES``)."""
    out = np.zeros(grid.shape)
    if not all(name in grid.phase_ns for name in COMPUTE_PHASES):
        return out
    k = grid.shape[2]
    inside = sum(parts[:, :, :k] for parts in grid.phase_ns.values())
    outside = np.maximum(grid.work_ns - inside, 0.0)
    out[:, :, plan.merged] = outside[:, :, plan.merged]
    return out


def dropped(
    grid: StepGrid, mask: np.ndarray, label: str, part: str, rows: np.ndarray | slice | None = None
) -> tuple[StepGrid, str]:
    """The grid without the calls of ``mask`` (``drop_plan``), and how: their host work gone
    (``host_work_ns``; the note's figure its mean over ``rows``, default all), the rest of
    their own time handed to the next call kept."""
    plan = drop_plan(grid, mask, part)
    host = host_work_ns(grid, plan)
    work, prejoin, post = own_time_moved(grid, plan, host)
    phases = {n: parts_moved(p, plan, grid.joins) for n, p in grid.phase_ns.items()}
    moved = replace(grid, work_ns=work, prejoin_ns=prejoin, post_ns=post)
    calls = int(plan.merged.sum())
    rows = slice(None) if rows is None else rows
    per_step = float(host[rows].sum(axis=2).mean()) / 1e6
    note = f"{calls} call(s) a step dropped ({label}), {per_step:.2f} ms of host work a step"
    return columns_kept(moved, plan.kept, phases), note
