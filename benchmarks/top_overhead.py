"""What watching costs a run: images/s of `scalescope bench` with `scalescope top` attached,
divided by images/s without.

Runs A (top attached in a pseudo-terminal, redrawing once a second from the moment run.json
appears until the run ends) and B (nobody watching) interleaved, A B B A ..., on the same
machine in one invocation, and prints the median of each and their ratio. Target: >= 0.99
(within the noise of the B runs, printed beside it).

    .venv/bin/python benchmarks/top_overhead.py --pairs 5
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from probe_overhead import bench_cmd, parse
from results import record


class AttachedTop:
    """`scalescope top RUN_DIR` on a pseudo-terminal, started when the run directory is."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.proc: subprocess.Popen | None = None
        self.frames_bytes = 0
        self.cpu_s = 0.0
        self.attached_s = 0.0
        self.master, slave = pty.openpty()
        self.slave = slave
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._attach, daemon=True)
        self.thread.start()

    def _attach(self) -> None:
        while not (self.run_dir / "run.json").exists():
            if self.stop.wait(0.05):
                return
        env = dict(os.environ, COLUMNS="140", LINES="40", TERM="xterm-256color")
        cmd = [sys.executable, "-m", "scalescope.cli", "top", str(self.run_dir)]
        self.proc = subprocess.Popen(cmd, stdin=self.slave, stdout=self.slave,
                                     stderr=self.slave, env=env)  # fmt: skip
        while self.proc.poll() is None:  # drain the terminal, as a real one would
            try:
                self.frames_bytes += len(os.read(self.master, 65536))
            except OSError:
                break

    def close(self) -> None:
        self.stop.set()
        if self.proc is not None:
            watcher = psutil.Process(self.proc.pid)
            times = watcher.cpu_times()
            self.cpu_s = times.user + times.system
            self.attached_s = time.time() - watcher.create_time()
            os.write(self.master, b"q")
            self.proc.wait(timeout=120)
        self.thread.join(timeout=10)
        os.close(self.master)
        os.close(self.slave)


def images_per_sec(
    args: argparse.Namespace, run_dir: Path, watched: bool
) -> tuple[float, AttachedTop | None]:
    cmd = bench_cmd(args, run_dir)
    top = AttachedTop(run_dir) if watched else None
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5 if watched else 0)  # the last redraws
    finally:
        if top is not None:
            top.close()
    if top is not None and top.frames_bytes == 0:
        raise RuntimeError("top never drew: the A run was not watched")
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"]), top


def main() -> None:
    args = parse(__doc__, steps=60)
    watched: list[float] = []
    alone: list[float] = []
    cpu_shares: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for with_top in order:
                value, top = images_per_sec(args, Path(tmp) / f"{i}-{with_top}", with_top)
                (watched if with_top else alone).append(value)
                label = "nobody watching"
                if top is not None:
                    cpu_shares.append(top.cpu_s / top.attached_s)
                    label = (f"top attached ({top.frames_bytes:,} B drawn, {top.cpu_s:.1f} s "
                             f"CPU in {top.attached_s:.0f} s)")  # fmt: skip
                print(f"pair {i + 1}/{args.pairs}  {value:8.1f} images/s  {label}", flush=True)
    a, b = statistics.median(watched), statistics.median(alone)
    spread = (max(alone) - min(alone)) / b if len(alone) > 1 else 0.0
    print(f"\n{args.model}, {args.nproc} ranks, batch {args.batch_size}/rank, {args.image_size}px")
    print(f"median images/s with top attached: {a:8.1f}")
    print(f"median images/s without:           {b:8.1f}")
    print(f"ratio with/without: {a / b:.4f}  (target >= 0.99; the B runs' own spread "
          f"{100 * spread:.1f} %)")  # fmt: skip
    print(f"top's own CPU: median {100 * statistics.median(cpu_shares):.1f} % of one core "
          "while attached")  # fmt: skip
    record(
        f"images/s with `scalescope top` attached / nobody watching ({args.model}, "
        f"{args.nproc} ranks, {args.image_size} px)", a / b, "ratio", ">= 0.99", a / b >= 0.99,
        f"medians {a:.1f} / {b:.1f} images/s, {args.pairs} pairs of {args.steps} steps; "
        f"unwatched runs spread {100 * spread:.1f} %; top's CPU "
        f"{100 * statistics.median(cpu_shares):.1f} % of a core",
    )  # fmt: skip


if __name__ == "__main__":
    main()
