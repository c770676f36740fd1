"""Helpers for end-to-end tests: run the real CLI in a subprocess, load what it recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_env import cli_env
from netns_hosts import netns_unavailable  # noqa: F401 (tests import it from here)

SCRIPTS = Path(__file__).parent / "scripts"
DDP_TRAIN = SCRIPTS / "ddp_train.py"


def scalescope(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "scalescope.cli", *map(str, args)]
    return subprocess.run(
        cmd, cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout
    )


def run_then_report(
    ranks: int, *run_args: object, cwd: Path, timeout: float = 240, report_timeout: float = 240
) -> tuple[subprocess.CompletedProcess, dict]:
    """``scalescope run -n RANKS --run-dir run --no-report ARGS`` in ``cwd``, then ``report
    run --json``: the run's process and the report's JSON, both having exited 0."""
    run_dir = cwd / "run"
    proc = scalescope(
        "run", "-n", ranks, "--run-dir", run_dir, "--no-report", *run_args, cwd=cwd,
        timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = scalescope(
        "report", run_dir, "--json", cwd / "r.json", cwd=cwd, timeout=report_timeout
    )
    assert report.returncode == 0, report.stderr[-3000:]
    return proc, json.loads((cwd / "r.json").read_text())


def scalescope_in_process(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI run in this process by typer's runner, for inputs refused before any rank
    starts: the same code path as ``scalescope`` without a new interpreter importing torch."""
    from typer.testing import CliRunner

    from scalescope.cli import app

    before = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


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


@pytest.fixture
def cli_in_process(tmp_path: Path):
    """``run_cli`` for inputs refused (or plans printed) before any rank starts: the CLI in
    this process, in ``tmp_path``, without a new interpreter's ~1.5 s of imports."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return scalescope_in_process(*args, cwd=tmp_path)

    return run


@contextmanager
def veth_hosts(subnet: str, prefix: str) -> Iterator[list[tuple[str, str, str]]]:
    """Two namespaces joined by a veth pair: (namespace, device, SUBNET.1 / SUBNET.2)."""
    tag = uuid.uuid4().hex[:6]
    hosts = [(f"{prefix}a{tag}", f"v{prefix}a{tag}", f"{subnet}.1")]
    hosts.append((f"{prefix}b{tag}", f"v{prefix}b{tag}", f"{subnet}.2"))
    cmds = [["ip", "netns", "add", ns] for ns, _, _ in hosts]
    cmds.append(["ip", "link", "add", hosts[0][1], "type", "veth", "peer", "name", hosts[1][1]])
    for ns, dev, addr in hosts:
        cmds += [
            ["ip", "link", "set", dev, "netns", ns],
            ["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev],
            ["ip", "-n", ns, "link", "set", dev, "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ]
    try:
        for cmd in cmds:
            subprocess.run(cmd, check=True, capture_output=True)
        yield hosts
    finally:
        for ns, _, _ in hosts:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
