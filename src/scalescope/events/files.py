"""The names of the files scalescope writes: one place, one name for one file.

A run directory holds ``run.json``, a status file and an event stream per rank, and what the
command that made it adds (a workload's record, a benchmark's results, a stored projection).
A study directory (scale, suite, tune) holds its own file beside its runs' directories.
"""

from __future__ import annotations

from pathlib import Path

RUN_FILE = "run.json"
"""The run's metadata (events.run.RunMeta): command, world, status, per-rank exit."""
RANK_DIR = "ranks"
EVENTS_DIR = "events"
NODES_DIR = "nodes"
NODE_EVENTS_DIR = "node_events"
"""Each node's summaries of its ranks' rows, per window of steps (events/node_file.py)."""
NODE_MANIFEST = "nodes.json"
"""In NODE_EVENTS_DIR: the window's length and each node's host and ranks."""
WORKLOAD_FILE = "workload.json"
"""What a built-in workload records of itself (model, batch, options)."""
BENCH_FILE = "bench.json"
"""The built-in workload's own clock: images/s and compute time per step."""
COMM_FILE = "comm.json"
"""`scalescope comm`'s raw results, read back by its views and by `project --comm`."""
PROJECTION_FILE = "projection.json"
"""The last `scalescope project` of a run, drawn in its dashboard."""
SCALE_STUDY_FILE = "scale.json"
"""`scalescope scale`'s study: one run directory per size."""
SUITE_FILE = "suite.json"
"""`scalescope suite`'s result: one run directory per workload and size."""
TUNE_STUDY_FILE = "study.db"
"""`scalescope tune`'s optuna study (SQLite), resumable with --resume."""
HANG_FILE = "hang.json"
"""What the hang watch saw when the run stopped moving (analyze.watch.hang.HangReport)."""
ALERTS_FILE = "alerts.jsonl"
"""The slowdowns the watch saw while the run trained, one per line
(analyze.watch.slowdown_alerts.Alert)."""
WATCHES_FILE = "watches.json"
"""The launcher's watches that stopped on an error, and why (events/watch_stops.py)."""
HANG_TEXT = "hang.txt"
"""The same for people, with every thread's stack of every rank."""
LIVE_DIR = "live"
"""Each rank's live state file and, on request, its stacks."""
LOGS_DIR = "logs"
"""The ranks' stdout and stderr when kept (--live, --label-output, --ranks-output), in torch's
layout below it."""


def rank_meta_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / RANK_DIR / f"rank-{rank:05d}.json"


def events_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / EVENTS_DIR / f"rank-{rank:05d}.arrows"


def node_file_path(run_dir: Path, first_step: int, node: int, table: str) -> Path:
    """A node's file of one window (``table``: ``steps`` or ``colls``), Arrow IPC."""
    window = Path(run_dir) / NODE_EVENTS_DIR / f"w{first_step:06d}"
    return window / f"node-{node:05d}.{table}.arrow"


def meta_file_name(node_rank: int) -> str:
    """Node 0 writes run.json; other nodes sharing the directory write nodes/node-K.json."""
    return RUN_FILE if node_rank == 0 else f"{NODES_DIR}/node-{node_rank:04d}.json"


def live_dir(run_dir: Path) -> Path:
    return Path(run_dir) / LIVE_DIR


def live_state_name(rank: int) -> str:
    return f"rank-{rank:05d}.state"


def live_state_path(run_dir: Path, rank: int) -> Path:
    return live_dir(run_dir) / live_state_name(rank)


def stack_path(run_dir: Path, rank: int) -> Path:
    """Where the rank's Python stacks go when it is sent ``STACK_SIGNAL`` (faulthandler)."""
    return live_dir(run_dir) / f"rank-{rank:05d}.stack"


def ring_name(rank: int) -> str:
    """The rank's flight recorder: its last full rows (events/flight_ring.py)."""
    return f"rank-{rank:05d}.ring"


def ring_path(run_dir: Path, rank: int) -> Path:
    return live_dir(run_dir) / ring_name(rank)


def window_events_path(run_dir: Path, step: int, rank: int) -> Path:
    """A rank's rows of a window its ring kept (a slowdown's baseline and onset), written by
    the launcher in the events schema."""
    return Path(run_dir) / EVENTS_DIR / f"window-{step:06d}-rank-{rank:05d}.arrows"
