"""The CPU clocks read beside a phase's boundaries: what a spin and a sleep each cost."""

from __future__ import annotations

import threading
import time

from scalescope.events.schema import Kind
from scalescope.probe.cpu_clock import KEPT, CpuClock
from scalescope.probe.recorder import Recorder

MS = 1_000_000


def spin(seconds: float) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass


def test_a_spin_is_cpu_time_and_a_sleep_is_not() -> None:
    clock = CpuClock()
    a = clock.now()
    spin(0.03)
    b = clock.now()
    time.sleep(0.03)
    c = clock.now()
    spun, slept = clock.spent(a, b), clock.spent(b, c)
    assert spun is not None and slept is not None
    assert spun[1] >= 10 * MS  # a busy machine may run the loop on a shared core
    assert spun[0] >= spun[1] - MS  # the process's time holds the thread's
    assert slept[1] < 5 * MS


def test_the_training_threads_time_is_read_from_another_thread() -> None:
    """A hook on autograd's device thread marks a boundary: the time is still that of the
    thread that read the first one (the training loop's)."""
    clock = CpuClock()
    clock.spent(clock.now(), clock.now())  # the loop's first boundary binds its thread
    marks: list[int] = []
    started, spun = threading.Event(), threading.Event()

    def hook() -> None:
        marks.append(clock.now())
        started.set()
        spun.wait()
        marks.append(clock.now())

    other = threading.Thread(target=hook)
    other.start()
    started.wait()
    spin(0.03)
    spun.set()
    other.join()
    spent = clock.spent(*marks)
    assert spent is not None and spent[1] >= 10 * MS


def test_unread_boundaries_give_nothing_and_old_readings_go() -> None:
    clock = CpuClock()
    a = clock.now()
    assert clock.spent(a, time.perf_counter_ns()) is None
    assert clock.spent(a - 1, a) is None
    for _ in range(3 * KEPT):
        clock.now()
    assert len(clock.at) <= KEPT


def test_a_phase_gets_its_cpu_row(tmp_path) -> None:
    recorder = Recorder(tmp_path / "rank-0.arrows", 0)
    start = recorder.now()
    spin(0.01)
    end = recorder.now()
    recorder.phase("forward", start, end)
    recorder.phase("backward", end, time.perf_counter_ns())  # its end not read: no CPU row
    kinds = [(row[1], row[2]) for row in recorder.rows]
    assert kinds == [(Kind.PHASE, "forward"), (Kind.CPU, "forward"), (Kind.PHASE, "backward")]
    cpu = recorder.rows[1]
    assert (cpu[3], cpu[4]) == (start, end - start)
    assert 0 < cpu[9] <= cpu[6] + MS  # the thread's CPU time, the process's


def test_a_thousand_gradient_buckets_keep_backwards_start() -> None:
    """Each bucket's hook reads the clocks (the last one splits backward from comm_wait):
    only its latest reading is kept, so a large model's buckets never push out the phase's
    start, and both parts of the split backward get their CPU time."""
    clock = CpuClock()
    start = clock.now()
    for _ in range(1000):
        bucket = clock.now(latest="bucket")
    end = clock.now()
    assert len(clock.at) == 3
    assert clock.spent(start, bucket) is not None and clock.spent(bucket, end) is not None


def test_the_thread_that_trains_is_the_one_timed_not_the_one_that_made_it() -> None:
    """A loop run on a thread of its own (the probe installed on the main thread): its
    first boundary binds that thread's clock, so a spin there is CPU time."""
    clock = CpuClock()
    spent: list = []

    def loop() -> None:
        a = clock.now()
        spin(0.03)
        spent.append(clock.spent(a, clock.now()))

    trainer = threading.Thread(target=loop)
    trainer.start()
    trainer.join()
    assert spent[0] is not None and spent[0][1] >= 10 * MS
