"""Who may act on a job through its store (launch/channel/store.py), on a real TCPStore on
127.0.0.1 with a real relay beside a real process for a rank: a sealed stacks request is
answered and the stacks are gone once read; a kill or stacks request without the key, or a
replayed one, or one for another session or job, changes nothing and is logged; a forged or
replayed live state makes the rank unknown."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from intruder import OTHER_KEY, Intruder
from torch.distributed import TCPStore
from waiting import wait_for

from scalescope.analyze.watch.ring_calls import read_last_calls
from scalescope.commands.common import CommandError
from scalescope.commands.flush import flush
from scalescope.commands.options.reading import FlushCommand
from scalescope.events.files import ring_path, stack_path
from scalescope.events.live_state import read_live_state
from scalescope.events.live_state_writer import LiveStateWriter, open_live_state
from scalescope.events.schema import Kind
from scalescope.launch.channel.relay import Relay
from scalescope.launch.channel.seals import KEY_ENV, job_context, request_name, seal
from scalescope.launch.channel.store import FLUSH, KILL, STACKS, Channel
from scalescope.launch.watch.sources import StoreSource
from scalescope.probe.flight_ring import RingWriter

KEY, OTHER, JOB = b"k" * 32, OTHER_KEY, b"j" * 32
RANK = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR2, file=open(sys.argv[1], "a"), all_threads=True)
print("ready", flush=True)
def waiting_for_a_request():
    time.sleep(120)
waiting_for_a_request()
"""
"""A rank as the probe sets it up: its stacks to its stack file on SIGUSR2."""


@dataclass
class Job:
    server: Any
    relay: Relay
    rank: subprocess.Popen
    run_dir: Path

    def request_key(self, what: str) -> str:
        return f"scalescope/ask/{self.relay.index}/{what}"


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=10))  # fmt: skip
    path = stack_path(tmp_path, 0)
    path.parent.mkdir(parents=True)
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(path)], stdout=subprocess.PIPE)
    assert rank.stdout is not None and rank.stdout.readline() == b"ready\n"
    relay = Relay("127.0.0.1", server.port, tmp_path, lambda: {0: rank.pid}, 1, key=KEY, job=JOB)
    relay.start()
    try:
        wait_for(lambda: relay.index >= 0, "relay registered")
        yield Job(server, relay, rank, tmp_path)
    finally:
        relay.done.set()
        relay.join(timeout=5)
        rank.kill()
        rank.wait()


def log(capsys: pytest.CaptureFixture[str], seen: list[str]) -> str:
    """What the relay said on stderr so far."""
    seen.append(capsys.readouterr().err)
    return "".join(seen)


def test_a_sealed_stacks_request_is_answered_and_the_stacks_removed_once_read(job: Job) -> None:
    watcher = Channel(job.server, key=KEY, job=JOB)
    count = watcher.ask(STACKS)
    text = wait_for(lambda: watcher.stack(0, count), "stacks")
    assert "waiting_for_a_request" in text
    assert not job.server.check([f"scalescope/stack/0/{count}"]), "removed once read"


def test_the_relay_sends_each_ranks_last_calls_from_its_ring_beside_its_stacks(job: Job):
    """The watcher names a hung rank of another node from that rank's flight recorder: the
    node's relay reads the ring there and sends its last calls, sealed, with the stacks."""
    ring = RingWriter(ring_path(job.run_dir, 0), 0, 64, job.rank.pid, 10**9)
    for seq in range(8):
        ring.append([seq // 4, Kind.COLLECTIVE, "all_reduce", 100 * seq, 50, 4096, 1024,
                     "float32", "0", seq, "gradients", -1])  # fmt: skip
    ring.close()
    here = read_last_calls(job.run_dir, 0)
    assert [c.seq for c in here[0]] == [7, 6, 5, 4, 3]
    source = StoreSource(Channel(job.server, key=KEY, job=JOB), 1)
    assert "waiting_for_a_request" in source.stacks()[0]
    assert source.last_calls(0) == here


def test_a_request_without_the_key_changes_nothing_and_is_logged(job: Job, capsys) -> None:
    seen: list[str] = []
    intruder = Intruder(job.server)
    for what in (KILL, STACKS):
        intruder.ask(what)
        line = f"scalescope: ignored a {what} request in the job's store: not sealed"
        wait_for(lambda line=line: line in log(capsys, seen), f"{what} logged")
    job.server.set(job.request_key(KILL), b"99")  # a bare count, as the counters once were
    job.server.add("scalescope/asked", 1)
    wait_for(lambda: log(capsys, seen).count("ignored a kill") == 2, "the bare count logged")
    assert job.rank.poll() is None, "the rank still runs"
    assert stack_path(job.run_dir, 0).stat().st_size == 0, "no stacks were written"
    assert not [k for k in range(1, 4) if job.server.check([f"scalescope/stack/0/{k}"])]


