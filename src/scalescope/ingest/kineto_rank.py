"""One rank's Kineto files -> event rows with the probe's semantics (docs/schema.md).

Steps are ``ProfilerStep#N`` (step N). Phases come from ``## name ##`` user annotations
when the trace has them for that phase, else from what torch records by itself:
``enumerate(DataLoader)#...`` (data), ``DistributedDataParallel.forward`` (forward),
``Optimizer.step#...`` (optimizer), and for backward the envelope of the
``autograd::engine::evaluate_function`` ops between two other phases, extended to the end
of DDP's ``reducer::copy_bucket_to_grad`` (the end of ``loss.backward()``). As the probe
does, backward ends at the issue of the last gradient bucket and the rest is ``comm_wait``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from scalescope.events import Kind
from scalescope.ingest.kineto_collectives import (
    Collective,
    SpanIndex,
    collectives_of,
    number,
    to_ns,
)
from scalescope.ingest.kineto_scan import FileScan
from scalescope.ingest.rows import RowBuilder

Interval = tuple[int, int]


@dataclass(frozen=True)
class RankSummary:
    steps: int
    collectives: int
    unsized: int
    """Collectives whose message size the trace did not record."""
    phases: tuple[str, ...]


class StepClock:
    """Maps a time to the ProfilerStep running then."""

    def __init__(self, steps: list[tuple[int, int, int]]) -> None:
        self.steps = steps
        self._starts = [s for _, s, _ in steps]

    def step_of(self, t: int) -> int:
        if not self.steps:
            return 0
        i = bisect_right(self._starts, t) - 1
        return self.steps[i][0] if i >= 0 else max(self.steps[0][0] - 1, -1)


def _steps(scans: list[FileScan]) -> list[tuple[int, int, int]]:
    seen: dict[int, tuple[int, int, int]] = {}
    for scan in scans:
        for n, span in scan.steps:
            seen.setdefault(n, (n, to_ns(scan, span.start_us), to_ns(scan, span.end_us)))
    return sorted(seen.values(), key=lambda s: s[1])


def _spans(scans: list[FileScan], pick: str, phase: str) -> list[Interval]:
    out = []
    for scan in scans:
        table = scan.user_phases if pick == "user" else scan.builtin_phases
        out.extend((to_ns(scan, s.start_us), to_ns(scan, s.end_us)) for s in table.get(phase, []))
    return out


def merge(intervals: list[Interval]) -> list[Interval]:
    """Union of intervals, so nested or repeated annotations count once."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _backward_envelopes(scans: list[FileScan], barriers: list[int]) -> list[Interval]:
    """Backward nodes grouped by the other phases between them; each group's envelope."""
    groups: dict[int, list[int]] = {}
    for scan in scans:
        for span in scan.backward_nodes:
            start, end = to_ns(scan, span.start_us), to_ns(scan, span.end_us)
            key = bisect_right(barriers, start)
            box = groups.setdefault(key, [start, end])
            box[0], box[1] = min(box[0], start), max(box[1], end)
    for scan in scans:
        for span in scan.reducer:
            box = groups.get(bisect_right(barriers, to_ns(scan, span.start_us)))
            if box is not None:
                box[1] = max(box[1], to_ns(scan, span.end_us))
    return sorted((s, e) for s, e in groups.values())


def phase_intervals(scans: list[FileScan], steps: list[tuple[int, int, int]]) -> dict:
    """phase -> merged intervals (ns), user annotations first, else torch's own."""
    phases: dict[str, list[Interval]] = {}
    for phase in ("data", "forward", "optimizer", "backward"):
        user = _spans(scans, "user", phase)
        if user:
            phases[phase] = merge(user)
        elif phase != "backward":
            phases[phase] = merge(_spans(scans, "builtin", phase))
    if "backward" not in phases:
        barriers = sorted(
            [s for spans in phases.values() for s, _ in spans] + [s for _, s, _ in steps]
        )
        phases["backward"] = _backward_envelopes(scans, barriers)
    return {p: v for p, v in phases.items() if v}


def split_comm_wait(backward: list[Interval], grads: list[int]) -> tuple[list, list]:
    """Backward ends at the last gradient bucket's issue; the rest is comm_wait."""
    grads = sorted(grads)
    compute, wait = [], []
    for start, end in backward:
        i = bisect_right(grads, end) - 1
        last = grads[i] if i >= 0 and grads[i] >= start else None
        if last is None or last >= end:
            compute.append((start, end))
        else:
            compute.append((start, last))
            wait.append((last, end))
    return compute, wait


def _index(scans: list[FileScan], attr: str) -> SpanIndex:
    spans = []
    for scan in scans:
        spans.extend(
            (to_ns(scan, s.start_us), to_ns(scan, s.end_us), s.tid) for s in getattr(scan, attr)
        )
    return SpanIndex(spans)


def _tags(scans: list[FileScan], colls: list[Collective]) -> list[str]:
    """gradients: issued inside AccumulateGrad (DDP's bucket hook); buffers: a broadcast
    inside DistributedDataParallel.forward; user otherwise."""
    grads = _index(scans, "accumulate_grad")
    ddp_forward = SpanIndex(
        [
            (to_ns(s, sp.start_us), to_ns(s, sp.end_us), sp.tid)
            for s in scans
            for sp in s.builtin_phases.get("forward", [])
        ]
    )
    tags = []
    for c in colls:
        if grads.contains(c.tid, c.issue_ns):
            tags.append("gradients")
        elif c.op == "broadcast" and ddp_forward.contains(c.tid, c.issue_ns):
            tags.append("buffers")
        else:
            tags.append("user")
    return tags


def _add_collectives(
    rows: RowBuilder, clock: StepClock, colls: list[Collective], tags: list[str]
) -> None:
    for c, seq, tag in zip(colls, number(colls), tags, strict=True):
        rows.add(
            clock.step_of(c.issue_ns),
            Kind.COLLECTIVE,
            c.op,
            c.issue_ns,
            max(c.end_ns - c.issue_ns, 0),
            nbytes=c.nbytes,
            count=c.count,
            dtype=c.dtype,
            group=c.group,
            seq=seq,
            tag=tag,
            peer=c.peer,
        )


def rank_rows(rows: RowBuilder, scans: list[FileScan], world: int) -> RankSummary:
    """Append one rank's STEP, PHASE and COLLECTIVE rows; files in time order."""
    steps = _steps(scans)
    clock = StepClock(steps)
    for n, start, end in steps:
        rows.add(n, Kind.STEP, "step", start, end - start)
    colls = collectives_of(scans, world)
    tags = _tags(scans, colls)
    _add_collectives(rows, clock, colls, tags)
    phases = phase_intervals(scans, steps)
    if "backward" in phases:
        grads = [c.issue_ns for c, t in zip(colls, tags, strict=True) if t == "gradients"]
        phases["backward"], wait = split_comm_wait(phases["backward"], grads)
        if wait:
            phases["comm_wait"] = wait
    for phase, intervals in phases.items():
        for start, end in intervals:
            rows.add(clock.step_of(start), Kind.PHASE, phase, start, end - start)
    unsized = sum(1 for c in colls if not c.sized)
    return RankSummary(len(steps), len(colls), unsized, tuple(sorted(phases)))
