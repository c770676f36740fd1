"""A real slow link: three "hosts" (network namespaces, each with its own host name, on one
bridge), one rank each, the pipeline pairs of tests/e2e/scripts/pairs_train.py between them,
and the path between host0 and host1 only throttled by tc (htb, a u32 filter on the peer's
address, both ways). The report names that link with both hosts, and what its late rank
costs is told to be the link's. Needs root, iproute2, htb and u32; about 25 s."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, netns_unavailable
from scalescope.analyze import analyze_run
from scalescope.diagnose.engine import diagnose_run
from scalescope.events import load_run

pytestmark = [pytest.mark.live, pytest.mark.heavy]

CLI = [sys.executable, "-m", "scalescope.cli"]
SUBNET = "10.214.3"
HOSTS = 3
RATE = "100mbit"
"""The slow path (12.5 MB/s); the others are left at what veth and gloo reach (~100 MB/s
and more with three ranks on two cores)."""


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@contextmanager
def bridged_hosts(tmp_path: Path) -> Iterator[list[tuple[str, str, str]]]:
    """``HOSTS`` namespaces (namespace, device, address) on a bridge in a namespace of its
    own: nothing is added to this machine's own network."""
    tag = uuid.uuid4().hex[:5]
    switch = f"sw{tag}"
    hosts = [(f"h{i}{tag}", f"v{i}{tag}", f"{SUBNET}.{i + 1}") for i in range(HOSTS)]
    try:
        _run(["ip", "netns", "add", switch])
        _run(["ip", "-n", switch, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", switch, "link", "set", "br0", "up"])
        for i, (ns, dev, addr) in enumerate(hosts):
            port = f"p{i}{tag}"
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", port,
                  "netns", switch])  # fmt: skip
            _run(["ip", "-n", switch, "link", "set", port, "master", "br0", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        yield hosts
    finally:
        for ns in (switch, *(h[0] for h in hosts)):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def throttle_pair(a: tuple[str, str, str], b: tuple[str, str, str]) -> str | None:
    """Limit the traffic between a and b (each way, only to the other) to RATE; why not."""
    for (ns, dev, _), (_, _, peer) in ((a, b), (b, a)):
        for cmd in (
            ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
            ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
             "rate", "10gbit"],
            ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb",
             "rate", RATE],
            ["tc", "filter", "add", "dev", dev, "protocol", "ip", "parent", "1:", "prio", "1",
             "u32", "match", "ip", "dst", f"{peer}/32", "flowid", "1:20"],
        ):  # fmt: skip
            done = subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True)
            if done.returncode != 0:
                return f"tc cannot shape one path here: {done.stderr.strip()}"
    return None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_throttled_path_between_two_hosts_is_named_a_slow_link(tmp_path):
    reason = netns_unavailable(("ip", "tc", "unshare"))
    if reason:
        pytest.skip(reason)
    names = [f"host{i}" for i in range(HOSTS)]
    with bridged_hosts(tmp_path) as hosts:
        reason = throttle_pair(hosts[0], hosts[1])
        if reason:
            pytest.skip(reason)
        etc_hosts = tmp_path / "hosts"
        lines = [f"{addr} {name}\n" for (_, _, addr), name in zip(hosts, names, strict=True)]
        etc_hosts.write_text("127.0.0.1 localhost\n" + "".join(lines))
        endpoint = f"{hosts[0][2]}:{_port()}"
        procs = []
        for node, ((ns, dev, addr), name) in enumerate(zip(hosts, names, strict=True)):
            run = [
                *CLI, "run", "--nnodes", str(HOSTS), "--node-rank", str(node), "-n", "1",
                "--rdzv-endpoint", endpoint, "--local-addr", addr, "--run-dir", "run",
                "--no-report", str(SCRIPTS / "pairs_train.py"), "--steps", "12",
                "--mbytes", "2",
            ]  # fmt: skip
            inner = f'mount --bind {etc_hosts} /etc/hosts && hostname {name} && exec "$@"'
            cmd = ["ip", "netns", "exec", ns, "unshare", "--uts", "--mount", "sh", "-c", inner,
                   "sh", "env", f"GLOO_SOCKET_IFNAME={dev}", *run]  # fmt: skip
            out = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
            procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(), text=True, **out))
        outs = [p.communicate(timeout=150) for p in procs]
        assert [p.returncode for p in procs] == [0] * HOSTS, [o[1][-2000:] for o in outs]
    run = load_run(tmp_path / "run")
    assert sorted({m.hostname for m in run.ranks.values()}) == names
    analysis = analyze_run(run)
    assert analysis.links is not None and analysis.links.compared_groups == HOSTS
    (link,) = analysis.links.slow
    assert link.hosts == ("host0", "host1") and link.groups == ((0, 1),)
    assert link.ratio >= 2.0
    found = {f.code: f for f in diagnose_run(run, analysis).findings}
    assert found["SLOW_LINK"].level == "warning"
    assert "between host0 and host1" in found["SLOW_LINK"].summary
    late = [f for c, f in found.items() if c in ("STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE")]
    assert all(f.level == "info" and "SLOW_LINK" in f.basis for f in late), late
