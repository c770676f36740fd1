"""launch/metrics/endpoint.py: the ranks' live totals as Prometheus counters (parsed back with
prometheus_client's own parser), per rank or per node, the alerts and the hang; the endpoint
bound to 127.0.0.1 only, serving only reads, and a port in use refused in one line. The per-op
gauges and the labels: test_metrics_ops.py; the text against prometheus_client's:
test_metrics_text.py."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families

from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.events.files import live_state_path
from scalescope.events.live_state import read_live_states
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.launch.metrics.endpoint import MetricsEndpoint

HOSTS = {0: "n0", 1: "n0", 2: "n1"}


def write_states(run_dir: Path) -> None:
    for rank in HOSTS:
        w = LiveStateWriter(live_state_path(run_dir, rank), pid=10 + rank, wall_minus_perf_ns=0)
        for step in range(rank + 2):
            w.add_phase("forward", 30_000_000)
            w.add_phase("comm_wait", 5_000_000 * rank)
            w.add_collective(7_000_000)
            w.add_step(50_000_000, 16)
            w.step(step + 1, 1_000 * (step + 1))
        w.close()


def samples(endpoint: MetricsEndpoint) -> dict[tuple, float]:
    text = endpoint.collector.text().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def key(name: str, **labels: str) -> tuple:
    return (name, tuple(sorted(labels.items())))


def test_each_ranks_totals_are_counters_with_job_rank_and_hostname(tmp_path: Path) -> None:
    write_states(tmp_path)
    endpoint = MetricsEndpoint("job1", HOSTS.get)
    endpoint.latest.observe(read_live_states(tmp_path, 3))
    got = samples(endpoint)
    for rank, host in HOSTS.items():
        labels = {"job": "job1", "rank": str(rank), "Hostname": host}
        steps = rank + 2
        assert got[key("scalescope_steps_total", **labels)] == steps
        assert got[key("scalescope_step_seconds_total", **labels)] == pytest.approx(0.05 * steps)
        assert got[key("scalescope_samples_total", **labels)] == 16 * steps
        assert got[key("scalescope_collective_seconds_total", **labels)] == pytest.approx(
            0.007 * steps
        )
        forward = key("scalescope_phase_seconds_total", phase="forward", **labels)
        assert got[forward] == pytest.approx(0.03 * steps)
        wait = key("scalescope_phase_seconds_total", phase="comm_wait", **labels)
        assert got[wait] == pytest.approx(0.005 * rank * steps)
    assert got[key("scalescope_hang", job="job1")] == 0
    assert got[key("scalescope_slowdown_alerts_total", job="job1")] == 0


def test_per_node_sums_the_ranks_of_each_node(tmp_path: Path) -> None:
    write_states(tmp_path)
    endpoint = MetricsEndpoint("job1", HOSTS.get, per="node")
    endpoint.latest.observe(read_live_states(tmp_path, 3))
    got = samples(endpoint)
    assert got[key("scalescope_steps_total", job="job1", Hostname="n0")] == 2 + 3
    assert got[key("scalescope_samples_total", job="job1", Hostname="n1")] == 16 * 4
    assert not any(dict(labels).get("rank") for _, labels in got)


def test_an_open_slowdown_and_a_hang_are_gauges(tmp_path: Path) -> None:
    endpoint = MetricsEndpoint("job1", HOSTS.get)
    onset = Alert("onset", 1, "rank", (2,), ("n1",), "forward", "compute", 38.0, 90.0, 100.0,
                  138.0, 50, 60, 1.0, "slowdown: ...")  # fmt: skip
    endpoint.latest.alerted((onset,))
    endpoint.latest.hung()
    got = samples(endpoint)
    active = key("scalescope_slowdown_active", job="job1", subject="rank", phase="forward",
                 category="compute")  # fmt: skip
    assert got[active] == 1 and got[key("scalescope_hang", job="job1")] == 1
    assert got[key("scalescope_slowdown_alerts_total", job="job1")] == 1


def test_the_step_world_and_ranks_reporting_are_gauges(tmp_path: Path) -> None:
    """Each rank's step; per node its slowest rank's; the world's size beside the ranks read."""
    write_states(tmp_path)
    endpoint = MetricsEndpoint("job1", HOSTS.get, world_size=4)
    endpoint.latest.observe(read_live_states(tmp_path, 3))
    got = samples(endpoint)
    for rank, host in HOSTS.items():
        assert got[key("scalescope_step", job="job1", rank=str(rank), Hostname=host)] == rank + 2
    assert got[key("scalescope_world_size", job="job1")] == 4
    assert got[key("scalescope_ranks_reporting", job="job1")] == 3
    per_node = samples(MetricsEndpoint("job1", HOSTS.get, per="node", world_size=4))
    assert key("scalescope_step", job="job1", Hostname="n0") not in per_node, "no state yet"
    node = MetricsEndpoint("job1", HOSTS.get, per="node", world_size=4)
    node.latest.observe(read_live_states(tmp_path, 3))
    got = samples(node)
    assert got[key("scalescope_step", job="job1", Hostname="n0")] == 2, "its slowest rank"
    assert got[key("scalescope_step", job="job1", Hostname="n1")] == 4


