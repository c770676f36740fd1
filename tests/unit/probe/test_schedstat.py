"""The run-queue wait reader on this very process (/proc/self/task/*/schedstat), and rank
files written before the field existed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from scalescope.events.files import rank_meta_path
from scalescope.events.run import RankMeta, read_rank_meta
from scalescope.probe.schedstat import read_wait_ns, runqueue_wait_s, thread_waits

linux_schedstat = pytest.mark.skipif(
    not Path("/proc/self/schedstat").is_file(), reason="no /proc schedstat (not Linux)"
)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture
def one_cpu():
    """This process on one cpu of its affinity, restored after."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    yield
    os.sched_setaffinity(0, before)


@linux_schedstat
@pytest.mark.live
def test_a_busy_loop_sharing_its_cpu_waits_on_the_run_queue(one_cpu):
    """A busy child on the same single cpu: both are runnable, one waits while the other
    runs, so this process's wait grows."""
    start = thread_waits()
    assert start and os.getpid() in start, "the main thread's schedstat is read"
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # inherits the cpu
    try:
        time.sleep(0.3)  # its interpreter starts
        _busy(0.5)
    finally:
        child.kill()
        child.wait()
    since = runqueue_wait_s(since=start)
    total = runqueue_wait_s()
    assert since is not None and since > 0
    assert total is not None and total >= since


@linux_schedstat
def test_the_main_threads_file_has_the_wait_in_its_second_field():
    """The wait only grows, and may between two reads on a busy machine: bracketed."""
    path = Path("/proc/self/schedstat")
    before = int(path.read_text().split()[1])
    wait = read_wait_ns(path)
    after = int(path.read_text().split()[1])
    assert wait is not None and before <= wait <= after


def test_missing_or_garbled_files_are_none(tmp_path):
    assert read_wait_ns(tmp_path / "nope") is None
    assert thread_waits(tmp_path / "nope") is None
    assert runqueue_wait_s(task_dir=tmp_path / "nope") is None
    (tmp_path / "123").mkdir()
    (tmp_path / "123" / "schedstat").write_text("garbled\n")
    assert thread_waits(tmp_path) is None, "no readable thread"
    (tmp_path / "124").mkdir()
    (tmp_path / "124" / "schedstat").write_text("5000 2500000000 7\n")
    assert thread_waits(tmp_path) == {124: 2_500_000_000}
    assert runqueue_wait_s(task_dir=tmp_path) == pytest.approx(2.5)
    assert runqueue_wait_s({124: 500_000_000}, tmp_path) == pytest.approx(2.0)


def test_a_thread_counts_from_the_start_mark_and_never_below_zero(tmp_path):
    for tid, wait in ((1, 3_000_000_000), (2, 1_000_000_000)):
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "schedstat").write_text(f"0 {wait} 1\n")
    # thread 2 started after the mark; thread 9 ended; thread 1's id was reused (lower now)
    assert runqueue_wait_s({1: 1_000_000_000, 9: 5_000_000_000}, tmp_path) == pytest.approx(3.0)
    assert runqueue_wait_s({1: 4_000_000_000}, tmp_path) == pytest.approx(1.0)


def test_rank_files_written_before_the_field_still_load(tmp_path):
    path = rank_meta_path(tmp_path, 0)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"rank": 0, "cpu_s": 1.5, "involuntary_switches": 12}')
    meta = read_rank_meta(tmp_path, 0)
    assert meta is not None and meta.runqueue_wait_s is None and meta.cpu_s == 1.5
    again = msgspec.json.decode(msgspec.json.encode(RankMeta(rank=1, runqueue_wait_s=0.25)),
                                type=RankMeta)  # fmt: skip
    assert again.runqueue_wait_s == 0.25
