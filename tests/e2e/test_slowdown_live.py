"""A live 4-rank run in which rank 2 slows down in forward from a chosen step (ddp_train.py
sleeps there from ``--sleep-from``): the launcher's watch names the rank and the phase while
it trains, in its log, ``alerts.jsonl`` and the ``--on-slowdown`` hook, and the report prints
the slowdown with its cost. Content only: how soon after the onset is `make bench`'s
(benchmarks/slowdown_streams.py, slowdown_live.py, and the offline replay of this run's kind
in tests/unit/analyze/test_slowdown_replay.py).

The same run serves its metrics (``--metrics-port``), scraped while it trains and parsed with
prometheus_client's parser, and pushes them to a Pushgateway (a small HTTP server here) at
the end, whose last push holds the report's steps and samples, and each rank's last
all_reduce of the gradients with one of the report's sizes and its bus bandwidth."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families
from ring_match import assert_ring_matches_stream

from conftest import DDP_TRAIN, cli_env, scalescope
from scalescope.analyze.watch.slowdown_alerts import read_alerts
from scalescope.events.files import events_path, window_events_path
from scalescope.events.reader import read_event_stream
from scalescope.events.schema import ROW_FIELDS

pytestmark = pytest.mark.live

SLOW_RANK, FROM, STEPS = 2, 220, 290
SLEEP_S = 0.15
"""Several times the step, so that a loaded machine's noise (which raises the detector's bar)
cannot hide it: this test checks what an alert says, and how small a change is caught and how
soon is measured by `make bench`."""


class Gateway(BaseHTTPRequestHandler):
    """A Pushgateway's side of a push: each body kept, in order."""

    bodies: list[str] = []

    def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
        Gateway.bodies.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.send_response(202)
        self.end_headers()

    do_POST = do_PUT

    def log_message(self, *args) -> None:
        pass


def scrape_while_it_runs(proc: subprocess.Popen, port: int) -> dict[str, dict]:
    """The first scrape that shows every rank's steps: {metric family: {rank: value}}."""
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                found = parse(r.read().decode())
        except OSError:
            found = {}
        steps = found.get("scalescope_steps", {})
        if len(steps) == 4 and min(steps.values()) > 0:
            return found
        time.sleep(0.5)
    return {}


def parse(text: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "rank" in s.labels and not s.labels.keys() & {"phase", "op"}:
                out.setdefault(family.name, {})[int(s.labels["rank"])] = s.value
    return out


@pytest.fixture(scope="module")
def slowed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slowdown")
    hook = 'printf "%s\\n" "$SCALESCOPE_ALERT" >> hook.jsonl'
    gateway = HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    port = free_port()
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", 4, "--run-dir", tmp / "run",
        "--no-report", "--oversubscribe", "--on-slowdown", hook, "--metrics-port", port,
        "--metrics-push", f"http://127.0.0.1:{gateway.server_port}", "--metrics-push-every", 600,
        DDP_TRAIN, "--steps", STEPS, "--sleep-rank", SLOW_RANK, "--sleep-s", SLEEP_S,
        "--sleep-where", "forward", "--sleep-from", FROM,
    ]  # fmt: skip
    proc = subprocess.Popen(list(map(str, cmd)), cwd=tmp, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    scraped = scrape_while_it_runs(proc, port)
    out, err = proc.communicate(timeout=300)
    gateway.shutdown()
    assert proc.returncode == 0, err[-3000:]
    proc = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    done = scalescope("report", tmp / "run", "--json", tmp / "r.json", cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp / "r.json").read_text())
    return tmp, proc, report, scraped, list(Gateway.bodies)


def named(alerts):
    return [a for a in alerts if a.event == "onset" and a.ranks == (SLOW_RANK,)]


def test_the_watch_names_the_rank_and_the_phase_while_it_trains(slowed):
    tmp, proc, *_ = slowed
    alerts = read_alerts(tmp / "run")
    assert alerts, proc.stderr[-2000:]
    (alert, *_) = named(alerts)
    assert (alert.subject, alert.phase, alert.category) == ("rank", "forward", "compute")
    assert alert.since_step <= alert.detected_step and FROM < alert.detected_step <= STEPS
    assert alert.now_ms > alert.baseline_ms * 1.1
    assert f"scalescope: {alert.message}" in proc.stderr


