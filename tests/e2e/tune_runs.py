"""Test helper (not a test module): ``scalescope tune`` runs of tests/e2e/scripts/tune_train.py.

The space has one clearly best point up to an irrelevant knob: ``--sleep-ms`` and
``PAUSE_MS`` add a known sleep to every step, ``--steps`` only changes how long a trial runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS, cli_env

TUNE_TRAIN = SCRIPTS / "tune_train.py"
BASE_MS = 30.0
"""scripts/tune_train.py's own sleep per step."""
SPACE = ["--space", "--sleep-ms=0,30,60", "--space", "PAUSE_MS=0,30", "--space", "--steps=20,24"]
SPACE_SIZE = 12
SCRIPT_ARGS = [str(TUNE_TRAIN), "--sleep-ms=60", "--steps=20"]
COMMON = ["-n", "2", "--warmup-steps", "2", "--trial-seconds", "120", "--no-prune"]
NO_CONFIRM = ["--confirm", "0"]


def tune(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = cli_env() | {"PAUSE_MS": "30"}
    cmd = [sys.executable, "-m", "scalescope.cli", "tune", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def sleep_ms(trial: dict) -> float:
    """What a trial's configuration sleeps per step, ms (where it sets nothing, as the
    baseline: SCRIPT_ARGS' --sleep-ms=60 and tune()'s PAUSE_MS=30)."""
    config = {"--sleep-ms": "60", "PAUSE_MS": "30"} | trial["config"]
    return BASE_MS + float(config["--sleep-ms"]) + float(config["PAUSE_MS"])


def trials_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["trials"]
