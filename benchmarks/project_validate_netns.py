"""`scalescope project --validate` on a study whose ranks talk over a throttled link.

Each rank is a "node" of its own: a network namespace joined to the others by a veth pair
to a bridge (in a hub namespace, so the host's network is not touched), each end of every
pair limited to ``--rate`` with tbf. The bench workload (default squeezenet1_1: 4.9 MB of
gradients per step, about 1 s per step over 40 Mbit/s) runs at 1, 2 and 3 nodes of one
rank each; the runs and their scale.json make an ordinary scale study (written with
``commands.scale.recorded_point``, as `scalescope scale` does). Then ``project --validate``
fits on the smaller sizes, predicts the largest, and this script prints predicted vs
measured and the error.

Needs root, iproute2 (``ip``) and ``tc`` with tbf; where network namespaces are not
allowed it says why and exits 0. Run by hand, not in CI (a 3-size study takes minutes):

    PYTHONPATH=src .venv/bin/python benchmarks/project_validate_netns.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from results import record, skipped

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS / "helpers") not in sys.path:  # run standalone, outside pytest
    sys.path.insert(0, str(TESTS / "helpers"))
from netns_hosts import netns_unavailable  # noqa: E402

from scalescope.commands.scale import recorded_point  # noqa: E402
from scalescope.events.study import ScalePoint, ScaleStudy, save_study  # noqa: E402

CLI = [sys.executable, "-m", "scalescope.cli"]
SUBNET = "10.213.9"
MAX_ERROR_PCT = 20.0
"""The bound of the e2e test of ``project --validate`` (docs/project.md)."""
Node = tuple[str, str, str]
"""(namespace, device, address) of one node."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2,3", help="sizes of the study (one rank per node)")
    p.add_argument("--rate", default="40mbit", help="tbf rate of every link end")
    p.add_argument("--model", default="squeezenet1_1")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--keep", type=Path, help="keep the study here (default: a temporary dir)")
    return p.parse_args()


def sh(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")


def tbf(ns: str, dev: str, rate: str) -> None:
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
       "rate", rate, "burst", "32kbit", "latency", "400ms")  # fmt: skip


@contextmanager
def star(num_nodes: int, rate: str) -> Iterator[list[Node]]:
    """``num_nodes`` namespaces on one bridge (in a hub namespace), every link end at ``rate``."""
    tag = uuid.uuid4().hex[:6]
    hub = f"sphub{tag}"
    nodes = [(f"spn{i}{tag}", f"spv{i}{tag}", f"{SUBNET}.{i + 1}") for i in range(num_nodes)]
    made = [hub]
    try:
        sh("ip", "netns", "add", hub)
        sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", hub, "link", "set", "br0", "up")
        for i, (ns, dev, addr) in enumerate(nodes):
            peer = f"sph{i}{tag}"
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh("ip", "link", "add", dev, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "link", "set", peer, "netns", hub)
            sh("ip", "-n", hub, "link", "set", peer, "master", "br0")
            sh("ip", "-n", hub, "link", "set", peer, "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            tbf(ns, dev, rate)
            tbf(hub, peer, rate)
        yield nodes
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_args(args: argparse.Namespace) -> list[str]:
    return [
        "bench", args.model, "-n", "1", "--threads-per-rank", "1", "--no-report",
        "--image-size", str(args.image_size),
        "--batch-size", str(args.batch_size), "--steps", str(args.steps),
        "--warmup-steps", str(args.warmup_steps),
    ]  # fmt: skip


def node_argv(args: argparse.Namespace, nodes: list[Node], i: int, endpoint: str,
              run_dir: Path) -> list[str]:  # fmt: skip
    """Node ``i``'s bench, started in its namespace on its own interface."""
    ns, dev, addr = nodes[i]
    where = ["ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={dev}"]
    world = ["--nnodes", str(len(nodes)), "--node-rank", str(i), "--rdzv-endpoint", endpoint,
             "--local-addr", addr, "--run-dir", str(run_dir)]  # fmt: skip
    return [*where, *CLI, *bench_args(args), *world]


def run_size(args: argparse.Namespace, nodes: list[Node], run_dir: Path) -> None:
    """One run over ``nodes`` (one rank each), all started at once."""
    endpoint = f"{nodes[0][2]}:{free_port()}"
    procs = [
        subprocess.Popen(
            node_argv(args, nodes, i, endpoint, run_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(len(nodes))
    ]
    try:
        errors = [p.communicate(timeout=600)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    failed = [f"node {i}: {e[-1500:]}" for i, (p, e) in enumerate(zip(procs, errors, strict=True))
              if p.returncode != 0]  # fmt: skip
    if failed:
        raise RuntimeError("\n".join(failed))


def record_study(args: argparse.Namespace, nodes: list[Node], study_dir: Path) -> None:
    sizes = [int(n) for n in args.ranks.split(",")]
    study = ScaleStudy(mode="weak", workload=args.model, command=bench_args(args))
    for n in sizes:
        point = ScalePoint(ranks=n, nodes=n, ranks_per_node=1, per_rank_batch=args.batch_size,
                           run_dir=f"ranks-{n}")  # fmt: skip
        run_size(args, nodes[:n], study_dir / point.run_dir)
        study.points.append(recorded_point(point, study_dir / point.run_dir))
        save_study(study, study_dir)
        print(f"{n} node(s): {study.points[-1].samples_per_s:,.2f} samples/s, "
              f"{study.points[-1].step_ms:,.0f} ms per step", flush=True)  # fmt: skip


def validate(study_dir: Path) -> dict:
    out = study_dir / "validation.json"
    done = subprocess.run([*CLI, "project", "--validate", str(study_dir), "--json", str(out)],
                          capture_output=True, text=True)  # fmt: skip
    print(done.stdout, end="")
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return json.loads(out.read_text())


def main() -> None:
    args = parse()
    reason = netns_unavailable(("ip", "tc"))
    if reason is not None:
        print(f"skipped: the study needs network namespaces with tc tbf: {reason}")
        skipped(f"project --validate error over a {args.rate} link", "%",
                f"within ±{MAX_ERROR_PCT:.0f} %",
                f"needs network namespaces with tc tbf: {reason}")  # fmt: skip
        return
    sizes = [int(n) for n in args.ranks.split(",")]
    with tempfile.TemporaryDirectory() as tmp, star(max(sizes), args.rate) as nodes:
        study_dir = args.keep or Path(tmp) / "study"
        print(f"{args.model}, {args.image_size}px, batch {args.batch_size} per rank, one rank "
              f"per namespace, every link end at {args.rate}; {os.cpu_count()} cpus, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        record_study(args, nodes, study_dir)
        doc = validate(study_dir)
    for h in doc["held_out"]:
        print(f"{h['ranks']} ranks over a {args.rate} link: predicted "
              f"{h['predicted_samples_per_s']:.2f} samples/s ({h['predicted_step_ms']:,.0f} ms), "
              f"measured {h['measured_samples_per_s']:.2f} samples/s "
              f"({h['measured_step_ms']:,.0f} ms), error {h['error_pct']:+.1f}%")  # fmt: skip
        error = h["error_pct"]
        record(
            f"project --validate error, {h['ranks']} ranks predicted from the smaller sizes over "
            f"a {args.rate} link ({args.model})", error, "%", f"within ±{MAX_ERROR_PCT:.0f} %",
            abs(error) <= MAX_ERROR_PCT,
            f"predicted {h['predicted_samples_per_s']:.2f}, measured "
            f"{h['measured_samples_per_s']:.2f} samples/s",
        )  # fmt: skip


if __name__ == "__main__":
    main()
