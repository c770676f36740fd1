"""`top RUN_DIR` of a run whose live states travel through the job's store (run.json names
it): the ranks of another node, whose files are not here, come from a real TCPStore; when
the store does not answer, the files alone, and no new try for a while."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from run_builders import step_row, write_run_dir
from torch.distributed import TCPStore

from scalescope.events import RunMeta
from scalescope.events.files import live_state_path
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.launch.channel.seals import load_key, new_job_id
from scalescope.launch.channel.store import STORE_OPTION, Channel
from scalescope.live.run_view import LiveTop


def state_bytes(folder: Path, rank: int, steps: int) -> bytes:
    path = folder / f"s{rank}"
    now = time.perf_counter_ns()
    writer = LiveStateWriter(path, 100 + rank, time.time_ns() - now)
    writer.step(steps, now)
    writer.close()
    return path.read_bytes()


def run_dir_with(tmp_path: Path, store: str) -> tuple[Path, RunMeta]:
    meta = RunMeta(run_id="r", command=["x"], script="x.py", world_size=2, status="running",
                   options={STORE_OPTION: store})  # fmt: skip
    run_dir = write_run_dir(tmp_path / "run", meta, {0: [[step_row(0, 0, 1000, 8)]]})
    live_state_path(run_dir, 0).parent.mkdir(parents=True, exist_ok=True)
    live_state_path(run_dir, 0).write_bytes(state_bytes(tmp_path, 0, 5))
    return run_dir, meta


def test_another_nodes_ranks_come_from_the_store(tmp_path) -> None:
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=10))  # fmt: skip
    owner = Channel(server, key=load_key(), job=new_job_id())
    owner.put_job()
    owner.publish(1, state_bytes(tmp_path, 1, 7))
    run_dir, meta = run_dir_with(tmp_path, f"127.0.0.1:{server.port}")
    states = LiveTop(run_dir).live_states(meta, time.time())
    assert {r: s.steps_done for r, s in states.items()} == {0: 5, 1: 7}


def test_an_unreachable_store_leaves_the_files(tmp_path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir, meta = run_dir_with(tmp_path, f"127.0.0.1:{port}")
    top = LiveTop(run_dir)
    now = time.time()
    assert {r: s.steps_done for r, s in top.live_states(meta, now).items()} == {0: 5}
    started = time.monotonic()
    assert list(top.live_states(meta, now + 1.0)) == [0]
    assert time.monotonic() - started < 0.5, "no new try before STORE_RETRY_S"
