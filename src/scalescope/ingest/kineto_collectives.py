"""Collectives of one rank's Kineto trace: op, message size (nccl-tests convention), times.

Two sources, as the trace has them:

- ``record_param_comms`` with ``Collective name`` (NCCL in torch >= 2.1): op, element
  counts, dtype, group and, in newer versions, ``Seq``. Completion is the end of the GPU
  kernel with the same ``External id`` when the trace has it, else the CPU op's end.
- ``gloo:<op>`` annotations (gloo, on its worker threads: they span the work's execution)
  and, in traces without ``Collective name`` (torch < 2.1), ``nccl:<op>`` annotations; sizes
  from ``Input Dims``/``Input type`` (``record_shapes=True``). The ``c10d::<op>`` op that
  issued each one (same op, in issue order) gives the issue time, the thread and the op the
  caller asked for (gloo runs a reduce-scatter as an all-reduce).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass

from scalescope.ingest.kineto_scan import CommRecord, FileScan, OpRecord, Span, Tid
from scalescope.ingest.rows import dtype_info, normalize_op, numel

TIMES_GROUP = ("all_gather", "gather", "scatter")
"""Ops whose message (nccl-tests convention) is the per-rank tensor times the group size."""
NO_PAYLOAD = ("barrier",)


@dataclass(frozen=True)
class Collective:
    op: str
    issue_ns: int
    end_ns: int
    tid: Tid
    nbytes: int
    count: int
    dtype: str
    group: str
    seq: int | None
    sized: bool
    """False when the trace did not record the message size (record_shapes off)."""
    peer: int = -1
    """A send's or recv's partner: its issuing op's group rank, on gloo's rows (group "0")."""


class SpanIndex:
    """Which spans (per thread, non-nested) contain a time; built once, queried often."""

    def __init__(self, spans: list[tuple[int, int, Tid]]) -> None:
        by_tid: dict[Tid, list[tuple[int, int]]] = defaultdict(list)
        for start, end, tid in spans:
            by_tid[tid].append((start, end))
        self._starts: dict[Tid, list[int]] = {}
        self._ends: dict[Tid, list[int]] = {}
        for tid, items in by_tid.items():
            items.sort()
            self._starts[tid] = [s for s, _ in items]
            self._ends[tid] = [e for _, e in items]

    def contains(self, tid: Tid, t: int) -> bool:
        starts = self._starts.get(tid)
        if not starts:
            return False
        i = bisect_right(starts, t) - 1
        return i >= 0 and self._ends[tid][i] >= t


def to_ns(scan: FileScan, us: float) -> int:
    return scan.base_ns + round(us * 1000)


def _span_ns(scan: FileScan, span: Span) -> tuple[int, int]:
    return to_ns(scan, span.start_us), to_ns(scan, span.end_us)


def from_comm(scan: FileScan, rec: CommRecord) -> Collective:
    op = normalize_op(rec.op_raw)
    dtype, size = dtype_info(rec.dtype)
    in_n, out_n = rec.in_nelems or 0, rec.out_nelems or 0
    group_size = rec.group_size or 1
    if op in NO_PAYLOAD:
        count = 0
    elif op == "all_gather":
        count = out_n or in_n * group_size
    elif op == "gather":
        count = in_n * group_size
    elif op == "scatter":
        count = out_n * group_size
    elif op == "recv":
        count = out_n or in_n
    else:
        count = in_n
    start, end = _span_ns(scan, rec.span)
    if rec.external_id is not None and rec.external_id in scan.kernel_end_us:
        end = max(end, to_ns(scan, scan.kernel_end_us[rec.external_id]))
    sized = rec.in_nelems is not None or op in NO_PAYLOAD
    return Collective(
        op, start, end, rec.span.tid, count * size, count, dtype, rec.group, rec.seq, sized
    )


def _first_tensor(dims: list) -> list[int] | None:
    """The shape of the first input when it is one tensor (a flat list of ints)."""
    if dims and isinstance(dims[0], list) and all(isinstance(d, int) for d in dims[0]):
        return dims[0]
    return None


def _backend_size(ann: OpRecord, issuer: OpRecord | None, op: str, world: int) -> tuple:
    """(count, dtype, element size, sized) of a gloo:/nccl: annotation."""
    shape = _first_tensor(ann.dims)
    dtype, size = dtype_info(ann.types[0] if ann.types and isinstance(ann.types[0], str) else "")
    if op in NO_PAYLOAD:
        return 0, "", 0, True
    if shape is None:
        return 0, dtype, size, False
    count = numel(shape)
    output = _first_tensor(issuer.dims) if issuer is not None else None
    if op == "all_gather" and output:  # _allgather_base_(output, input): the whole output
        count = numel(output)
    elif op in TIMES_GROUP:
        count *= world
    return count, dtype, size, True


def _numels(dims: list) -> set[int]:
    """Element counts of every tensor shape in recorded ``Input Dims`` (lists nest)."""
    if dims and all(isinstance(d, int) for d in dims):
        return {numel(dims)}
    out: set[int] = set()
    for item in dims:
        if isinstance(item, list) and item:
            out |= _numels(item)
    return out


PAIR_WINDOW = 16
"""Unpaired issuing ops looked at per annotation (leftovers never block pairing)."""


def _pair_issuers(anns: list[OpRecord], c10d: list[OpRecord]) -> list[OpRecord | None]:
    """The c10d op that issued each annotation: same op, not later, same tensor size when
    the shapes say so (gloo runs works on two threads: starts can swap), earliest first."""
    queues: dict[str, list[OpRecord]] = defaultdict(list)
    for op in sorted(c10d, key=lambda o: o.span.start_us):
        queues[normalize_op(op.op_raw)].append(op)
    paired: list[OpRecord | None] = []
    for ann in anns:
        op = normalize_op(ann.op_raw.split(":", 1)[1])
        pick = None
        for asked in (op, *RUN_AS.get(op, ())):
            pick = _earliest_fit(queues[asked], ann)
            if pick is not None:
                queues[asked].remove(pick)
                break
        paired.append(pick)
    return paired


RUN_AS = {"all_reduce": ("reduce_scatter",)}
"""Ops a backend runs as another: gloo runs ``_reduce_scatter_base_`` as an all-reduce of
the whole input (its annotation says ``gloo:all_reduce``)."""


def _earliest_fit(queue: list[OpRecord], ann: OpRecord) -> OpRecord | None:
    size = _numels(ann.dims[:1])
    window = [o for o in queue[:PAIR_WINDOW] if o.span.start_us <= ann.span.start_us]
    same = [o for o in window if size & _numels(o.dims)]
    return (same or window or [None])[0]


def from_backend(scan: FileScan, backends: tuple[str, ...], world: int) -> list[Collective]:
    anns = sorted(
        (a for a in scan.backend_ops if a.op_raw.split(":", 1)[0] in backends),
        key=lambda a: a.span.start_us,
    )
    out = []
    for ann, issuer in zip(anns, _pair_issuers(anns, scan.c10d_ops), strict=True):
        op = normalize_op((issuer or ann).op_raw.split(":", 1)[-1])  # what the caller asked
        count, dtype, size, sized = _backend_size(ann, issuer, op, world)
        first = issuer.span if issuer is not None else ann.span
        start = to_ns(scan, min(first.start_us, ann.span.start_us))
        end = to_ns(scan, max(ann.span.end_us, first.end_us))
        peer = issuer.peer if issuer is not None else -1
        out.append(
            Collective(
                op, start, end, first.tid, count * size, count, dtype, "0", None, sized, peer
            )
        )
    return out


def collectives_of(scans: list[FileScan], world: int) -> list[Collective]:
    """Every collective of one rank's files, in issue order."""
    with_names = any(scan.comms for scan in scans)
    backends = ("gloo",) if with_names else ("gloo", "nccl")
    out: list[Collective] = []
    for scan in scans:
        out.extend(from_comm(scan, rec) for rec in scan.comms)
        out.extend(from_backend(scan, backends, world))
    out.sort(key=lambda c: c.issue_ns)
    return out


def number(collectives: list[Collective]) -> list[int]:
    """Sequence numbers: the trace's own ``Seq`` when present, else a per-group counter."""
    counters: dict[str, int] = defaultdict(int)
    seqs = []
    for c in collectives:
        if c.seq is not None:
            seqs.append(c.seq)
        else:
            seqs.append(counters[c.group])
        counters[c.group] += 1
    return seqs
