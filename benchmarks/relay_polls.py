"""The job's store's load from one node's relays: a relay per task against one per node.

Under srun and mpirun each task used to run its own relay (launch/channel/relay.py), each
asking the store four times a second; now the task of local rank 0 relays its node's ranks
(launch/run/node_relay.py). This runs both on one node of ``--ranks`` ranks whose live
states change every 0.1 s (a step each), against a real TCPStore on loopback, and counts the
requests the relays send it (every call of the store client's: ``add``, ``set``, ``get``,
``check``), after a second of start. Prints one line; the requests per second drop from
4 x ranks plus the publishes to 4 plus the same publishes.

    PYTHONPATH=src .venv/bin/python benchmarks/relay_polls.py --ranks 8 --seconds 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from torch.distributed import TCPStore

import scalescope.launch.channel.store as store_module
from results import record
from scalescope.events.files import live_state_path
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.launch.channel.relay import Relay
from scalescope.launch.channel.seals import new_job_id

FIGURE = "store requests/s from one node's relays: one per node against one per task"
KEY = b"k" * 32


class Counting:
    """A store client that counts the requests sent through it."""

    count = 0
    polls = 0
    """``add`` requests: the relays' polls of the request counter (and the rare registrations)."""
    lock = threading.Lock()

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            with Counting.lock:
                Counting.count += 1
                Counting.polls += name == "add"
            return method(*args, **kwargs)

        return counted


def stepping(run_dir: Path, ranks: int, done: threading.Event) -> None:
    """Each rank's live state, one step every 0.1 s."""
    writers = [LiveStateWriter(live_state_path(run_dir, r), os.getpid(), 0) for r in range(ranks)]
    step = 0
    while not done.wait(0.1):
        step += 1
        for w in writers:
            w.add_step(100_000_000, 8)
            w.step(step, time.time_ns())
    for w in writers:
        w.close()


def measure(
    port: int, run_dir: Path, ranks: int, per_task: bool, seconds: float
) -> tuple[float, float]:
    """Requests and polls per second the relays send, after their first second."""
    groups = [[r] for r in range(ranks)] if per_task else [list(range(ranks))]
    relays = []
    for i, group in enumerate(groups):
        mine = dict.fromkeys(group, os.getpid())
        job = new_job_id() if i == 0 else b""
        relays.append(Relay("127.0.0.1", port, run_dir, lambda m=mine: m, ranks, key=KEY, job=job))
    for relay in relays:
        relay.start()
    time.sleep(1.0)
    before, polled, t0 = Counting.count, Counting.polls, time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - t0
    rate = (Counting.count - before) / took, (Counting.polls - polled) / took
    for relay in relays:
        relay.done.set()
    for relay in relays:
        relay.join(timeout=5.0)
    return rate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=8, help="ranks on the node")
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    real = store_module.connect
    store_module.connect = lambda addr, port, timeout_s=60.0: Counting(real(addr, port, timeout_s))
    rates = {}
    for per_task in (True, False):
        with tempfile.TemporaryDirectory(prefix="relay-polls-") as tmp:
            done = threading.Event()
            writer = threading.Thread(target=stepping, args=(Path(tmp), args.ranks, done))
            writer.start()
            rates[per_task] = measure(server.port, Path(tmp), args.ranks, per_task, args.seconds)
            done.set()
            writer.join()
    (task_all, task_polls), (node_all, node_polls) = rates[True], rates[False]
    print(
        f"one node of {args.ranks} ranks, a step every 0.1 s: polls of the store "
        f"{task_polls:.0f}/s with a relay per task, {node_polls:.0f}/s with one per node; "
        f"all requests {task_all:.0f}/s against {node_all:.0f}/s"
    )
    record(FIGURE, node_all, "requests/s", f"< {task_all:.0f}", node_all < task_all,
           f"polls {task_polls:.0f}/s -> {node_polls:.0f}/s, {args.ranks} ranks")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
