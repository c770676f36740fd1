"""torch.profiler (Kineto) traces -> a Run: ranks, mixed runs, missing ranks, then rows.

Rank of a file: ``distributedInfo.rank``, else ``rank<N>``/``rank-<N>``/``rank_<N>`` in the
file name, else an error (a lone file without either is taken as rank 0, with a problem).
Files of one run overlap in time (their ranks ran the same profiled steps) or come from
the same process (one file per profiling cycle); files that share neither, or whose
``distributedInfo.world_size`` differs, are from another run. The run with the most ranks
is kept (the latest on a tie) and the others are named in ``problems``.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from pathlib import Path

from scalescope.events import RankMeta, SymbolTable
from scalescope.ingest.kineto_gpu import GpuActivity, gpu_activity
from scalescope.ingest.kineto_rank import rank_rows
from scalescope.ingest.kineto_scan import FileScan, scan_file
from scalescope.ingest.result import KINETO, IngestError, IngestResult
from scalescope.ingest.rows import RowBuilder, make_run

SAME_RUN_GAP_NS = 1_000_000_000
"""Windows of ranks of one run overlap; this much gap is allowed for clock offsets."""
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def _rank_from_name(path: Path) -> int | None:
    found = _RANK_IN_NAME.search(path.name)
    return int(found.group(1)) if found else None


def assign_ranks(scans: list[FileScan], problems: list[str]) -> dict[int, int]:
    """index of scan -> rank; raise when several files have no rank anywhere."""
    ranks: dict[int, int] = {}
    unknown = []
    for i, scan in enumerate(scans):
        rank = scan.dist.get("rank")
        rank = rank if isinstance(rank, int) else _rank_from_name(scan.path)
        if rank is None:
            unknown.append(i)
        else:
            ranks[i] = rank
    if unknown and len(scans) == 1:
        problems.append(
            f"{scans[0].path.name}: no distributedInfo and no rank in the file name; "
            "taken as rank 0 of 1"
        )
        ranks[0] = 0
    elif unknown:
        names = ", ".join(scans[i].path.name for i in unknown)
        raise IngestError(
            f"cannot tell the rank of {names}: the trace has no distributedInfo (torch writes "
            "it when torch.distributed is initialised) and the file name has no rank "
            "(name files like rank0.json, rank-1.json.gz)"
        )
    return ranks


def _window(scan: FileScan) -> tuple[int, int]:
    return scan.base_ns + round(scan.first_us * 1000), scan.base_ns + round(scan.last_us * 1000)


def _world(scan: FileScan) -> int | None:
    world = scan.dist.get("world_size")
    return world if isinstance(world, int) else None


def _same_run(a: FileScan, b: FileScan, rank_a: int, rank_b: int) -> bool:
    wa, wb = _world(a), _world(b)
    if wa is not None and wb is not None and wa != wb:
        return False
    if rank_a == rank_b and a.pids & b.pids:
        return True
    (sa, ea), (sb, eb) = _window(a), _window(b)
    return sa <= eb + SAME_RUN_GAP_NS and sb <= ea + SAME_RUN_GAP_NS


def group_runs(scans: list[FileScan], ranks: dict[int, int]) -> list[list[int]]:
    """Connected groups of files that belong to one run (union-find)."""
    parent = list(range(len(scans)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(scans)):
        for j in range(i + 1, len(scans)):
            if _same_run(scans[i], scans[j], ranks[i], ranks[j]):
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(scans)):
        groups[find(i)].append(i)
    return list(groups.values())


def _describe(scans: list[FileScan], group: list[int], ranks: dict[int, int]) -> str:
    worlds = sorted({w for i in group if (w := _world(scans[i])) is not None})
    world = "/".join(map(str, worlds)) or "?"
    start = min(_window(scans[i])[0] for i in group) / 1e9
    rank_list = sorted({ranks[i] for i in group})
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start))
    return f"rank(s) {_ranges(rank_list)} of world size {world}, trace starting {when} UTC"


def pick_run(scans: list[FileScan], ranks: dict[int, int], problems: list[str]) -> list[int]:
    groups = group_runs(scans, ranks)
    if len(groups) == 1:
        return groups[0]
    groups.sort(key=lambda g: (len({ranks[i] for i in g}), max(_window(scans[i])[0] for i in g)))
    kept = groups[-1]
    for group in groups[:-1]:
        names = ", ".join(scans[i].path.name for i in group)
        problems.append(
            f"mixed runs: left out {names} ({_describe(scans, group, ranks)}): another run than "
            f"the one analysed ({_describe(scans, kept, ranks)})"
        )
    return kept


def one_process(rank: int, scans: list[FileScan], problems: list[str]) -> list[FileScan]:
    """Files of one rank from several processes (copies of two jobs that ran at the same
    time): keep the process with the most events, name the others."""
    by_pid: dict[int, list[FileScan]] = defaultdict(list)
    for scan in scans:
        by_pid[min(scan.pids, default=0)].append(scan)
    if len(by_pid) == 1:
        return scans
    pid, best = max(by_pid.items(), key=lambda kv: sum(s.complete_events for s in kv[1]))
    others = [s.path.name for p, group in by_pid.items() if p != pid for s in group]
    problems.append(
        f"rank {rank}: traces from {len(by_pid)} processes; kept pid {pid}, "
        f"left out {', '.join(others)}"
    )
    return best


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def _rank_meta(rank: int, world: int, scans: list[FileScan], steps: int) -> RankMeta:
    starts = [_window(s)[0] for s in scans]
    ends = [_window(s)[1] for s in scans]
    host = next((str(s.meta["host_name"]) for s in scans if s.meta.get("host_name")), "")
    pid = min((p for s in scans for p in s.pids), default=0)
    truncated = any(s.problem for s in scans)
    return RankMeta(
        rank=rank,
        world_size=world,
        hostname=host,
        pid=pid,
        probe=False,
        start_time=min(starts) / 1e9,
        end_time=max(ends) / 1e9,
        status="interrupted" if truncated else "completed",
        steps=steps,
    )


def _usable(scans: list[FileScan], problems: list[str]) -> list[FileScan]:
    out = []
    for scan in scans:
        if scan.problem:
            problems.append(f"{scan.path.name}: {scan.problem}")
        if scan.complete_events == 0:
            problems.append(f"{scan.path.name}: empty trace (no complete events); left out")
        else:
            out.append(scan)
    return out


def ingest_kineto(root: Path, files: list[Path], problems: list[str]) -> IngestResult:
    """Read Kineto trace files (already detected as such) into one run."""
    scans = _usable([scan_file(f) for f in files], problems)
    if not scans:
        raise IngestError(f"{root}: no trace events to analyse ({'; '.join(problems)})")
    ranks = assign_ranks(scans, problems)
    kept = pick_run(scans, ranks, problems)
    by_rank: dict[int, list[FileScan]] = defaultdict(list)
    for i in kept:
        by_rank[ranks[i]].append(scans[i])
    for rank, files_of_rank in by_rank.items():
        by_rank[rank] = one_process(rank, files_of_rank, problems)
    worlds = [w for i in kept if (w := _world(scans[i])) is not None]
    world = max(worlds) if worlds else max(by_rank) + 1
    missing = sorted(set(range(world)) - set(by_rank))
    if missing:
        problems.append(
            f"traces of {len(by_rank)} of {world} ranks: rank(s) {_ranges(missing)} missing; "
            "analysing the ranks present"
        )
    return _build(root, by_rank, world, problems)


def _steps_window_us(parts: list[tuple[FileScan, float]]) -> tuple[float, float] | None:
    """First profiled step's start to the last one's end, each file moved by its offset."""
    spans = [(span.start_us + o, span.end_us + o) for s, o in parts for _, span in s.steps]
    if not spans:
        return None
    return min(a for a, _ in spans), max(b for _, b in spans)


def rank_gpu_activity(rank: int, scans: list[FileScan]) -> GpuActivity | None:
    """Times stay in the first file's microseconds (offsets between files' bases only):
    Unix microseconds as float64 would round each interval to a quarter microsecond."""
    base = scans[0].base_ns
    parts = [(s, (s.base_ns - base) / 1000) for s in scans]
    return gpu_activity(rank, [(s.gpu, o) for s, o in parts], _steps_window_us(parts))


def _build(
    root: Path, by_rank: dict[int, list[FileScan]], world: int, problems: list[str]
) -> IngestResult:
    symbols = SymbolTable()
    tables, metas, files = [], {}, []
    gpu = []
    for rank in sorted(by_rank):
        scans = sorted(by_rank[rank], key=lambda s: s.first_us + s.base_ns / 1000)
        rows = RowBuilder(rank, symbols)
        summary = rank_rows(rows, scans, world)
        if summary.unsized:
            problems.append(
                f"rank {rank}: {summary.unsized} collectives without a recorded message size "
                "(profile with record_shapes=True); counted with 0 bytes"
            )
        tables.append(rows.table())
        metas[rank] = _rank_meta(rank, world, scans, summary.steps)
        files.extend(str(s.path) for s in scans)
        activity = rank_gpu_activity(rank, scans)
        if activity is not None:
            gpu.append(activity)
    first = by_rank[min(by_rank)][0]
    extra = {"backend": first.dist.get("backend", ""), "files": len(files)}
    run = make_run(
        root,
        KINETO,
        tables,
        symbols,
        world_size=world,
        ranks=metas,
        problems=problems,
        extra=extra,
    )
    return IngestResult(
        format=KINETO, run=run, problems=problems, files=tuple(files), gpu=tuple(gpu)
    )
