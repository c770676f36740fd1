"""One pass over one Kineto trace file, keeping only the events scalescope uses.

The file is streamed (jsonstream); each event is decoded into a small typed struct that
names only the fields read here (docs/ingest.md has the mapping), so ops, kernels and
flows that are not used cost a decode and a few string tests, and are then dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from scalescope.ingest.jsonstream import (
    ArrayEnd,
    ArrayStream,
    Int64,
    Micros,
    decode_head,
    decode_tail,
)
from scalescope.ingest.jsonstream import open_bytes as _open
from scalescope.ingest.kineto_gpu import MEMCPY, GpuScan, activity_kind


class KinetoArgs(msgspec.Struct):
    """The ``args`` members read; every other member is skipped by the decoder."""

    external_id: Int64 | None = msgspec.field(default=None, name="External id")
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: Int64 | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Int64 | None = msgspec.field(default=None, name="Out msg nelems")
    dtype: str | None = None
    group: str | Int64 | None = msgspec.field(default=None, name="Process Group Name")
    group_size: Int64 | None = msgspec.field(default=None, name="Group size")
    seq: Int64 | None = msgspec.field(default=None, name="Seq")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    nbytes: int | None = msgspec.field(default=None, name="bytes")


class KinetoEvent(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str | None = None
    pid: Int64 | str | None = None
    tid: Int64 | str | None = None
    ts: Micros = 0.0
    """Microseconds, relative to ``baseTimeNanoseconds`` when the file has it."""
    dur: Micros = 0.0
    args: msgspec.Raw = msgspec.Raw()
    """Decoded (as KinetoArgs) only for the few events that are kept: most events' args
    are skipped over, not parsed."""


_ARGS = msgspec.json.Decoder(KinetoArgs)


def _peer(op: str, concrete: msgspec.Raw) -> int:
    """``send(tensors, pg, dst, tag)``, ``recv_(tensors, pg, src, tag)``: the partner's group
    rank as ``Concrete Inputs`` records it ("1"); -1 for any other op or when not recorded."""
    if op.strip("_") not in ("send", "recv"):
        return -1
    inputs = _raw_list(concrete)
    try:
        return int(inputs[2])
    except (IndexError, TypeError, ValueError):
        return -1


def args_of(ev: KinetoEvent) -> KinetoArgs:
    if not ev.args:
        return KinetoArgs()
    try:
        return _ARGS.decode(ev.args)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return KinetoArgs()


Tid = int | str | None


@dataclass(frozen=True, slots=True)
class Span:
    start_us: float
    end_us: float
    tid: Tid


@dataclass(frozen=True, slots=True)
class CommRecord:
    """A ``record_param_comms`` op carrying ``Collective name`` (the issue on the CPU)."""

    span: Span
    op_raw: str
    in_nelems: int | None
    out_nelems: int | None
    dtype: str | None
    group: str
    group_size: int | None
    seq: int | None
    external_id: int | None


@dataclass(frozen=True, slots=True)
class OpRecord:
    """A ``gloo:*``/``nccl:*`` annotation or a ``c10d::*`` op, with its recorded shapes."""

    span: Span
    op_raw: str
    dims: list[Any]
    types: list[Any]
    peer: int = -1
    """A ``c10d::send``'s or ``c10d::recv_``'s group rank of its partner (its third argument
    in ``Concrete Inputs``, ``record_shapes=True``); -1 otherwise."""


USER_PHASES = {
    "forward": "forward",
    "fwd": "forward",
    "backward": "backward",
    "bwd": "backward",
    "optimizer": "optimizer",
    "optim": "optimizer",
    "optimizer_step": "optimizer",
    "data": "data",
    "data_load": "data",
    "dataload": "data",
    "dataloader": "data",
    "data_loading": "data",
    "data loading": "data",
}
"""Inner text of ``## name ##`` user annotations -> phase."""

BUILTIN = {
    "enumerate(DataLoader)#": "data",
    "DistributedDataParallel.forward": "forward",
    "Optimizer.step#": "optimizer",
}
EVAL_FN = "autograd::engine::evaluate_function: "
ACCUMULATE_GRAD = EVAL_FN + "torch::autograd::AccumulateGrad"
REDUCER = "torch.distributed.ddp.reducer::"
STEP = "ProfilerStep#"
_PREFIXES = (STEP, "## ", "gloo:", "nccl:", "c10d::", *BUILTIN, EVAL_FN, REDUCER)
_SKIPPED_COLLECTIVES = {"wait", "coalesced", "init", ""}


@dataclass
class FileScan:
    """What one file holds that scalescope uses; times in the file's own microseconds."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    end: ArrayEnd | None = None
    problem: str | None = None
    pids: set[int] = field(default_factory=set)
    steps: list[tuple[int, Span]] = field(default_factory=list)
    user_phases: dict[str, list[Span]] = field(default_factory=dict)
    builtin_phases: dict[str, list[Span]] = field(default_factory=dict)
    backward_nodes: list[Span] = field(default_factory=list)
    accumulate_grad: list[Span] = field(default_factory=list)
    reducer: list[Span] = field(default_factory=list)
    comms: list[CommRecord] = field(default_factory=list)
    backend_ops: list[OpRecord] = field(default_factory=list)
    c10d_ops: list[OpRecord] = field(default_factory=list)
    kernel_end_us: dict[int, float] = field(default_factory=dict)
    gpu: GpuScan = field(default_factory=GpuScan)
    """Kernels, memory copies and sets (ingest.kineto_gpu)."""
    complete_events: int = 0
    """Complete (``ph`` X) events other than the profiler's own span: 0 = an empty trace."""
    first_us: float = float("inf")
    last_us: float = float("-inf")

    @property
    def base_ns(self) -> int:
        """Add to ``ts * 1000`` for Unix nanoseconds (0 for traces with absolute times)."""
        return int(self.meta.get("baseTimeNanoseconds") or 0)

    @property
    def dist(self) -> dict[str, Any]:
        info = self.meta.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    @property
    def events(self) -> int:
        return self.end.elements if self.end else 0


