"""Traces from other tools -> scalescope's event table (one module per format).

``ingest(path)`` detects the format from the content (gzip or not, whatever the file is
called), streams the JSON and returns an ``IngestResult`` whose ``run`` the analyses take
like a recorded run. See docs/ingest.md for the formats and the field mapping.
"""

from __future__ import annotations

from pathlib import Path

from scalescope.ingest.detect import SUPPORTED, UNKNOWN, detect, sniff, trace_candidates
from scalescope.ingest.horovod import ingest_horovod
from scalescope.ingest.kineto import ingest_kineto
from scalescope.ingest.result import (
    FORMAT_NAMES,
    HOROVOD,
    KINETO,
    HorovodPhase,
    HorovodWait,
    IngestError,
    IngestResult,
)

__all__ = [
    "FORMAT_NAMES",
    "HOROVOD",
    "KINETO",
    "HorovodPhase",
    "HorovodWait",
    "IngestError",
    "IngestResult",
    "detect",
    "ingest",
]


def _from_directory(root: Path) -> IngestResult:
    problems: list[str] = []
    found: dict[str, list[Path]] = {}
    for path in trace_candidates(root):
        sniffed = sniff(path)
        if sniffed.format == UNKNOWN:
            problems.append(f"{path.relative_to(root)}: not a trace ({sniffed.why}); left out")
        else:
            found.setdefault(sniffed.format, []).append(path)
    if not found:
        raise IngestError(f"{root}: no trace files found; {SUPPORTED}")
    if KINETO in found:
        for other in found.get(HOROVOD, []):
            problems.append(
                f"{other.relative_to(root)}: a Horovod timeline beside Kineto traces; "
                "left out (analyse it on its own)"
            )
        return ingest_kineto(root, found[KINETO], problems)
    timelines = found[HOROVOD]
    if len(timelines) > 1:
        names = ", ".join(str(p.relative_to(root)) for p in timelines)
        raise IngestError(
            f"{root}: {len(timelines)} Horovod timelines ({names}); a timeline holds a whole "
            "run: give one file"
        )
    return ingest_horovod(timelines[0], problems)


def ingest(path: Path | str) -> IngestResult:
    """Read a trace file or a directory of per-rank trace files into a Run.

    Raises IngestError (a ValueError) with a one-line reason when nothing can be analysed:
    a path that does not exist, a file that is not a trace, no events at all, files whose
    rank cannot be told. Anything less (a cut-off file, a missing rank, files of another
    run) is analysed as far as it goes and listed in ``problems``.
    """
    path = Path(path)
    try:
        return _ingest(path)
    except RecursionError as exc:
        raise IngestError(f"{path}: JSON nested too deeply to read ({exc})") from None


def _ingest(path: Path) -> IngestResult:
    if path.is_dir():
        return _from_directory(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file or directory")
    fmt = detect(path)
    if fmt == KINETO:
        return ingest_kineto(path, [path], [])
    return ingest_horovod(path, [])
