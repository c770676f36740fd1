"""Helpers for end-to-end tests: run the real CLI in a subprocess, load what it recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
DDP_TRAIN = SCRIPTS / "ddp_train.py"


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def scalescope(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "scalescope.cli", *map(str, args)]
    return subprocess.run(
        cmd, cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout
    )


def start_scalescope(*args: str, cwd: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "scalescope.cli", *map(str, args)]
    return subprocess.Popen(
        cmd, cwd=cwd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture
def run_cli(tmp_path: Path):
    def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return scalescope(*args, cwd=tmp_path, timeout=timeout)

    return run
