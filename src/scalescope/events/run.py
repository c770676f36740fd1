"""The run directory: run.json, one meta file and one event stream per rank."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from scalescope.events.files import NODES_DIR, RUN_FILE, events_path, rank_meta_path
from scalescope.events.kept_windows import read_kept_windows
from scalescope.events.memory import release_memory
from scalescope.events.reader import StreamRead, read_event_stream
from scalescope.events.ring_rows import recover
from scalescope.events.schema import ARROW_SCHEMA
from scalescope.events.table import EventTable, SymbolTable

RUN_SCHEMA = "scalescope.run/1"


class ClockSync(msgspec.Struct, kw_only=True):
    """One clock-offset measurement against rank 0 (see probe/clock.py)."""

    when: str
    offset_ns: int
    """Add to this rank's event times to put them on rank 0's clock."""
    uncertainty_ns: int
    rounds: int = 0


class GroupMeta(msgspec.Struct, kw_only=True):
    """A process group the rank issued collectives on, by the label its rows carry."""

    ranks: list[int] = msgspec.field(default_factory=list)
    """Its members (global ranks), as torch gave them."""
    dim: str = ""
    """The name of the ``DeviceMesh`` dimension that made it (dp, tp, pp, ...), else ""."""
    backend: str = ""
    """``gloo``, ``nccl``, ... as torch named it (``cpu:gloo,cuda:nccl`` for both); "" in
    runs recorded before, or where torch could not say."""


class BlockMeta(msgspec.Struct, kw_only=True):
    """One block of a pipeline stage (a direct child of its submodule, or a child of a
    container of blocks there: ``blocks.3``): its time per step."""

    name: str
    forward_ns: list[int] = msgspec.field(default_factory=list)
    """Entry ``s``: the block's forward time in step ``s``, summed over its microbatches."""
    backward_ns: list[int] = msgspec.field(default_factory=list)
    """The same for its backward (from the gradient of its output to that of its input)."""


class PipelineMeta(msgspec.Struct, kw_only=True):
    """What ``torch.distributed.pipelining`` said of this rank's part of a pipeline."""

    stage: int
    """Its (first) stage index."""
    stages: int
    """Stages of the pipeline."""
    stages_held: list[int] = msgspec.field(default_factory=list)
    """Every stage index this rank holds (more than one in an interleaved schedule)."""
    schedule: str = ""
    """The schedule's class name (``ScheduleGPipe``, ``Schedule1F1B``, ...)."""
    microbatches: int = 0
    blocks: list[BlockMeta] = msgspec.field(default_factory=list)


class RankMeta(msgspec.Struct, kw_only=True):
    """What one rank writes about itself (``ranks/rank-N.json``)."""

    rank: int
    local_rank: int = 0
    world_size: int = 1
    hostname: str = ""
    pid: int = 0
    num_threads: int = 0
    probe: bool = True
    wall_minus_perf_ns: int = 0
    """time.time_ns() - time.perf_counter_ns() at start: puts event times on the wall clock."""
    start_time: float = 0.0
    end_time: float | None = None
    status: str = "running"
    """running, completed, failed (the script raised) or interrupted (a signal)."""
    exit_code: int | None = None
    error: str | None = None
    """Last lines of the traceback or signal that ended the rank."""
    steps: int = 0
    probe_errors: list[str] = msgspec.field(default_factory=list)
    cpus: list[int] = msgspec.field(default_factory=list)
    """CPUs the rank was allowed to run on (read back from the OS)."""
    numa_node: int | None = None
    bound: bool = False
    """True when scalescope set the rank's affinity and OpenMP variables."""
    thread_env: dict[str, str] = msgspec.field(default_factory=dict)
    """OpenMP/MKL variables as the rank saw them at start."""
    clock: list[ClockSync] = msgspec.field(default_factory=list)
    """Offsets of this rank's clock to rank 0's, measured at start and end."""
    cpu_s: float | None = None
    """User + system CPU time of the rank's process (all its threads) at its end, seconds."""
    involuntary_switches: int | None = None
    """Times the OS took a cpu from the rank's threads to run something else (ru_nivcsw)."""
    runqueue_wait_s: float | None = None
    """Seconds the rank's threads were runnable but waited for a cpu (run-queue wait,
    /proc schedstat summed over the threads alive at the end), from ``start_time`` to its
    end; None where unreadable (not Linux) and in older runs."""
    optimizer_param_bytes: int | None = None
    """Bytes of the parameters the rank's (first stepping) optimizer updates; None when no
    optimizer stepped."""
    layer_shares: dict[str, float] | None = None
    """% of the timed model's parameters per layer kind (convolution, attention, recurrent,
    linear, embedding, normalization, other; kinds without parameters left out); None when
    no model was timed or its layers could not be told (probe/model_layers.py)."""
    groups: dict[str, GroupMeta] = msgspec.field(default_factory=dict)
    """The process groups it issued collectives on (label -> members, mesh dimension)."""
    zero_stage: int | None = None
    """The ZeRO stage of its DeepSpeed engine (0-3); None without one."""
    pipeline: PipelineMeta | None = None
    """Its pipeline stage, read from ``torch.distributed.pipelining``; None elsewhere and in
    older files."""


