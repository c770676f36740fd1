"""Horovod timeline (HOROVOD_TIMELINE) -> a Run, the per-activity table and waits.

Horovod's coordinator (rank 0) writes one timeline for the whole job: a Chrome-trace array
in which each tensor is a "process" (``pid``, named by a ``process_name`` record) and each
activity a ``B``/``E`` pair. Per tensor and instance: ``NEGOTIATE_<OP>`` (from the first
rank's request to the last one's; ``X`` marks named by rank number say when each rank was
ready, when the negotiation went through the coordinator), then ``<OP>`` (ALLREDUCE,
BROADCAST, ...) with nested activities: WAIT_FOR_DATA, QUEUE, MEMCPY_IN_FUSION_BUFFER,
the transfer (MPI_ALLREDUCE, NCCL_ALLREDUCE, ...), MEMCPY_OUT_FUSION_BUFFER. The op's
``E`` carries ``dtype`` and ``shape``.

Rows: one COLLECTIVE row per op instance, on rank 0 (the coordinator's clock), from the
start of its negotiation (the first rank's request: the issue, as the probe sees it on the
earliest rank) to the op's end; ``dur_ns`` -1 when the timeline stops before the op ends.
The wait (negotiation) versus transfer split is in ``IngestResult.horovod_waits``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from scalescope.events import Kind, RankMeta, SymbolTable
from scalescope.ingest.horovod_tables import Instance, message, phase_table, tag_of, wait_table
from scalescope.ingest.jsonstream import ArrayStream, Int64, Micros, open_bytes
from scalescope.ingest.result import HOROVOD, IngestResult
from scalescope.ingest.rows import RowBuilder, make_run, normalize_op

NEGOTIATE = "NEGOTIATE_"
TRANSFER_PREFIXES = ("MPI_", "NCCL_", "GLOO_", "CCL_", "DDL_", "ADASUM_", "ONECCL_")
"""Activities that move the bytes (the op's transfer)."""


class HorovodArgs(msgspec.Struct):
    name: str | None = None
    dtype: str | None = None
    shape: str | None = None
    start_us: Micros | None = msgspec.field(default=None, name="start_time_since_epoch_in_micros")


class HorovodEvent(msgspec.Struct):
    ph: str = ""
    name: str = ""
    ts: Micros = 0.0
    pid: Int64 | str = 0
    args: HorovodArgs | None = None


@dataclass
class _Open:
    name: str
    start_us: float
    children_us: float = 0.0
    transfer_us: float = 0.0


@dataclass
class _Tensor:
    name: str = ""
    stack: list[_Open] = field(default_factory=list)
    ticks: dict[int, float] = field(default_factory=dict)
    negotiation: tuple[float, float, dict[int, float]] | None = None
    dtype: str = ""
    shape: list[int] | None = None
    instances: int = 0


@dataclass
class Timeline:
    """State of the replay: open activities per tensor, finished instances, phase sums."""

    start_us: float = 0.0
    tensors: dict[int | str, _Tensor] = field(default_factory=lambda: defaultdict(_Tensor))
    phases: dict[str, list[float]] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)
    max_rank: int = -1
    stray_ends: int = 0
    truncated: bool = False
    """The file stops before the array is closed (a killed job) or is not valid to its end."""

    def feed(self, ev: HorovodEvent) -> None:
        if ev.ph == "B":
            self.tensors[ev.pid].stack.append(_Open(ev.name, ev.ts))
        elif ev.ph == "E":
            self._end(self.tensors[ev.pid], ev)
        elif ev.ph == "X" and ev.name.isdigit():
            self.tensors[ev.pid].ticks[int(ev.name)] = ev.ts
            self.max_rank = max(self.max_rank, int(ev.name))
        elif ev.ph == "M" and ev.name == "process_name" and ev.args is not None:
            if ev.args.start_us is not None:
                self.start_us = float(ev.args.start_us)
            if ev.args.name:
                self.tensors[ev.pid].name = ev.args.name

    def _end(self, tensor: _Tensor, ev: HorovodEvent) -> None:
        if not tensor.stack:
            self.stray_ends += 1
            return
        done = tensor.stack.pop()
        dur = ev.ts - done.start_us
        sums = self.phases.setdefault(done.name, [0.0, 0.0, 0])
        sums[0] += dur
        sums[1] += dur - done.children_us
        sums[2] += 1
        if tensor.stack:
            tensor.stack[-1].children_us += dur
            if done.name.startswith(TRANSFER_PREFIXES) and not any(
                o.name.startswith(TRANSFER_PREFIXES) for o in tensor.stack[1:]
            ):
                tensor.stack[0].transfer_us += dur
        elif done.name.startswith(NEGOTIATE):
            tensor.negotiation = (done.start_us, ev.ts, tensor.ticks)
            tensor.ticks = {}
        else:
            self._op_done(tensor, done, ev)

    def _op_done(self, tensor: _Tensor, done: _Open, ev: HorovodEvent) -> None:
        if ev.args is not None and ev.args.dtype:
            tensor.dtype = ev.args.dtype
            tensor.shape = _shape(ev.args.shape)
        self.instances.append(_instance(tensor, done.name, done, ev.ts))

    def close(self) -> int:
        """Instances cut off by the end of the timeline; returns how many activities were open."""
        still_open = 0
        for tensor in self.tensors.values():
            still_open += len(tensor.stack)
            if not tensor.stack:
                continue
            root = tensor.stack[0]
            if root.name.startswith(NEGOTIATE):
                tensor.negotiation = (root.start_us, root.start_us, tensor.ticks)
                op = _Open(root.name[len(NEGOTIATE) :], root.start_us)
                self.instances.append(_instance(tensor, op.name, op, None))
            else:
                self.instances.append(_instance(tensor, root.name, root, None))
            tensor.stack.clear()
        return still_open


