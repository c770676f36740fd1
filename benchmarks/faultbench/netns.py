"""One arm of a multi-host case (cases_netns.py): a network namespace per host on one bridge,
the planted arm's path between two of them throttled by tc first, then one
``scalescope run --nnodes`` a host, each in its namespace under its host name, all writing
the arm's one run directory. Needs root, iproute2, tc (htb, u32) and unshare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cases import Case, record_level
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


def unavailable() -> str | None:
    """Why namespaced hosts cannot be made here (not root, no ``ip``/``tc``), or None."""
    return netns_unavailable(("ip", "tc", "unshare"))


def run_arm(case: Case, folder: Path, planted: bool) -> Path:
    """The arm in ``folder`` (its run directory ``folder/run``); the script's arguments in
    ``arm.json``, the throttle in neither."""
    spec = case.netns
    folder.mkdir(parents=True)
    (folder / "arm.json").write_text(json.dumps({"script": str(case.script),
                                                 "args": list(case.args)}))  # fmt: skip
    names = host_names(spec.hosts)
    with bridged_hosts(spec.hosts) as hosts:
        if planted:
            why = throttle_pair(hosts[spec.pair[0]], hosts[spec.pair[1]], spec.rate)
            if why:
                raise RuntimeError(why)
        etc_hosts = etc_hosts_file(folder, hosts, names)
        endpoint = f"{hosts[0][2]}:{free_port()}"
        procs = [subprocess.Popen(on_host(host, name, etc_hosts, node_cmd(case, node, endpoint,
                                                                          host[2])),
                                  cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=os.environ.copy())
                 for node, (host, name) in enumerate(zip(hosts, names, strict=True))]  # fmt: skip
        errors = [p.communicate(timeout=TIMEOUT_S)[1] for p in procs]
    failed = [i for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{case.name}: host{failed[0]} failed: {errors[failed[0]][-1500:]}")
    return folder


def node_cmd(case: Case, node: int, endpoint: str, address: str) -> list[str]:
    return [sys.executable, "-m", "scalescope.cli", "run", "--nnodes", str(case.netns.hosts),
            "--node-rank", str(node), "-n", "1", "--rdzv-endpoint", endpoint,
            "--local-addr", address, "--run-dir", "run", "--warmup-steps",
            str(case.warmup_steps), "--record", record_level(),
            "--no-report", str(PLANTED), "arm.json"]  # fmt: skip
