"""Parser of nccl-tests output (``all_reduce_perf`` and friends), to compare with `comm`.

The table columns are found from the header line (``size count type redop [root] time algbw
busbw #wrong|error`` for out-of-place, then the same for in-place), so logs with and without
the ``root`` column parse alike. Lines that are not table rows (``NCCL INFO`` and the like)
are skipped; a row that does not parse is reported in ``problems``, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scalescope.ingest.result import IngestError

OPS_IN_NAMES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")
_OP_NAMES = {"alltoall": "all_to_all"}
_HEADER = re.compile(r"^#\s+size\s+count\s+type\b")
_DEVICE = re.compile(r"^#\s+Rank\s+\d+\s")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")


@dataclass(frozen=True)
class NcclTestsRow:
    nbytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_us: float
    """Out-of-place average time of one call, µs."""
    algbw_gbps: float
    busbw_gbps: float
    inplace_time_us: float | None
    inplace_algbw_gbps: float | None
    inplace_busbw_gbps: float | None


@dataclass(frozen=True)
class NcclTestsLog:
    path: str
    op: str
    world_size: int
    """Ranks listed under ``# Using devices``."""
    rows: tuple[NcclTestsRow, ...]
    avg_busbw_gbps: float | None
    """The log's own ``# Avg bus bandwidth`` line."""
    problems: tuple[str, ...]


def _columns(header: str) -> list[str]:
    return header.lstrip("#").split()


def _row(fields: list[str], columns: list[str]) -> NcclTestsRow:
    """A data row by the header's columns: out-of-place (time, algbw, busbw, wrong), in-place."""
    width = columns.index("time")
    has_root = "root" in columns[:width]
    lead, rest = fields[:width], fields[width:]
    inplace = rest[4:7] if len(rest) >= 8 else None
    return NcclTestsRow(
        nbytes=int(lead[0]),
        count=int(lead[1]),
        dtype=lead[2],
        redop=lead[3],
        root=int(lead[4]) if has_root else -1,
        time_us=float(rest[0]),
        algbw_gbps=float(rest[1]),
        busbw_gbps=float(rest[2]),
        inplace_time_us=float(inplace[0]) if inplace else None,
        inplace_algbw_gbps=float(inplace[1]) if inplace else None,
        inplace_busbw_gbps=float(inplace[2]) if inplace else None,
    )


def op_from_name(path: Path) -> str:
    name = path.name.lower()
    for op in OPS_IN_NAMES:
        if op in name or op.replace("_", "") in name:
            return _OP_NAMES.get(op, op)
    return "all_reduce"


def parse_nccl_tests(path: Path, op: str | None = None) -> NcclTestsLog:
    """The table of an nccl-tests log; ``op`` defaults to the one named in the file name."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    columns: list[str] | None = None
    rows, problems, ranks, avg = [], [], 0, None
    for number, line in enumerate(lines, 1):
        if _HEADER.match(line):
            columns = _columns(line)
        elif _DEVICE.match(line):
            ranks += 1
        elif (match := _AVG.match(line)) is not None:
            avg = float(match.group(1))
        elif columns is not None and line.strip() and line.split()[0].isdigit():
            try:
                rows.append(_row(line.split(), columns))
            except (ValueError, IndexError):
                problems.append(f"line {number}: not a table row: {line.strip()[:80]}")
    if columns is None or not rows:
        raise IngestError(f"{path}: no nccl-tests table (a '# size count type' header and rows)")
    return NcclTestsLog(
        str(path), op or op_from_name(path), ranks, tuple(rows), avg, tuple(problems)
    )
