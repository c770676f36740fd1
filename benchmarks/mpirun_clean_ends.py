"""Clean ends under mpirun: N `mpirun -np 2 scalescope run` runs of a small DDP script in a row.

Each run must exit 0, print every rank's line (``rank R of 2: sum 3``, after an all-reduce of
rank + 1) and no C++ trace of torch's store client (``Broken pipe``, ``terminate called``,
``Exception raised from``): the relays of the live states (launch/channel/store.py) must stop
before the store's owner closes the store. Issue 41 saw a trace in 3 runs of 4 and a rank's
line missing in 1 of 5. Prints one line per run and ``N/N clean``. Target: every run clean.

    PYTHONPATH=src .venv/bin/python benchmarks/mpirun_clean_ends.py --runs 20
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from results import record, skipped

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "e2e" / "scripts" / "ddp_train.py"
TRACES = ("Broken pipe", "terminate called", "Exception raised from")
FIGURE = "mpirun -np 2 runs with every rank's line and no C++ trace (share)"


@dataclass(frozen=True)
class RunCheck:
    code: int
    lines: int
    traces: dict[str, int]
    seconds: float

    @property
    def clean(self) -> bool:
        return self.code == 0 and self.lines == 2 and not any(self.traces.values())

    def line(self, number: int) -> str:
        traces = ", ".join(f"{k!r} x{v}" for k, v in self.traces.items() if v) or "none"
        verdict = "clean" if self.clean else "NOT clean"
        return (f"run {number}: {verdict}  rc={self.code} rank lines={self.lines}/2 "
                f"traces={traces} {self.seconds:.1f} s")  # fmt: skip


def one_run(folder: Path, scalescope: Path, env: dict[str, str], timeout_s: float) -> RunCheck:
    cmd = [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", str(scalescope), "run",
        "--run-dir", str(folder / "run"), "--no-report", str(SCRIPT), "--steps", "3",
        "--world-line",
    ]  # fmt: skip
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = 124, _text(exc.stdout), _text(exc.stderr)
    (folder / "stdout.txt").write_text(out)
    (folder / "stderr.txt").write_text(err)
    lines = sum(f"rank {r} of 2: sum 3" in out for r in (0, 1))
    traces = {t: (out + err).count(t) for t in TRACES}
    return RunCheck(code, lines, traces, time.monotonic() - t0)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per run")
    p.add_argument("--keep", type=Path, help="keep each run's output and run directory here")
    args = p.parse_args()
    scalescope = Path(sys.executable).with_name("scalescope")
    if shutil.which("mpirun") is None or not scalescope.is_file():
        skipped(FIGURE, "runs", f"{args.runs}/{args.runs}", "no mpirun or no scalescope script")
        print("skipped: Open MPI's mpirun or the scalescope console script is missing")
        return 0
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env = os.environ | {"PYTHONPATH": path}
    clean = 0
    with tempfile.TemporaryDirectory(prefix="clean-ends-") as tmp:
        for number in range(1, args.runs + 1):
            folder = (args.keep or Path(tmp)) / f"run{number}"
            folder.mkdir(parents=True, exist_ok=True)
            check = one_run(folder, scalescope, env, args.timeout)
            clean += check.clean
            print(check.line(number), flush=True)
    print(f"{clean}/{args.runs} clean")
    record(FIGURE, clean, "runs", f"{args.runs}/{args.runs}", clean == args.runs,
           f"{clean} of {args.runs} runs clean")  # fmt: skip
    return 0 if clean == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
