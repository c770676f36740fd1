"""The slowed-link job of tests/e2e/test_slowdown_link_live.py and of the recorded run
``slowdown_link`` (tests/data/record.py): three namespaced hosts, one rank each running
tests/e2e/scripts/pairs_train.py under ``scalescope run --nnodes 3``, and the path between
host0 and host1 throttled once the ranks are ``THROTTLE_AFTER_S`` into their steps (node 0's
watch has its baseline by then)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from cli_env import cli_env
from netns_hosts import (
    RATE,
    bridged_hosts,
    etc_hosts_file,
    netns_unavailable,
    on_host,
    throttle_pair,
)
from ports import free_port

from scalescope.events.live_state import read_live_state

HOSTS = 3
__all__ = ["RATE", "run_slowed_link"]
STEPS = 700
THROTTLE_AFTER_S = 14.0
SCRIPT = Path(__file__).parents[1] / "e2e" / "scripts" / "pairs_train.py"
ARGS = ["--steps", str(STEPS), "--mbytes", "1"]


def run_slowed_link(folder: Path) -> subprocess.CompletedProcess | str:
    """Node 0's finished launcher (its stderr holds the watch's lines), or why the job cannot
    run here. The run directory is ``folder/run``."""
    reason = netns_unavailable(("ip", "tc", "unshare"))
    if reason:
        return reason
    names = [f"host{i}" for i in range(HOSTS)]
    with bridged_hosts(HOSTS) as hosts:
        etc_hosts = etc_hosts_file(folder, hosts, names)
        endpoint = f"{hosts[0][2]}:{free_port()}"
        procs = []
        for node, (host, name) in enumerate(zip(hosts, names, strict=True)):
            run = [
                sys.executable, "-m", "scalescope.cli", "run", "--nnodes", str(HOSTS),
                "--node-rank", str(node), "-n", "1", "--rdzv-endpoint", endpoint,
                "--local-addr", host[2], "--run-dir", "run", "--no-report", str(SCRIPT), *ARGS,
            ]  # fmt: skip
            out = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
            cmd = on_host(host, name, etc_hosts, run)
            procs.append(subprocess.Popen(cmd, cwd=folder, env=cli_env(), text=True, **out))
        reason = _throttle_once_running(folder / "run", hosts, procs)
        outs = [p.communicate(timeout=300) for p in procs]
        if reason:
            return reason
    codes = [p.returncode for p in procs]
    if codes != [0] * HOSTS:
        raise RuntimeError(f"the job failed {codes}: {outs[0][1][-2000:]}")
    return subprocess.CompletedProcess(procs[0].args, 0, *outs[0])


def _throttle_once_running(run_dir: Path, hosts, procs) -> str | None:
    first: float | None = None
    while all(p.poll() is None for p in procs):
        state = read_live_state(run_dir, 0)
        if first is None and state is not None and state.steps_done > 0:
            first = time.monotonic()
        if first is not None and time.monotonic() - first >= THROTTLE_AFTER_S:
            return throttle_pair(hosts[0], hosts[1])
        time.sleep(0.2)
    return "the job ended before the link was throttled"
