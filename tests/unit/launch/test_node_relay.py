"""launch/run/node_relay.py: under srun and mpirun the task of local rank 0 relays its node's
ranks, found by the token in their environment; a sibling task takes over when the relaying
task's lock drops; the relay waits for its siblings' ends."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scalescope.events.files import live_state_path
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.run import RankMeta, rank_meta_path, write_json_atomic
from scalescope.launch.run.node_relay import (
    NODE_ENV,
    NodeRelay,
    claim,
    lock_path,
    sibling_ranks,
    take,
    wait_for_siblings,
)


def sleeper(env: dict[str, str] | None = None) -> subprocess.Popen:
    code = "import time; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **(env or {})})


def live_state(run_dir: Path, rank: int, pid: int) -> None:
    LiveStateWriter(live_state_path(run_dir, rank), pid=pid, wall_minus_perf_ns=0).close()


class FakeRelay:
    """What NodeRelay asks of a relay: started, its ranks, ended."""

    def __init__(self, ranks) -> None:
        self.ranks, self.started, self.finished, self.closed = ranks, False, False, False
        self.alive = True

    def start(self) -> None:
        self.started = True

    def is_alive(self) -> bool:
        return self.alive

    def pids(self) -> dict[int, int]:
        return self.ranks()

    def finish(self) -> None:
        self.finished = True


def test_the_relay_finds_its_node_by_the_token_in_each_ranks_environment(tmp_path) -> None:
    token = secrets.token_hex(8)
    mine, other = sleeper({NODE_ENV: token}), sleeper({NODE_ENV: "another node"})
    try:
        live_state(tmp_path, 0, mine.pid)
        live_state(tmp_path, 1, other.pid)
        live_state(tmp_path, 2, 2**22 + 12345)  # a pid of another node's, none here
        deadline = time.monotonic() + 10
        while not sibling_ranks(tmp_path, token):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert sibling_ranks(tmp_path, token) == {0: mine.pid}
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()
    assert sibling_ranks(tmp_path, token) == {}, "a rank gone is no longer relayed"


def test_the_lock_is_taken_only_once_its_holder_let_it_go() -> None:
    path = lock_path(secrets.token_hex(8))
    assert take(path) is None, "nothing claimed yet"
    fd = claim(path)
    assert fd is not None and path.exists()
    assert take(path) is None, "the relaying task lives"
    os.close(fd)  # as its death would
    taken = take(path)
    assert taken is not None
    os.close(taken)
    path.unlink()


def test_a_sibling_relays_the_node_once_the_relaying_task_is_gone(tmp_path, capsys) -> None:
    token = secrets.token_hex(8)
    made: list[FakeRelay] = []

    def make(ranks) -> FakeRelay:
        made.append(FakeRelay(ranks))
        return made[-1]

    first = NodeRelay(tmp_path, token, 2, make)
    first.start(local_rank=0)
    second = NodeRelay(tmp_path, token, 2, make)
    second.start(local_rank=1)
    time.sleep(1.5)
    assert len(made) == 1 and made[0].started, "one relay while local rank 0's task lives"
    os.close(first._fd)  # local rank 0's task killed: the kernel drops its lock
    deadline = time.monotonic() + 5
    while len(made) < 2:
        assert time.monotonic() < deadline, "no sibling took over"
        time.sleep(0.05)
    assert "this task relays them now" in capsys.readouterr().err
    made[1].alive = False
    assert second.end() is made[1] and made[1].finished


@pytest.mark.parametrize("status", ["completed", "running"])
def test_the_relay_waits_for_a_siblings_end(tmp_path, status) -> None:
    sibling = sleeper()
    relay = FakeRelay(lambda: {1: sibling.pid})
    ended = {}
    waiter = threading.Thread(
        target=lambda: ended.setdefault("all", wait_for_siblings(relay, tmp_path, 20.0))
    )
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive(), "the sibling runs on"
    write_json_atomic(rank_meta_path(tmp_path, 1), RankMeta(rank=1, status=status))
    if status == "running":  # killed before it could write its end: its task's grace
        sibling.kill()
    waiter.join(timeout=10)
    assert ended == {"all": True}
    sibling.kill()
    sibling.wait()


def test_the_tasks_own_rank_is_relayed_where_no_environment_can_be_read(tmp_path) -> None:
    node = NodeRelay(tmp_path, secrets.token_hex(8), 2, FakeRelay, own={5: 4321})
    assert node.node_ranks() == {5: 4321}
