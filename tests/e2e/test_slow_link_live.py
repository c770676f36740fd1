"""A real slow link: three "hosts" (network namespaces, each with its own host name, on one
bridge), one rank each, the pipeline pairs of tests/e2e/scripts/pairs_train.py between them,
and the path between host0 and host1 only throttled by tc (htb, a u32 filter on the peer's
address, both ways). The report names that link with both hosts, and what its late rank
costs is told to be the link's. Needs root, iproute2, htb and u32; about 25 s."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from analysed import analysed  # noqa: E402
from netns_hosts import bridged_hosts, etc_hosts_file, netns_unavailable, on_host, throttle_pair

from conftest import SCRIPTS, cli_env
from scalescope.diagnose.engine import diagnose_run
from scalescope.events import load_run

pytestmark = [pytest.mark.live, pytest.mark.heavy]

CLI = [sys.executable, "-m", "scalescope.cli"]
HOSTS = 3


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_throttled_path_between_two_hosts_is_named_a_slow_link(tmp_path):
    reason = netns_unavailable(("ip", "tc", "unshare"))
    if reason:
        pytest.skip(reason)
    names = [f"host{i}" for i in range(HOSTS)]
    with bridged_hosts(HOSTS) as hosts:
        reason = throttle_pair(hosts[0], hosts[1])
        if reason:
            pytest.skip(reason)
        etc_hosts = etc_hosts_file(tmp_path, hosts, names)
        endpoint = f"{hosts[0][2]}:{_port()}"
        procs = []
        for node, (host, name) in enumerate(zip(hosts, names, strict=True)):
            run = [
                *CLI, "run", "--nnodes", str(HOSTS), "--node-rank", str(node), "-n", "1",
                "--rdzv-endpoint", endpoint, "--local-addr", host[2], "--run-dir", "run",
                "--no-report", str(SCRIPTS / "pairs_train.py"), "--steps", "12",
                "--mbytes", "2",
            ]  # fmt: skip
            cmd = on_host(host, name, etc_hosts, run)
            out = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
            procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(), text=True, **out))
        outs = [p.communicate(timeout=150) for p in procs]
        assert [p.returncode for p in procs] == [0] * HOSTS, [o[1][-2000:] for o in outs]
    run = load_run(tmp_path / "run")
    assert sorted({m.hostname for m in run.ranks.values()}) == names
    analysis = analysed(run)
    assert analysis.links is not None and analysis.links.compared_groups == HOSTS
    (link,) = analysis.links.slow
    assert link.hosts == ("host0", "host1") and link.groups == ((0, 1),)
    assert link.ratio >= 2.0
    found = {f.code: f for f in diagnose_run(run, analysis).findings}
    assert found["SLOW_LINK"].level == "warning"
    assert "between host0 and host1" in found["SLOW_LINK"].summary
    late = [f for c, f in found.items() if c in ("STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE")]
    assert all(f.level == "info" and "SLOW_LINK" in f.basis for f in late), late