class RunMeta(msgspec.Struct, kw_only=True):
    """What the launcher writes about the whole run (``run.json``)."""

    schema: str = RUN_SCHEMA
    run_id: str
    command: list[str]
    script: str
    script_args: list[str] = msgspec.field(default_factory=list)
    workload: str = "script"
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    world_size: int = 1
    nproc_per_node: int = 1
    nnodes: int = 1
    launcher: str = "local"
    """local (scalescope's elastic launch on one node), elastic (several nodes), or the
    external launcher each rank was started by: torchrun, slurm, openmpi, mpich, ..."""
    placements: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The binding plan of node 0's local ranks (cpus, NUMA node, threads, variables)."""
    warmup_steps: int = 1
    probe: bool = True
    record: str | None = None
    """The ranks' ``--record`` level, full or summary; None in files written before it (full,
    unless the command says ``--record summary``)."""
    hostnames: list[str] = msgspec.field(default_factory=list)
    software: dict[str, Any] = msgspec.field(default_factory=dict)
    hardware: dict[str, Any] = msgspec.field(default_factory=dict)
    threads: dict[str, Any] = msgspec.field(default_factory=dict)
    start_time: float = 0.0
    end_time: float | None = None
    status: str = "running"
    """running, completed, failed or interrupted."""
    ranks: dict[str, RankMeta] = msgspec.field(default_factory=dict)
    """Final per-rank status, keyed by rank as a string."""


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # the old file stays whole
        raise
    return path


def write_json_atomic(path: Path, obj: Any) -> Path:
    """``obj`` as indented JSON, written as ``write_bytes_atomic`` does."""
    return write_bytes_atomic(path, msgspec.json.format(msgspec.json.encode(obj), indent=2))


def read_rank_meta(run_dir: Path, rank: int) -> RankMeta | None:
    path = rank_meta_path(run_dir, rank)
    try:
        return msgspec.json.decode(path.read_bytes(), type=RankMeta)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


class RunDirError(ValueError):
    """The directory is not a scalescope run (no readable run.json)."""


@dataclass
class Run:
    """A loaded run: its meta, the event table of all ranks, and what was missing."""

    path: Path
    meta: RunMeta
    events: EventTable
    ranks: dict[int, RankMeta] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    kept_steps: tuple[int, ...] = ()
    """Steps recorded as summaries whose full rows the flight recorders kept (a slowdown's,
    a flush request's ``events/window-*``: events/kept_windows.py), replayed as windows."""


def load_meta(run_dir: Path) -> RunMeta:
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise RunDirError(f"{run_dir} is not a scalescope run directory (no {RUN_FILE})")
    try:
        return msgspec.json.decode(path.read_bytes(), type=RunMeta)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RunDirError(f"{path} is not a valid run file: {exc}") from exc


def merge_node_files(run_dir: Path, meta: RunMeta) -> None:
    """Add the final rank status that launchers of other nodes wrote (``nodes/node-K.json``)."""
    for path in sorted((Path(run_dir) / NODES_DIR).glob("node-*.json")):
        try:
            node = msgspec.json.decode(path.read_bytes(), type=RunMeta)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        for rank, rank_meta in node.ranks.items():
            meta.ranks.setdefault(rank, rank_meta)
        if node.status in ("failed", "interrupted") and meta.status == "completed":
            meta.status = node.status


def status_of_ranks(ranks: Iterable[RankMeta]) -> str:
    """A run's status by its ranks' word: for a run the launcher saw end well whose ranks say
    otherwise (a rank stopped by a SIGTERM that its handler turned into a clean exit), and
    for a run whose launcher died before it could record the end."""
    statuses = {r.status for r in ranks}
    if statuses & {"failed", "killed"}:
        return "failed"
    return "interrupted" if "interrupted" in statuses else "completed"


def _ranks_ended(meta: RunMeta, ranks: dict[int, RankMeta]) -> bool:
    """Every rank of the world recorded its end in its own file."""
    return len(ranks) == meta.world_size and all(r.status != "running" for r in ranks.values())


