"""Test helper (not a test module): event rows and run directories written by hand.

Rows and files go through the real EventWriter and run.json writer, so a test loads them
back with ``load_run`` as it would a recorded run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from scalescope.events import EventWriter, Kind, RankMeta, RunMeta
from scalescope.events.run import events_path, rank_meta_path, write_json_atomic

Row = tuple[int, int, str, int, int, int, int, str, str, int, str]
"""(step, kind, name, start_ns, dur_ns, bytes, count, dtype, group, seq, tag)."""


def step_row(step: int, start_ns: int, dur_ns: int, samples: int) -> Row:
    return (step, int(Kind.STEP), "step", start_ns, dur_ns, 0, samples, "", "", -1, "")


def phase_row(step: int, name: str, start_ns: int, dur_ns: int) -> Row:
    return (step, int(Kind.PHASE), name, start_ns, dur_ns, 0, 0, "", "", -1, "")


def cpu_row(
    step: int, name: str, start_ns: int, wall_ns: int, process_ns: int, thread_ns: int
) -> Row:
    """The CPU time over the phase row of the same start (the probe's ``Kind.CPU``)."""
    return (step, int(Kind.CPU), name, start_ns, wall_ns, 0, process_ns, "", "", thread_ns, "")


def coll_row(
    step: int,
    op: str,
    start_ns: int,
    dur_ns: int,
    nbytes: int,
    seq: int,
    tag: str = "gradients",
) -> Row:
    """A float32 collective on group "0"; ``dur_ns`` -1 is one that never completed."""
    count = nbytes // 4
    return (
        step,
        int(Kind.COLLECTIVE),
        op,
        start_ns,
        dur_ns,
        nbytes,
        count,
        "float32",
        "0",
        seq,
        tag,
    )


def mem_row(step: int, name: str, nbytes: int) -> Row:
    return (step, int(Kind.MEMORY), name, 0, 0, nbytes, 0, "", "", -1, "")


def write_run_dir(
    run_dir: Path,
    meta: RunMeta,
    batches_by_rank: Mapping[int, Sequence[list[Row]]],
    rank_files: Mapping[int, RankMeta] | None = None,
) -> Path:
    """Write run.json, the given rank meta files and one event stream per rank.

    Each rank's rows come as record batches, as the probe flushes them.
    """
    write_json_atomic(Path(run_dir) / "run.json", meta)
    for rank, rank_meta in (rank_files or {}).items():
        write_json_atomic(rank_meta_path(run_dir, rank), rank_meta)
    for rank, batches in batches_by_rank.items():
        writer = EventWriter(events_path(run_dir, rank), rank)
        for batch in batches:
            writer.write(batch)
        writer.close()
    return run_dir
