"""Tell a trace's format from its first bytes (gzip-aware), never from its file name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scalescope.ingest.jsonstream import open_bytes
from scalescope.ingest.result import HOROVOD, KINETO, IngestError

SNIFF_BYTES = 64 << 10
"""Enough for Kineto's header: ``distributedInfo`` of a 300-rank job is ~20 KB."""
UNKNOWN = "unknown"
SUPPORTED = (
    "supported: torch.profiler/Kineto Chrome-trace JSON (.json or .json.gz; one file, or a "
    "directory of per-rank files) and Horovod timeline JSON (HOROVOD_TIMELINE)"
)

_KINETO_MARKS = (
    b'"schemaVersion"',
    b'"distributedInfo"',
    b'"deviceProperties"',
    b'"baseTimeNanoseconds"',
    b'"cpu_op"',
    b'"user_annotation"',
    b'"ProfilerStep#',
    b'"record_shapes"',
)
_HOROVOD_MARKS = (
    b'"start_time_since_epoch_in_micros"',
    b'"NEGOTIATE_',
    b'"HorovodAllreduce',
    b'"HorovodBroadcast',
)
_HOROVOD_EVENT = re.compile(rb'^\s*\[\s*\{\s*"(name|ph|pid)"')


@dataclass(frozen=True)
class Sniffed:
    path: Path
    format: str
    """kineto, horovod or unknown."""
    why: str
    """For unknown: what the file starts with instead."""


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes:
    """The first ``size`` bytes of the (decompressed) content, or what there is of them."""
    try:
        with open_bytes(path) as src:
            return src.read(size)
    except OSError:
        return b""


def _describe(head: bytes) -> str:
    text = head.lstrip()[:40]
    if not text:
        return "it is empty"
    if b"\x00" in text or not text.isascii():
        return "it is binary, not JSON"
    shown = text.decode("ascii", "replace").replace("\n", " ")
    return f"it starts with {shown!r}"


def sniff_bytes(head: bytes) -> tuple[str, str]:
    """(format, why) for the first bytes of a document."""
    text = head.lstrip()
    if text.startswith(b"{") and b'"traceEvents"' in text:
        if any(mark in text for mark in _KINETO_MARKS):
            return KINETO, ""
        return UNKNOWN, "a Chrome trace, but not one torch.profiler wrote"
    if text.startswith(b"{") and any(mark in text for mark in _KINETO_MARKS[:4]):
        return KINETO, ""
    if text.startswith(b"[") and (
        any(mark in text for mark in _HOROVOD_MARKS) or _HOROVOD_EVENT.match(text)
    ):
        if any(mark in text for mark in _HOROVOD_MARKS):
            return HOROVOD, ""
        return UNKNOWN, "a JSON array of events, but no Horovod activity in its first 64 KB"
    return UNKNOWN, _describe(head)


def sniff(path: Path) -> Sniffed:
    fmt, why = sniff_bytes(read_head(path))
    return Sniffed(Path(path), fmt, why)


def detect(path: Path) -> str:
    """The format of a file: ``kineto`` or ``horovod``; raise IngestError for anything else."""
    found = sniff(path)
    if found.format == UNKNOWN:
        raise IngestError(f"{path} is not a trace scalescope can read ({found.why}); {SUPPORTED}")
    return found.format


def trace_candidates(root: Path) -> list[Path]:
    """Regular files under a directory, sorted; hidden files and folders are left out."""
    files = [
        p
        for p in Path(root).rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    return sorted(files)