def _raw_list(raw: msgspec.Raw) -> list[Any]:
    if not raw:
        return []
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return []
    return value if isinstance(value, list) else []


def _keep(scan: FileScan, ev: KinetoEvent) -> None:
    """File one event that matched a known name or prefix."""
    if ev.cat == "gpu_user_annotation":
        return
    name, span = ev.name, Span(ev.ts, ev.ts + ev.dur, ev.tid)
    if isinstance(ev.pid, int):
        scan.pids.add(ev.pid)
    if name.startswith(STEP):
        number = name[len(STEP) :]
        if number.isdigit():
            scan.steps.append((int(number), span))
    elif name.startswith("## "):
        phase = USER_PHASES.get(name.strip("# ").lower())
        if phase is not None:
            scan.user_phases.setdefault(phase, []).append(span)
    elif name.startswith(EVAL_FN):
        scan.backward_nodes.append(span)
        if name == ACCUMULATE_GRAD:
            scan.accumulate_grad.append(span)
    elif name.startswith(REDUCER):
        scan.reducer.append(span)
    elif name.startswith(("gloo:", "nccl:")):
        args = args_of(ev)
        scan.backend_ops.append(
            OpRecord(span, name, _raw_list(args.input_dims), _raw_list(args.input_type))
        )
    elif name.startswith("c10d::"):
        args = args_of(ev)
        op = name[len("c10d::") :]
        peer = _peer(op, args.concrete)
        scan.c10d_ops.append(OpRecord(span, op, _raw_list(args.input_dims), [], peer))
    else:
        for prefix, phase in BUILTIN.items():
            if name.startswith(prefix):
                scan.builtin_phases.setdefault(phase, []).append(span)


def _keep_comm(scan: FileScan, ev: KinetoEvent) -> None:
    args = args_of(ev)
    if args.collective is None or args.collective in _SKIPPED_COLLECTIVES:
        return
    span = Span(ev.ts, ev.ts + ev.dur, ev.tid)
    scan.comms.append(
        CommRecord(
            span=span,
            op_raw=args.collective,
            in_nelems=args.in_nelems,
            out_nelems=args.out_nelems,
            dtype=args.dtype,
            group="0" if args.group is None else str(args.group),
            group_size=args.group_size,
            seq=args.seq,
            external_id=args.external_id,
        )
    )


def _keep_kernel(scan: FileScan, ev: KinetoEvent) -> None:
    """NCCL kernels: their end is the completion of the collective with their External id."""
    args = args_of(ev)
    if args.external_id is None:
        return
    end = ev.ts + ev.dur
    known = scan.kernel_end_us.get(args.external_id)
    scan.kernel_end_us[args.external_id] = end if known is None else max(known, end)


def _keep_device(scan: FileScan, ev: KinetoEvent, kind: str) -> None:
    nbytes = args_of(ev).nbytes if ev.cat == MEMCPY else None
    scan.gpu.add(kind, ev.ts, ev.dur, nbytes)
    if kind == "nccl_kernel":
        _keep_kernel(scan, ev)


def _scan_batch(scan: FileScan, batch: list[KinetoEvent]) -> None:
    prefixes, complete = _PREFIXES, 0
    lo, hi = scan.first_us, scan.last_us
    for ev in batch:
        if ev.ph != "X" or ev.cat == "Trace":
            continue
        complete += 1
        if ev.ts < lo:
            lo = ev.ts
        if ev.ts + ev.dur > hi:
            hi = ev.ts + ev.dur
        name = ev.name
        if name.startswith(prefixes):
            _keep(scan, ev)
        elif name == "record_param_comms":
            if ev.cat == "cpu_op":
                _keep_comm(scan, ev)
        else:
            kind = activity_kind(ev.cat, name)
            if kind is not None:
                _keep_device(scan, ev, kind)
    scan.complete_events += complete
    scan.first_us, scan.last_us = lo, hi


def scan_file(path: Path) -> FileScan:
    """Stream one trace file; a cut-off or malformed file keeps what came before the cut."""
    scan = FileScan(Path(path))
    with _open(path) as src:
        stream = ArrayStream(src, KinetoEvent, b"traceEvents")
        try:
            for batch in stream:
                _scan_batch(scan, batch)
        except ValueError as exc:  # no traceEvents array at all
            scan.problem = str(exc)
            return scan
        end = stream.end
        assert end is not None
        scan.end = end
        scan.meta = decode_head(end.head) | decode_tail(end.tail)
        reasons = [r for r in (end.reason, src.error) if r]
        if stream.skipped:
            reasons.append(
                f"{stream.skipped} events had fields of unexpected types and were skipped"
            )
        scan.problem = "; ".join(reasons) or None
    return scan
