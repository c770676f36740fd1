"""Run-queue wait of this process: ns its threads were runnable but waited for a cpu.

``/proc/PID/task/TID/schedstat`` holds three numbers per thread: ns on a cpu, ns waiting on
a run queue, timeslices run. ``/proc/self/schedstat`` is the main thread's alone, so the
process's wait is the sum over its threads (gloo's and the loader's threads wait too).
Linux only; elsewhere, or without schedstats in the kernel, every reader returns None.
"""

from __future__ import annotations

from pathlib import Path

TASK_DIR = Path("/proc/self/task")


def read_wait_ns(path: Path) -> int | None:
    """The run-queue wait (second field) of one schedstat file; None where unreadable."""
    try:
        fields = path.read_text().split()
        return int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def thread_waits(task_dir: Path = TASK_DIR) -> dict[int, int] | None:
    """ns each live thread of the process waited on a run queue, by thread id; None where
    no thread's schedstat can be read."""
    try:
        tasks = [p for p in task_dir.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    waits = {int(p.name): read_wait_ns(p / "schedstat") for p in tasks}
    known = {tid: ns for tid, ns in waits.items() if ns is not None}
    return known or None


def runqueue_wait_s(since: dict[int, int] | None = None, task_dir: Path = TASK_DIR) -> float | None:
    """Seconds the process's live threads waited on a run queue, since ``since`` (what
    ``thread_waits`` returned earlier: a thread counts from then, or from its start when
    it started later). A thread that ended before is not counted. Never raises."""
    now = thread_waits(task_dir)
    if now is None:
        return None
    before = since or {}
    return sum(max(ns - before.get(tid, 0), 0) for tid, ns in now.items()) / 1e9