def test_an_open_slowdowns_change_is_a_ratio(tmp_path: Path) -> None:
    endpoint = MetricsEndpoint("job1", HOSTS.get)
    onset = Alert("onset", 1, "rank", (2,), ("n1",), "forward", "compute", 38.0, 90.0, 100.0,
                  138.0, 50, 60, 1.0, "slowdown: ...")  # fmt: skip
    endpoint.latest.alerted((onset,))
    change = key("scalescope_slowdown_change_ratio", job="job1", subject="rank",
                 phase="forward", category="compute")  # fmt: skip
    assert samples(endpoint)[change] == pytest.approx(0.38)
    endpoint.latest.alerted((onset, replace(onset, event="recovery")))
    assert change not in samples(endpoint), "gone once it recovered"


def test_a_watch_stopped_on_an_error_is_down(tmp_path: Path) -> None:
    endpoint = MetricsEndpoint("job1", HOSTS.get)
    assert not any(name == "scalescope_watch_up" for name, _ in samples(endpoint))
    endpoint.latest.watching("hang")
    endpoint.latest.watching("slowdown")
    endpoint.latest.watching("slowdown", up=False)
    got = samples(endpoint)
    assert got[key("scalescope_watch_up", job="job1", watch="hang")] == 1
    assert got[key("scalescope_watch_up", job="job1", watch="slowdown")] == 0


def test_a_re_baselined_slowdown_is_no_longer_open(tmp_path: Path) -> None:
    endpoint = MetricsEndpoint("job1", HOSTS.get)
    onset = Alert("onset", 1, "rank", (2,), ("n1",), "forward", "compute", 38.0, 90.0, 100.0,
                  138.0, 50, 60, 1.0, "slowdown: ...")  # fmt: skip
    note = replace(onset, event="rebaseline", detected_step=3_000, detected_at=601.0)
    endpoint.latest.alerted((onset, note))
    got = samples(endpoint)
    assert not any(name == "scalescope_slowdown_active" for name, _ in got)
    assert got[key("scalescope_slowdown_alerts_total", job="job1")] == 1


def test_the_endpoint_serves_on_loopback_only(tmp_path: Path) -> None:
    write_states(tmp_path)
    port = free_port()
    endpoint = MetricsEndpoint("job1", HOSTS.get, port=port)
    endpoint.bind()
    endpoint.latest.observe(read_live_states(tmp_path, 3))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert b'scalescope_steps_total{Hostname="n1",job="job1",rank="2"} 4.0' in r.read()
        other = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
                 if a.family == socket.AF_INET and not a.address.startswith("127.")]  # fmt: skip
        if not other:
            pytest.skip("this machine has no address but loopback")
        with pytest.raises(OSError), socket.create_connection((other[0], port), timeout=3):
            pass
    finally:
        endpoint.close()


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        endpoint = MetricsEndpoint("job1", HOSTS.get, port=port)
        with pytest.raises(ValueError, match=rf"^--metrics-port {port}: cannot listen on "):
            endpoint.bind()


def test_run_refuses_a_port_in_use_before_any_rank_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("open('started', 'w').close()\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", "run",
             "--metrics-port", str(port), str(script)],
            cwd=tmp_path, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in last
    assert not (tmp_path / "started").exists() and not (tmp_path / "run").exists()
