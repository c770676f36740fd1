"""The live channel sealed per job (launch/channel/store.py), on real TCPStores on 127.0.0.1:
a writer with the store but not the key (garbage, forgeries) makes a rank unknown, never
stands for it, and the hang watch stops no rank while one is unknown; a second job of the same
user, under the same key, has its states, sessions and job id refused; a state of an earlier
job in the same store is refused; a relay not given the job's id learns it there."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from intruder import Intruder, payload
from torch.distributed import TCPStore
from waiting import wait_for

from scalescope.events.files import HANG_FILE, HANG_TEXT, live_state_path, stack_path
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.launch.channel.relay import Relay
from scalescope.launch.channel.seals import new_job_id
from scalescope.launch.channel.store import JOB_KEY, PREFIX, Channel
from scalescope.launch.options.groups import HangOptions
from scalescope.launch.watch import sources
from scalescope.launch.watch.hang import HangWatch
from scalescope.launch.watch.sources import StoreSource
from scalescope.report.views.hang import render_hang

KEY = b"k" * 32
RANK = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR2, file=open(sys.argv[1], "a"), all_threads=True)
print("ready", flush=True)
time.sleep(120)
"""
"""A rank as the probe sets it up: its stacks to its stack file on SIGUSR2."""


def server() -> Any:
    return TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                    timeout=timedelta(seconds=10))  # fmt: skip


def owner(store: Any, job: bytes | None = None) -> Channel:
    """The end that owns the job's channel, its id published."""
    channel = Channel(store, key=KEY, job=job or new_job_id(), warn=None)
    channel.put_job()
    return channel


def write_state(path: Path, steps: int, ago_s: float = 0.0) -> bytes:
    """A state file whose last step ended ``ago_s`` ago; its bytes."""
    now = time.perf_counter_ns()
    writer = LiveStateWriter(path, 100, time.time_ns() - now)
    writer.step(steps, now - int(ago_s * 1e9))
    writer.close()
    return path.read_bytes()


def state_bytes(folder: Path, steps: int, ago_s: float = 0.0) -> bytes:
    return write_state(folder / f"state-{steps}-{ago_s}", steps, ago_s)


def test_garbage_and_forgeries_make_a_rank_unknown_not_its_last_state(tmp_path: Path) -> None:
    store = server()
    relay = owner(store)
    reader = Channel(store, key=KEY, warn=None)  # top: learns the job's id from the store
    relay.publish(0, state_bytes(tmp_path, 7))
    assert reader.states([0])[0].steps_done == 7
    store.set(f"{PREFIX}live/0", b"garbage")
    assert reader.states([0]) == {} and reader.unknown == {0}, "not frozen at 7 steps"
    Intruder(store).publish(0, state_bytes(tmp_path, 99))
    assert reader.states([0]) == {} and reader.unknown == {0}
    relay.publish(0, state_bytes(tmp_path, 8))
    assert reader.states([0])[0].steps_done == 8 and reader.unknown == set()


def test_a_second_job_under_the_same_key_is_refused(tmp_path: Path) -> None:
    ours, theirs = server(), server()
    mine, other = owner(ours), owner(theirs)
    reader = Channel(ours, key=KEY, warn=None)
    other.publish(0, state_bytes(tmp_path, 5))
    ours.set(f"{PREFIX}live/0", theirs.get(f"{PREFIX}live/0"))
    assert reader.states([0]) == {} and reader.unknown == {0}
    other.register(b"their-session")
    mine.register(b"our-session")
    ours.set(f"{PREFIX}relay/0", theirs.get(f"{PREFIX}relay/0"))
    assert mine.sessions() == [], "no request is sealed to the other job's relay"
    ours.set(JOB_KEY, theirs.get(JOB_KEY))
    assert mine.keep_job() and payload(ours, JOB_KEY) == mine.job, "the owner puts its id back"
    mine.publish(0, state_bytes(tmp_path, 6))
    assert reader.states([0])[0].steps_done == 6


