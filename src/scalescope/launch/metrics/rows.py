"""The series of one scrape (launch/metrics/endpoint.py) as columns, a row per rank or per node, and
their families of samples (launch/metrics/text.py): each family's values formatted in one
pass, so that a scrape of 1,024 ranks' series costs milliseconds.

Per node (``--metrics-per node``) the counters are the sums of the node's ranks, the step
gauge its slowest rank's, and the per-op gauges the means of its ranks' by op and mesh
dimension (by group where a group's dimension is not known).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from scalescope.analyze.comm.collectives import bus_factor
from scalescope.events.live_state import TOTAL_PHASES, LiveState
from scalescope.launch.metrics.labels import GroupInfo
from scalescope.launch.metrics.text import COUNTER, GAUGE, Family, joined, label_text

PREFIX = "scalescope_"

COUNTERS = (
    ("steps", "Steps done"),
    ("step_seconds", "Time in steps (s)"),
    ("samples", "Training samples"),
    ("collective_seconds", "Time in collectives, issue to completion (s)"),
)
OP_GAUGES = (
    ("collective_bytes", "Message size of the last completed collective of each op and group "
     "(bytes)"),
    ("collective_bytes_per_second", "Bytes/s (algbw: size / time from issue to completion) of "
     "the last completed collective of each op and group"),
    ("collective_bus_bytes_per_second", "Bus bandwidth (algbw x nccl-tests' factor for the "
     "group's size) of the last completed collective of each op and group"),
)  # fmt: skip


STEP_HELP = (
    "Steps done: the step a rank is in, from 0 (per node: its slowest rank's); "
    "steps_total's rate() is the speed"
)


class OpRow(NamedTuple):
    """One op series: its row (rank or node), op, group, dimension, size and bandwidths."""

    row: int
    op: str
    group: str
    dim: str
    nbytes: float
    bw: float
    busbw: float
    """NaN where the group's size is not known or the op has no bus factor (barrier)."""


@dataclass
class Rows:
    """The series of one scrape: a label text per row, and its columns."""

    labels: list[str]
    counters: np.ndarray
    """rows x COUNTERS: steps, step seconds, samples, collective seconds."""
    phase_s: np.ndarray
    """rows x TOTAL_PHASES, seconds."""
    step: np.ndarray
    """Per row, the steps done: a rank's, or the fewest of a node's ranks (its slowest)."""
    ops: list[OpRow] = field(default_factory=list)


def rank_rows(states: Sequence[LiveState], labels: list[str]) -> Rows:
    """A row per state; each has its totals (``LiveState.totals`` not None)."""
    n = len(states)
    counters = np.array(
        [(s.steps_done, s.totals.step_ns, s.totals.samples, s.totals.collective_ns)
         for s in states],
        dtype=np.float64,
    ).reshape(n, len(COUNTERS))  # fmt: skip
    counters[:, 1] /= 1e9
    counters[:, 3] /= 1e9
    phases = np.array(
        [[s.totals.phase_ns[p] for p in TOTAL_PHASES] for s in states],
        dtype=np.float64,
    ).reshape(n, len(TOTAL_PHASES))
    return Rows(labels, counters, phases / 1e9, counters[:, 0].copy())


def op_rows(row: int, seen: dict[tuple[str, str], tuple[int, float]],
            group: dict[str, GroupInfo | None]) -> list[OpRow]:  # fmt: skip
    """A rank's op series: the last completed collective of each (op, group) it was seen in
    (``seen``: bytes and seconds), where its group is known (``group``: None while its
    series wait for it)."""
    out = []
    for (op, label), (nbytes, seconds) in seen.items():
        info = group.get(label)
        if info is None:
            continue
        bw = nbytes / seconds
        factor = bus_factor(op, info.size)
        out.append(OpRow(row, op, label, info.dim, nbytes, bw,
                         bw * factor if factor is not None else np.nan))  # fmt: skip
    return out


def node_rows(rows: Rows, hosts: list[str], job_text: str) -> Rows:
    """The rank rows added up per host."""
    names = sorted(set(hosts))
    index = {h: i for i, h in enumerate(names)}
    of = np.array([index[h] for h in hosts], dtype=np.int64)
    n = len(names)

    def total(values: np.ndarray) -> np.ndarray:
        sums = [np.bincount(of, weights=c, minlength=n) for c in values.T]
        return np.stack(sums, 1).reshape(n, values.shape[1])

    labels = [joined(job_text, label_text((("Hostname", h),))) for h in names]
    slowest = np.full(n, np.inf)
    np.minimum.at(slowest, of, rows.step)
    merged = Rows(labels, total(rows.counters), total(rows.phase_s), slowest)
    merged.ops = node_ops(rows.ops, of)
    return merged


def node_ops(ops: list[OpRow], of: np.ndarray) -> list[OpRow]:
    """Per node, op and dimension (the group where the dimension is not known): the mean of
    its ranks' last sizes and bandwidths."""
    found: dict[tuple[int, str, str, str], list[OpRow]] = {}
    for o in ops:
        group = "" if o.dim else o.group
        found.setdefault((int(of[o.row]), o.op, group, o.dim), []).append(o)
    out = []
    for (node, op, group, dim), same in sorted(found.items()):
        n, bus = len(same), [o.busbw for o in same if o.busbw == o.busbw]  # not NaN
        out.append(OpRow(
            node, op, group, dim, sum(o.nbytes for o in same) / n, sum(o.bw for o in same) / n,
            sum(bus) / len(bus) if bus else np.nan,
        ))  # fmt: skip
    return out


def emit(rows: Rows) -> list[Family]:
    """The rows' samples in their families; a phase no row has spent time in is left out."""
    out = []
    for (name, text), column in zip(COUNTERS, rows.counters.T, strict=True):
        family = Family(PREFIX + name, COUNTER, text)
        family.extend(rows.labels, column)
        out.append(family)
    phases = Family(PREFIX + "phase_seconds", COUNTER, "Time in each phase (s)")
    for p, phase in enumerate(TOTAL_PHASES):
        column = rows.phase_s[:, p]
        if column.any():
            tail = f',phase="{phase}"'
            phases.extend([labels + tail for labels in rows.labels], column)
    out.append(phases)
    step = Family(PREFIX + "step", GAUGE, STEP_HELP)
    step.extend(rows.labels, rows.step)
    out.append(step)
    if rows.ops:
        out.extend(op_families(rows))
    return out


def op_families(rows: Rows) -> list[Family]:
    labels = [op_labels(rows.labels[o.row], o.op, o.group, o.dim) for o in rows.ops]
    values = np.array([(o.nbytes, o.bw, o.busbw) for o in rows.ops], dtype=np.float64)
    out = []
    for (name, text), column in zip(OP_GAUGES, values.T, strict=True):
        keep = np.flatnonzero(~np.isnan(column)).tolist()
        family = Family(PREFIX + name, GAUGE, text)
        family.extend([labels[i] for i in keep], column[keep])
        out.append(family)
    return out


@functools.lru_cache(maxsize=1 << 16)
def op_labels(base: str, op: str, group: str, dim: str) -> str:
    """A rank's (or node's) label text with an op's: made once per series."""
    return joined(base, label_text((("op", op), ("group", group), ("dim", dim))))