def test_a_replayed_request_and_one_for_another_session_are_ignored(job: Job, capsys) -> None:
    watcher = Channel(job.server, key=KEY, job=JOB)
    first = watcher.ask(STACKS)
    wait_for(lambda: watcher.stack(0, first), "first stacks")
    replay = bytes(job.server.get(job.request_key(STACKS)))
    second = watcher.ask(STACKS)
    wait_for(lambda: watcher.stack(0, second), "second stacks")
    seen: list[str] = []
    job.server.set(job.request_key(STACKS), replay)
    job.server.add("scalescope/asked", 1)
    line = f"ignored a stacks request of count {first} in the job's store: a replay ({second} done)"
    wait_for(lambda: line in log(capsys, seen), "replay logged")
    line = "ignored a kill request in the job's store: not sealed"
    other_session = job_context(JOB, request_name(b"another-session", KILL))
    other_job = job_context(b"another-job", request_name(job.relay.session, KILL))
    for n, context in enumerate((other_session, other_job), start=1):
        job.server.set(job.request_key(KILL), seal(KEY, context, b"%d" % (90 + n)))
        job.server.add("scalescope/asked", 1)
        wait_for(lambda n=n: log(capsys, seen).count(line) == n, f"kill {n} logged")
    assert not job.server.check([f"scalescope/stack/0/{first}"]), "no second answer"
    assert job.rank.poll() is None


def test_only_a_flush_request_sealed_for_the_job_reaches_the_rank(job: Job, capsys) -> None:
    """The relay raises the rank's flush counter (the rank then writes its events and, at
    --record summary, its ring's summarised steps: probe/ring_flush.py) for a sealed request
    alone: one sealed with another key, or for another job, is logged and changes nothing."""
    writer = open_live_state(job.run_dir, 0, job.rank.pid)
    seen: list[str] = []
    try:
        line = "scalescope: ignored a flush request in the job's store: not sealed"
        for n, intruder in enumerate((Intruder(job.server), Intruder(job.server, key=KEY)), 1):
            if intruder.key == KEY:
                intruder.job = b"another-job"
            intruder.ask(FLUSH)
            wait_for(lambda n=n: log(capsys, seen).count(line) == n, f"flush request {n} logged")
        assert read_live_state(job.run_dir, 0).flush_requests == 0
        Channel(job.server, key=KEY, job=JOB).ask(FLUSH)
        wait_for(lambda: read_live_state(job.run_dir, 0).flush_requests == 1, "the flush asked")
    finally:
        writer.close()


def test_flush_connect_asks_through_the_store_and_waits_for_the_answer(
    job: Job, tmp_path_factory, monkeypatch
) -> None:
    """`scalescope flush --connect` with the user's key: the relay raises the rank's flush
    counter, the rank answers (here a thread in its place, as the probe's watch thread
    does), the relay publishes the answer, and the command returns 0; with another key, no
    job's id opens: one line, exit 2."""
    key_file = tmp_path_factory.mktemp("key") / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    monkeypatch.setenv(KEY_ENV, str(key_file))
    owner = Channel(job.server, key=KEY, job=JOB)
    owner.put_job()
    owner.put_world(1)
    writer = open_live_state(job.run_dir, 0, job.rank.pid)
    done = threading.Event()

    def answer() -> None:
        while not done.wait(0.05):
            made, answered = writer.requests()
            if made > answered:
                writer.answered(made)

    rank_thread = threading.Thread(target=answer, daemon=True)
    rank_thread.start()
    address = f"127.0.0.1:{job.server.port}"
    try:
        wait_for(lambda: owner.states([0]) or None, "rank 0's state in the store")
        assert flush(FlushCommand(connect=address, wait_s=10.0)) == 0
        assert read_live_state(job.run_dir, 0).flushes_answered == 1
        key_file.write_bytes(OTHER)
        with pytest.raises(CommandError, match="no job's id in the store at 127.0.0.1:"):
            flush(FlushCommand(connect=address, wait_s=1.0))
    finally:
        done.set()
        rank_thread.join(timeout=2)
        writer.close()


def state_bytes(folder: Path, steps: int, ago_s: float) -> bytes:
    path = folder / f"state-{steps}"
    now = time.perf_counter_ns()
    writer = LiveStateWriter(path, 100, time.time_ns() - now)
    writer.step(steps, now - int(ago_s * 1e9))
    writer.close()
    return path.read_bytes()


def test_a_forged_or_replayed_live_state_makes_the_rank_unknown(tmp_path: Path) -> None:
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=10))  # fmt: skip
    relay, said = Channel(server, key=KEY, job=JOB), []
    reader = Channel(server, key=KEY, job=JOB, warn=said.append)
    old = state_bytes(tmp_path, 3, ago_s=5.0)
    relay.publish(0, old)
    relay.publish(0, state_bytes(tmp_path, 7, ago_s=1.0))
    assert reader.states([0])[0].steps_done == 7 and reader.unknown == set()
    Channel(server, key=OTHER, job=JOB).publish(0, state_bytes(tmp_path, 99, ago_s=0.0))
    assert reader.states([0]) == {} and reader.unknown == {0}
    relay.publish(0, old)  # an older sealed value copied back
    assert reader.states([0]) == {} and reader.unknown == {0}
    relay.publish(0, state_bytes(tmp_path, 8, ago_s=0.0))
    assert reader.states([0])[0].steps_done == 8 and reader.unknown == set()
    assert [s.split(":")[0] for s in said] == [
        "ignored rank 0's live state in the job's store",
        "ignored an older live state of rank 0 in the job's store",
    ]
    newcomer = Channel(server, key=KEY, job=JOB, warn=None)
    Channel(server, key=OTHER, job=JOB).publish(1, state_bytes(tmp_path, 99, ago_s=0.0))
    assert list(newcomer.states([0, 1])) == [0] and newcomer.unknown == {1}
