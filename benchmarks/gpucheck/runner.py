"""Runs scalescope's commands as a user would, each with its log file and a time limit,
inside one overall budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucheck.results import CheckResult, failed_to_run

CLI = [sys.executable, "-m", "scalescope.cli"]


class RunFailed(RuntimeError):
    """A command exited non-zero, ran out of time, or wrote no result: one line, log named."""


class Runner:
    def __init__(self, work: Path, budget_s: float, env: dict[str, str] | None = None) -> None:
        self.work = work
        self.env = dict(env or {})
        """Set for every command, under each command's own."""
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + budget_s
        self._count = 0

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def no_time(self, needs_s: float) -> str | None:
        """Why a step that takes about ``needs_s`` is skipped, or None."""
        left = self.left_s()
        if left < needs_s:
            return f"time budget: {left:.0f} s left, this check needs about {needs_s:.0f} s"
        return None

    def dir(self, name: str) -> Path:
        """A fresh directory for one run (the path must not exist yet for run dirs)."""
        self._count += 1
        return self.work / f"{self._count:02d}-{name}"

    def run(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Path:
        """Run ``argv``; its stdout and stderr go to logs/NAME.log, which is returned."""
        log = self.logs / f"{name}.log"
        limit = max(self.left_s(), 1.0)
        full_env = os.environ | self.env | (env or {})
        with log.open("w") as out:
            out.write("$ " + " ".join(argv) + "\n")
            out.flush()
            try:
                proc = subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, timeout=limit
                )
            except subprocess.TimeoutExpired:
                raise RunFailed(f"{name}: out of time after {limit:.0f} s (log {log})") from None
        if proc.returncode != 0:
            raise RunFailed(f"{name}: exit {proc.returncode} ({last_line(log)}; log {log})")
        return log

    def cli(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Path:
        return self.run(name, [*CLI, *args], env)


def last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else "no output"


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunFailed(f"{path}: no result ({exc})") from None


def attempt(check: str, run: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """The results of ``run``; when it raises, one FAIL line with the reason, so that the
    other checks (and the other parts of this one) still run."""
    try:
        return run()
    except RunFailed as exc:
        return [failed_to_run(check, str(exc))]
    except Exception as exc:  # a bug in a check must not hide the other checks
        traceback.print_exc()
        return [failed_to_run(check, f"{type(exc).__name__}: {exc}")]
