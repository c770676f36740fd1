"""One arm of a multi-host case (cases_netns.py): a network namespace per host on one bridge,
the planted arm's path between two of them throttled by tc first, then one
``scalescope run --nnodes`` a host, each in its namespace under its host name, all writing
the arm's one run directory. Needs root, iproute2, tc (htb, u32) and unshare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import psutil
from cases import Case, record_level, room_options
from cases_netns import host_names

HELPERS = Path(__file__).resolve().parents[2] / "tests" / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))
from netns_hosts import (  # noqa: E402
    bridged_hosts,
    etc_hosts_file,
    netns_unavailable,
    on_host,
    throttle_pair,
)
from ports import free_port  # noqa: E402

PLANTED = Path(__file__).resolve().parent / "planted.py"
TIMEOUT_S = 600
READY_S = 120

NodeCommand = Callable[[int, str, str], tuple[list[str], Path]]
"""A host's command and folder to run it in, from its node rank, node 0's address with a
free port (``ADDR:PORT``) and its own address."""


def unavailable() -> str | None:
    """Why namespaced hosts cannot be made here (not root, no ``ip``/``tc``), or None."""
    return netns_unavailable(("ip", "tc", "unshare"))


def write_arm(case: Case, folder: Path) -> None:
    """The script's arguments in ``folder/arm.json``; the throttle in neither."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "arm.json").write_text(json.dumps({"script": str(case.script),
                                                 "args": list(case.args)}))  # fmt: skip


def run_arm(case: Case, folder: Path, planted: bool) -> Path:
    """The arm in ``folder`` (its run directory ``folder/run``)."""
    write_arm(case, folder)
    run_hosts(case, folder, planted, lambda node, endpoint, address: (
        node_cmd(case, node, endpoint, address), folder))  # fmt: skip
    return folder


def run_hosts(
    case: Case,
    folder: Path,
    planted: bool,
    command: NodeCommand,
    first_ready: Callable[[], bool] | None = None,
) -> None:
    """Each host's ``command`` in its namespace under its host name, the planted arm's path
    throttled first; the others once ``first_ready()`` says node 0 serves them (up to
    ``READY_S``); raises with a failed host's last words."""
    spec = case.netns
    names = host_names(spec.hosts)
    with bridged_hosts(spec.hosts) as hosts:
        if planted:
            why = throttle_pair(hosts[spec.pair[0]], hosts[spec.pair[1]], spec.rate)
            if why:
                raise RuntimeError(why)
        etc_hosts = etc_hosts_file(folder, hosts, names)
        endpoint = f"{hosts[0][2]}:{free_port()}"
        procs = []
        for node, (host, name) in enumerate(zip(hosts, names, strict=True)):
            argv, cwd = command(node, endpoint, host[2])
            with open(folder / f"host{node}.err", "w") as log:
                procs.append(subprocess.Popen(on_host(host, name, etc_hosts, argv), cwd=cwd,
                                              stdout=subprocess.DEVNULL, stderr=log,
                                              env=os.environ.copy()))  # fmt: skip
            if node == 0 and first_ready is not None:
                _wait(procs[0], first_ready)
        failed = _ended(procs)
    if failed is not None:
        last = (folder / f"host{failed}.err").read_text()[-1500:]
        raise RuntimeError(f"{case.name}: host{failed} failed: {last}")


def _ended(procs: list[subprocess.Popen]) -> int | None:
    """Waits for every host (up to ``TIMEOUT_S``); the first that failed (the others then
    stopped), or None."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
        if failed is not None or all(c == 0 for c in codes):
            break
        time.sleep(0.2)
    else:
        failed = next(i for i, p in enumerate(procs) if p.poll() is None)
    for p in procs:
        if p.poll() is None:
            _kill_tree(p.pid)
            p.wait()
    return failed


def _kill_tree(pid: int) -> None:
    """A host's command and everything it started (TraceML's aggregator runs in a session of
    its own: killing the command alone leaves it running)."""
    try:
        top = psutil.Process(pid)
        family = [*top.children(recursive=True), top]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        with suppress(psutil.NoSuchProcess):
            proc.kill()


def _wait(first: subprocess.Popen, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + READY_S
    while not ready() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


def node_cmd(case: Case, node: int, endpoint: str, address: str) -> list[str]:
    return [sys.executable, "-m", "scalescope.cli", "run", "--nnodes", str(case.netns.hosts),
            "--node-rank", str(node), "-n", "1", "--rdzv-endpoint", endpoint,
            "--local-addr", address, "--run-dir", "run", "--warmup-steps",
            str(case.warmup_steps), "--record", record_level(), *room_options(1, node),
            "--no-report", str(PLANTED), "arm.json"]  # fmt: skip
