"""The per-node series of a scrape (``--metrics-per node``) from the nodes' records
(launch/channel/node_record.py) rather than from every rank's state: the same sums, slowest
step and per-op means as launch/metrics/rows.py ``node_rows`` gives of the node's ranks, for
a row per node's record. Ranks no record covers (a relay that publishes none, a record that
did not open) come from their states, reduced here the same way."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from scalescope.analyze.comm.collectives import bus_factor
from scalescope.events.live_state import TOTAL_PHASES, LiveState
from scalescope.launch.channel.node_record import NodeRecord, OpsSeen, node_record
from scalescope.launch.metrics.labels import RankLabels
from scalescope.launch.metrics.rows import COUNTERS, OpRow, Rows
from scalescope.launch.metrics.text import joined, label_text


def uncovered_records(
    states: Mapping[int, LiveState], ops: Mapping[int, OpsSeen], labels: RankLabels,
    records: Sequence[NodeRecord],
) -> list[NodeRecord]:  # fmt: skip
    """The ranks no record covers, as a record per host (a rank waits for its host as a
    rank's series do, launch/metrics/labels.py)."""
    covered = {r for record in records for r in record.ranks}
    by_host: dict[str, dict[int, LiveState]] = {}
    for rank, state in sorted(states.items()):
        if rank in covered or state.totals is None:
            continue
        known = labels.rank(rank, state.steps_done > 0)
        if known is not None:
            by_host.setdefault(known[1], {})[rank] = state
    made = (node_record(host, 0.0, found, ops) for host, found in by_host.items())
    return [r for r in made if r is not None]


def record_rows(records: Sequence[NodeRecord], labels: RankLabels) -> Rows:
    """A row per host of the records with totals (two records of one host added up)."""
    having = [(r, r.totals) for r in records if r.totals is not None]
    names = sorted({r.host for r, _ in having})
    index = {h: i for i, h in enumerate(names)}
    n = len(names)
    counters = np.zeros((n, len(COUNTERS)))
    phases = np.zeros((n, len(TOTAL_PHASES)))
    step = np.full(n, np.inf)
    for record, t in having:
        row = index[record.host]
        counters[row] += (t.steps, t.step_ns / 1e9, t.samples, t.collective_ns / 1e9)
        phases[row] += np.asarray(t.phase_ns, dtype=np.float64) / 1e9
        step[row] = min(step[row], record.steps_min)
    text = [host_labels(labels.job_text, h) for h in names]
    rows = Rows(text, counters, phases, step)
    rows.ops = record_ops([r for r, _ in having], index, labels)
    return rows


@functools.lru_cache(maxsize=1 << 16)
def host_labels(job_text: str, host: str) -> str:
    """A node's label text: made once per node."""
    return joined(job_text, label_text((("Hostname", host),)))


def record_ops(
    records: Sequence[NodeRecord], index: Mapping[str, int], labels: RankLabels
) -> list[OpRow]:
    """Per host, op and dimension (the group where the dimension is not known): the mean of
    the ranks' last sizes and bandwidths, each record's sums weighed by its ranks."""
    found: dict[tuple[int, str, str, str], list[float]] = {}
    for record in records:
        for o in record.ops:
            info = labels.group(o.rank, o.group)
            if info is None:
                continue
            sums = found.setdefault(
                (index[record.host], o.op, "" if info.dim else o.group, info.dim), [0.0] * 5
            )
            factor = bus_factor(o.op, info.size)
            sums[0] += o.count
            sums[1] += o.nbytes
            sums[2] += o.bw
            if factor is not None:
                sums[3] += o.count
                sums[4] += o.bw * factor
    return [
        OpRow(row, op, group, dim, nbytes / n, bw / n, bus / bus_n if bus_n else np.nan)
        for (row, op, group, dim), (n, nbytes, bw, bus_n, bus) in sorted(found.items())
    ]
