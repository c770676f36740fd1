"""Entry point of every rank: ``python -m scalescope.probe.bootstrap --run-dir D [-m] TARGET ...``.

Installs the probe, runs the user's script or module as ``__main__`` (no code change),
and whatever happens (normal end, exception, SIGTERM) flushes the events and records the
rank's status in ``ranks/rank-N.json``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

import torch

from scalescope.events.run import RankMeta, rank_meta_path, write_json_atomic
from scalescope.probe.install import Probe

ERROR_LINES = 12


class Interrupted(SystemExit):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scalescope.probe.bootstrap")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument("--flush-every", type=int, default=20)
    parser.add_argument("-m", dest="module", action="store_true")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def rank_meta_from_env(probe: bool) -> RankMeta:
    now_wall, now_perf = time.time_ns(), time.perf_counter_ns()
    return RankMeta(
        rank=int(os.environ.get("RANK", "0")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        hostname=socket.gethostname(),
        pid=os.getpid(),
        num_threads=torch.get_num_threads(),
        probe=probe,
        wall_minus_perf_ns=now_wall - now_perf,
        start_time=now_wall / 1e9,
    )


def run_target(args: argparse.Namespace) -> None:
    sys.argv = [args.target, *args.args]
    if args.module:
        runpy.run_module(args.target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, str(Path(args.target).resolve().parent))
        runpy.run_path(args.target, run_name="__main__")


def _tail(text: str, lines: int = ERROR_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    meta = rank_meta_from_env(probe=not args.no_probe)
    os.environ["SCALESCOPE_RUN_DIR"] = str(args.run_dir)
    write_json_atomic(rank_meta_path(args.run_dir, meta.rank), meta)
    probe = None if args.no_probe else Probe(args.run_dir, meta.rank, args.flush_every).install()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    status, code, error = "completed", 0, None
    try:
        run_target(args)
    except Interrupted as exc:
        status, code = "interrupted", exc.code
        error = f"stopped by {signal.Signals(exc.signum).name}"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        status = "completed" if code == 0 else "failed"
        error = None if code == 0 else f"SystemExit({exc.code!r})"
    except BaseException:
        status, code, error = "failed", 1, _tail(traceback.format_exc())
        traceback.print_exc()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        _finish(args.run_dir, meta, probe, status, code, error)
    return code


def _finish(
    run_dir: Path, meta: RankMeta, probe: Probe | None, status: str, code: int, error: str | None
) -> None:
    if probe is not None:
        probe.close()
        meta.steps = probe.steps
        meta.probe_errors = list(probe.errors)
    meta.status, meta.exit_code, meta.error = status, code, error
    meta.end_time = time.time()
    write_json_atomic(rank_meta_path(run_dir, meta.rank), meta)


if __name__ == "__main__":
    sys.exit(main())