def test_each_ranks_ring_rows_of_the_baseline_and_the_onset_are_kept(slowed):
    """At the onset the launcher copies every rank's flight recorder rows of the onset and
    of the baseline before it (at least the detector's 20 steps) into window files: the
    steps before the onset hold exactly the rank's rows of those steps (their calls, where
    the stream holds summaries, what the summaries add up)."""
    tmp, proc, *_ = slowed
    (alert, *_) = named(read_alerts(tmp / "run"))
    first = max(0, alert.since_step - max(20, alert.detected_step - alert.since_step))
    assert f"steps {first}-{alert.detected_step} of 4 ranks kept" in proc.stderr
    for rank in range(4):
        path = window_events_path(tmp / "run", alert.since_step, rank)
        window = read_event_stream(path).table.drop_columns(["rank"]).to_pylist()
        steps = {r["step"] for r in window}
        assert min(steps) == first and max(steps) <= alert.detected_step
        stream = read_event_stream(events_path(tmp / "run", rank)).table.to_pylist()
        rows = [[tuple(r[c] for c in ROW_FIELDS) for r in t] for t in (window, stream)]
        assert_ring_matches_stream(*rows, range(first, alert.since_step))


def test_the_hook_gets_each_alert_as_json(slowed):
    tmp, *_ = slowed
    hooked = [json.loads(line) for line in (tmp / "hook.jsonl").read_text().splitlines()]
    written = [json.loads(line) for line in (tmp / "run" / "alerts.jsonl").read_text().splitlines()]
    assert hooked == written


def test_the_report_prints_the_slowdown_with_its_cost(slowed):
    _, _, report, *_ = slowed
    ours = [s for s in report["slowdowns"] if s["onset"]["ranks"] == [SLOW_RANK]]
    assert ours and ours[0]["onset"]["phase"] == "forward"
    assert ours[0]["steps"] > 0 and ours[0]["lost_s"] > 0
    assert ours[0]["fix_cause"] == f"rank:{SLOW_RANK}"


def test_the_metrics_are_scraped_while_it_trains(slowed):
    *_, scraped, _ = slowed
    assert sorted(scraped["scalescope_steps"]) == [0, 1, 2, 3]
    for rank, steps in scraped["scalescope_steps"].items():
        assert 0 < steps <= STEPS
        assert scraped["scalescope_step_seconds"][rank] > 0
        assert scraped["scalescope_samples"][rank] > 0


def test_the_last_push_holds_the_reports_steps_and_samples(slowed):
    """Every step of every rank (the report's measured steps leave the warm-up out), and the
    same samples per step as the report counts (ddp_train's batches are all one size)."""
    _, _, report, _, bodies = slowed
    assert bodies, "nothing was pushed at the end"
    final = parse(bodies[-1])
    assert final["scalescope_steps"] == dict.fromkeys(range(4), float(STEPS))
    assert final["scalescope_step"] == final["scalescope_steps"], "the step gauge"
    said = bodies[-1]
    assert "scalescope_world_size{" in said and "scalescope_watch_up{job=" in said
    for r in report["steps"]["ranks"]:
        pushed = final["scalescope_samples"][r["rank"]] / STEPS
        assert pushed == r["samples"] / r["num_steps"]


def test_the_last_push_holds_each_ranks_last_all_reduce_with_its_bus_bandwidth(slowed):
    """DDP's gradient buckets on the world group: a size the report measured, and the bus
    bandwidth nccl-tests' factor for 4 ranks (2 (n - 1) / n) above the bytes/s."""
    _, _, report, _, bodies = slowed
    sizes = {s["nbytes"] for s in report["collectives"]["sizes"] if s["op"] == "all_reduce"}
    found: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(bodies[-1]):
        for s in family.samples:
            if s.labels.get("op") == "all_reduce":
                assert s.labels["dim"] == "world" and s.labels["Hostname"], s.labels
                found[(s.name, int(s.labels["rank"]))] = s.value
    for rank in range(4):
        assert found.get(("scalescope_collective_bytes", rank)) in sizes, (rank, found, sizes)
        bw = found[("scalescope_collective_bytes_per_second", rank)]
        bus = found[("scalescope_collective_bus_bytes_per_second", rank)]
        assert bw > 0 and bus == pytest.approx(bw * 2 * 3 / 4)