def test_a_state_of_an_earlier_job_in_the_same_store_is_refused(tmp_path: Path) -> None:
    store = server()
    earlier = owner(store)
    earlier.publish(0, state_bytes(tmp_path, 40))
    old = store.get(f"{PREFIX}live/0")
    now = owner(store)
    reader = Channel(store, key=KEY, job=now.job, warn=None)
    assert reader.states([0]) == {} and reader.unknown == {0}
    now.publish(0, state_bytes(tmp_path, 1, ago_s=30.0))
    assert reader.states([0])[0].steps_done == 1
    store.set(f"{PREFIX}live/0", old)  # fresher than ours, sealed with the same key
    assert reader.states([0]) == {} and reader.unknown == {0}


def test_a_relay_not_given_the_jobs_id_learns_it_from_the_store(tmp_path: Path) -> None:
    store = server()
    path = live_state_path(tmp_path, 1)
    path.parent.mkdir(parents=True)
    write_state(path, 3)
    relay = Relay("127.0.0.1", store.port, tmp_path, lambda: {1: 1}, 2, key=KEY)
    relay.start()
    try:
        time.sleep(0.6)
        assert relay.index == -1 and not store.check([f"{PREFIX}live/1"]), "waits for the id"
        watcher = owner(store)
        states = wait_for(lambda: watcher.states([1]) or None, "rank 1's state", seconds=15.0)
        assert states[1].steps_done == 3 and relay.job == watcher.job
        assert watcher.sessions() == [(relay.index, relay.session)]
    finally:
        relay.done.set()
        relay.join(timeout=5)


@pytest.fixture
def rank(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """Rank 0, stalled for a minute, whose relay owns the job's channel."""
    path = stack_path(tmp_path, 0)
    path.parent.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", RANK, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    write_state(live_state_path(tmp_path, 0), 9, ago_s=60.0)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("garbage", [True, False], ids=["rank 1 unknown", "rank 1 absent"])
def test_the_hang_watch_stops_no_rank_while_one_is_unknown(
    tmp_path: Path, rank: subprocess.Popen, garbage: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "ANSWER_WAIT_S", 0.5)  # the rank answers no flush: no need to wait
    store, job = server(), new_job_id()
    relay = Relay("127.0.0.1", store.port, tmp_path, lambda: {0: rank.pid}, 2, key=KEY, job=job)
    relay.start()
    channel = Channel(store, key=KEY, job=job, warn=None)
    wait_for(lambda: channel.states([0]) or None, "rank 0's state", seconds=15.0)
    if garbage:
        store.set(f"{PREFIX}live/1", b"garbage")
    options = HangOptions(after_s=1.0, action="kill", slowdown_pct=0.0, render=render_hang)
    watch = HangWatch(tmp_path, 2, options, StoreSource(channel, 2))
    watch.start()
    try:
        wait_for(lambda: watch.report, "the hang's report", seconds=30.0)
        if garbage:
            time.sleep(1.0)  # a kill would have reached the relay's next poll
            assert not watch.killed and rank.poll() is None, "a rank was stopped"
        else:
            wait_for(lambda: rank.poll() is not None, "the rank stopped", seconds=15.0)
    finally:
        watch.done.set()
        relay.done.set()
        relay.join(timeout=5)
    report = json.loads((tmp_path / HANG_FILE).read_text())
    assert (report["action"], report["unknown"]) == (("withheld", [1]) if garbage else ("kill", []))
    text = (tmp_path / HANG_TEXT).read_text()
    said = [
        "rank(s) 1 unknown: their live state in the job's store did not open with this job's seal",
        "the ranks were not stopped (--hang-action kill): some rank is unknown",
    ]
    assert [line in text for line in said] == [garbage, garbage], text
    assert ("the ranks were stopped (--hang-action kill)" in text) is not garbage, text