def _shape(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return [int(v) for v in value] if isinstance(value, list) else None


def _instance(tensor: _Tensor, op_name: str, op: _Open, end_us: float | None) -> Instance:
    negotiation, tensor.negotiation = tensor.negotiation, None
    index = tensor.instances
    tensor.instances += 1
    return Instance(
        tensor=tensor.name,
        op=normalize_op(op_name),
        index=index,
        op_start_us=op.start_us,
        end_us=end_us,
        negotiation=negotiation[:2] if negotiation else None,
        ticks=tuple(sorted(negotiation[2].items())) if negotiation else (),
        transfer_us=op.transfer_us,
        dtype=tensor.dtype,
        shape=tuple(tensor.shape) if tensor.shape is not None else None,
    )


def _rows(timeline: Timeline, world: int, symbols: SymbolTable) -> RowBuilder:
    rows = RowBuilder(0, symbols)
    base_ns = round(timeline.start_us * 1000)
    order = sorted(timeline.instances, key=lambda i: i.start_us)
    for seq, inst in enumerate(order):
        nbytes, count, dtype = message(inst, world)
        start_ns = base_ns + round(inst.start_us * 1000)
        dur = -1 if inst.end_us is None else round((inst.end_us - inst.start_us) * 1000)
        rows.add(
            inst.index,
            Kind.COLLECTIVE,
            inst.op,
            start_ns,
            dur,
            nbytes=nbytes,
            count=count,
            dtype=dtype,
            group="0",
            seq=seq,
            tag=tag_of(inst.tensor, inst.op),
        )
    return rows


def read_timeline(path: Path, problems: list[str]) -> Timeline:
    timeline = Timeline()
    with open_bytes(path) as src:
        stream = ArrayStream(src, HorovodEvent, None)
        for batch in stream:
            for ev in batch:
                timeline.feed(ev)
        end = stream.end
        assert end is not None
        timeline.truncated = not end.complete or src.error is not None
        for reason in (end.reason, src.error):
            if reason:
                problems.append(f"{path.name}: {reason}")
    still_open = timeline.close()
    if still_open:
        problems.append(
            f"{path.name}: {still_open} activities were still open when the timeline stops "
            "(the job was killed?); their ops are kept as never completed"
        )
    if timeline.stray_ends:
        problems.append(f"{path.name}: {timeline.stray_ends} activity ends without a start")
    return timeline


def ingest_horovod(path: Path, problems: list[str]) -> IngestResult:
    """Read one Horovod timeline (already detected as such)."""
    timeline = read_timeline(Path(path), problems)
    world = timeline.max_rank + 1
    if world <= 0:
        problems.append("no rank marks in the timeline: world size unknown, taken as 1")
        world = 1
    unsized = sum(1 for i in timeline.instances if i.shape is None and i.op != "barrier")
    if unsized:
        problems.append(
            f"{unsized} op instances without dtype/shape in the timeline (Horovod writes them "
            "on allreduce ends only in some versions): counted with 0 bytes"
        )
    symbols = SymbolTable()
    rows = _rows(timeline, world, symbols)
    table = rows.table()
    start = float(table.start_ns.min()) / 1e9 if len(table) else timeline.start_us / 1e6
    meta = RankMeta(
        rank=0,
        world_size=world,
        probe=False,
        start_time=start,
        status="interrupted" if timeline.truncated else "completed",
    )
    run = make_run(
        Path(path),
        HOROVOD,
        [table],
        symbols,
        world_size=world,
        ranks={0: meta},
        problems=problems,
        extra={"view": "coordinator (rank 0) timeline of all ranks"},
    )
    return IngestResult(
        format=HOROVOD,
        run=run,
        problems=problems,
        files=(str(path),),
        horovod_phases=phase_table(timeline.phases),
        horovod_waits=wait_table(timeline.instances, world),
    )
