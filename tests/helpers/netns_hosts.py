"""Hosts made of network namespaces, for tests and benchmarks that need a network: several
"hosts" on one bridge (each its own host name inside ``unshare --uts``), and one path between
two of them throttled with tc. Nothing is added to this machine's own network."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUBNET = "10.214.3"
RATE = "100mbit"
"""The slow path (12.5 MB/s); the others are left at what veth and gloo reach (~100 MB/s
and more with three ranks on two cores)."""


def netns_unavailable(tools: tuple[str, ...] = ("ip",)) -> str | None:
    """Why two network namespaces cannot be made here, or None when they can."""
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"sscheck{os.getpid()}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"ip netns add is not allowed here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], check=True)
    return None


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@contextmanager
def bridged_hosts(hosts_n: int = 3, subnet: str = SUBNET) -> Iterator[list[tuple[str, str, str]]]:
    """``hosts_n`` namespaces (namespace, device, address) on a bridge in a namespace of its
    own: nothing is added to this machine's own network."""
    tag = uuid.uuid4().hex[:5]
    switch = f"sw{tag}"
    hosts = [(f"h{i}{tag}", f"v{i}{tag}", f"{subnet}.{i + 1}") for i in range(hosts_n)]
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


def throttle_pair(a: tuple[str, str, str], b: tuple[str, str, str], rate: str = RATE) -> str | None:
    """Limit the traffic between a and b (each way, only to the other) to ``rate``; why not."""
    for (ns, dev, _), (_, _, peer) in ((a, b), (b, a)):
        for cmd in (
            ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
            ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
             "rate", "10gbit"],
            ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb",
             "rate", rate],
            ["tc", "filter", "add", "dev", dev, "protocol", "ip", "parent", "1:", "prio", "1",
             "u32", "match", "ip", "dst", f"{peer}/32", "flowid", "1:20"],
        ):  # fmt: skip
            done = subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True)
            if done.returncode != 0:
                return f"tc cannot shape one path here: {done.stderr.strip()}"
    return None


def on_host(host: tuple[str, str, str], name: str, etc_hosts: Path, argv: list[str]) -> list[str]:
    """``argv`` run in ``host``'s namespace, under the host name ``name`` (and an
    /etc/hosts that names every host), gloo on its device."""
    ns, dev, _ = host
    inner = f'mount --bind {etc_hosts} /etc/hosts && hostname {name} && exec "$@"'
    return ["ip", "netns", "exec", ns, "unshare", "--uts", "--mount", "sh", "-c", inner,
            "sh", "env", f"GLOO_SOCKET_IFNAME={dev}", *argv]  # fmt: skip


def etc_hosts_file(folder: Path, hosts: list[tuple[str, str, str]], names: list[str]) -> Path:
    path = folder / "hosts"
    lines = [f"{addr} {name}\n" for (_, _, addr), name in zip(hosts, names, strict=True)]
    path.write_text("127.0.0.1 localhost\n" + "".join(lines))
    return path
