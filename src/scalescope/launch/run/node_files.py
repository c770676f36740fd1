"""The node's files written beside its ranks while they run (events/node_live.py), by the
node's relay: scalescope's own launcher on each node, and under srun/mpirun the task that
relays its node (launch/run/node_relay.py).

A thread polls the node's rank files every ``POLL_S`` and writes each window as all of the
node's ranks pass it; at the end, the rest of what was recorded. A failure to write (disk
full) is said once and ends the node's files, never the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from scalescope.events.node_live import NodeFollower
from scalescope.events.node_stats import WINDOW_STEPS

POLL_S = 1.0
WINDOW_ENV = "SCALESCOPE_NODE_WINDOW_STEPS"
"""The steps of a node file's window, where not the default (tests use short windows)."""


def window_steps() -> int:
    """WINDOW_ENV's value, or WINDOW_STEPS; ValueError in one line for a bad value."""
    raw = os.environ.get(WINDOW_ENV, "")
    if not raw:
        return WINDOW_STEPS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{WINDOW_ENV}={raw!r}: expected a whole number of steps >= 1")
    return int(raw)


class NodeFilesThread(threading.Thread):
    """Writes node ``node``'s files from the ranks ``ranks()`` names (asked at each poll
    until ``expected`` are known: ranks start late)."""

    def __init__(
        self,
        run_dir: Path,
        node: int,
        ranks: Callable[[], list[int]],
        expected: int,
        world_size: int,
        steps: int | None = None,
    ) -> None:
        super().__init__(daemon=True, name="scalescope-node-files")
        self.ranks = ranks
        self.follower = NodeFollower(Path(run_dir), node, steps or window_steps(), world_size,
                                     expected)  # fmt: skip
        self.done = threading.Event()
        self.failed: str | None = None
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            self._step(self.follower.poll)

    def _step(self, work: Callable[[], object]) -> None:
        if self.failed is not None:
            return
        with self._lock:
            if len(self.follower.ranks) < self.follower.expected:
                self.follower.add_ranks(self.ranks())
            try:
                work()
            except (OSError, ValueError) as exc:
                self.failed = str(exc)
                print(f"scalescope: node files stopped: {exc}", file=sys.stderr, flush=True)

    def finish(self, wait_s: float = 10.0) -> None:
        """The node's ranks ended: the last windows and the node's part of the manifest."""
        self.done.set()
        if self.is_alive():
            self.join(timeout=wait_s)
        with contextlib.suppress(Exception):
            self._step(self.follower.finish)


def start_node_files(
    run_dir: Path, node: int, ranks: Callable[[], list[int]], expected: int, world_size: int
) -> NodeFilesThread:
    thread = NodeFilesThread(run_dir, node, ranks, expected, world_size)
    thread.start()
    return thread