def _unrecorded_end(ranks_status: str | None) -> str:
    """The problem of a run.json that still says running; ``ranks_status`` is the run's
    status by its ranks when every rank recorded its end, else None."""
    if ranks_status is None:
        return (
            f"{RUN_FILE} says running: the run is still going, or its launcher ended without "
            "recording the end (killed, or its disk full); rank statuses are the ranks' own"
        )
    return (
        f"{RUN_FILE} says running, but every rank recorded its end: the launcher ended without "
        f"recording it (killed, or its disk full); the run's status ({ranks_status}) is the ranks'"
    )


CONVERT_EVERY = 64
"""Rank files read, then converted to the event table together (and the memory that freed
returned to the system): one conversion of 64 ranks costs a fraction of 64 small ones."""


def _read_ahead(paths: dict[int, Path]) -> Iterator[tuple[int, StreamRead | None]]:
    """Each rank's stream in rank order (None: no file), read by a second thread up to
    two conversions ahead: Arrow parses and validates without the GIL, so reading overlaps
    converting, and no more than that window of files is held at once."""

    def read(path: Path) -> StreamRead | None:
        return read_event_stream(path) if path.is_file() else None

    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead: deque[tuple[int, Future]] = deque()
        for rank, path in paths.items():
            ahead.append((rank, pool.submit(read, path)))
            if len(ahead) > 2 * CONVERT_EVERY:
                done_rank, future = ahead.popleft()
                yield done_rank, future.result()
        while ahead:
            done_rank, future = ahead.popleft()
            yield done_rank, future.result()


def _converted(pending: list[pa.Table], symbols: SymbolTable) -> EventTable:
    """The ranks' Arrow tables as one event table; empties ``pending``."""
    table = EventTable.from_arrow(pa.concat_tables(pending), symbols)
    pending.clear()
    release_memory()
    return table


def load_run(run_dir: Path) -> Run:
    """Load everything that was recorded; say in ``problems`` what is missing or cut short.

    A rank's status is the launcher's merge of its file with what the launcher saw (a rank
    killed before it could write its end) once the launcher recorded the end, else the
    rank's own file."""
    run_dir = Path(run_dir)
    meta = load_meta(run_dir)
    merge_node_files(run_dir, meta)
    symbols = SymbolTable()
    tables: list[EventTable] = []
    pending: list[pa.Table] = []
    ranks: dict[int, RankMeta] = {}
    problems: list[str] = []
    launcher_ended = meta.status != "running"
    paths: dict[int, Path] = {}
    for rank in range(meta.world_size):
        merged = meta.ranks.get(str(rank))
        rank_meta = (merged if launcher_ended else None) or read_rank_meta(run_dir, rank) or merged
        if rank_meta is not None:
            ranks[rank] = rank_meta
        if meta.probe:
            paths[rank] = events_path(run_dir, rank)
    kept = read_kept_windows(run_dir, list(paths))
    kept_steps: set[int] | None = None
    for rank, read in _read_ahead(paths):
        name = paths[rank].name
        if read is None:
            problems.append(f"rank {rank}: event file {name} is missing")
        elif read.problem:
            problems.append(f"rank {rank}: {name} {read.problem}; kept {read.batches} batches")
        table = read.table if read is not None else ARROW_SCHEMA.empty_table()
        if rank not in ranks or ranks[rank].status != "completed":  # rows since its last flush
            recovered = recover(run_dir, rank, table)
            problems += [recovered.note] if recovered.note else []
            if recovered.table.num_rows:
                table = pa.concat_tables([table, recovered.table])
        added = kept.added(rank, table) if kept is not None else None
        if added is not None:
            table = pa.concat_tables([table, added])
            steps = set(np.unique(added["step"].to_numpy()).tolist())
            kept_steps = steps if kept_steps is None else kept_steps & steps
        if table.num_rows == 0 and read is None:
            continue
        pending.append(table)
        if len(pending) == CONVERT_EVERY:
            tables.append(_converted(pending, symbols))
    if pending:
        tables.append(_converted(pending, symbols))
    if meta.status == "running":
        ended = _ranks_ended(meta, ranks)
        ranks_status = status_of_ranks(ranks.values()) if ended else None
        problems.insert(0, _unrecorded_end(ranks_status))
        meta.status = ranks_status or meta.status
    events = EventTable.concat_by_kind(tables) if tables else EventTable.empty(symbols)
    release_memory()
    return Run(path=run_dir, meta=meta, events=events, ranks=ranks, problems=problems,
               kept_steps=tuple(sorted(kept_steps or ())))  # fmt: skip
