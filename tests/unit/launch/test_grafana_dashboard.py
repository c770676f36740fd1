"""docs/grafana/scalescope-job.json reads what the endpoint serves: every metric its queries
name is one that a scrape (per rank or per node) of a run with steps, a finished collective,
an open slowdown and a hang holds (or DCGM's exporter's), every label its queries group or
join on and its legends show is one those samples carry, and every panel queries something."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.events.files import live_state_path, rank_meta_path
from scalescope.events.live_state import read_live_states
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.run import GroupMeta, RankMeta, write_json_atomic
from scalescope.launch.metrics.endpoint import MetricsEndpoint

DASHBOARD = Path(__file__).parents[3] / "docs" / "grafana" / "scalescope-job.json"
DCGM_ONLY = {"DCGM_FI_DEV_GPU_UTIL"}


def served(run_dir: Path, per: str) -> tuple[set[str], set[str]]:
    """The sample names and label names of a scrape of a run with everything the endpoint
    shows."""
    w = LiveStateWriter(live_state_path(run_dir, 0), 1, 0)
    w.add_phase("comm_wait", 10)
    w.add_step(100, 8)
    w.step(1, 100)
    w.enter("all_reduce", "0", 1, 1024, 200)
    w.leave("0", 1, 300)
    meta = RankMeta(rank=0, hostname="n0", groups={"0": GroupMeta(ranks=[0, 1], dim="dp")})
    write_json_atomic(rank_meta_path(run_dir, 0), meta)
    endpoint = MetricsEndpoint("j", per=per, run_dir=run_dir, world_size=2, gpus=("0",))
    endpoint.latest.observe(read_live_states(run_dir, 2))
    onset = Alert("onset", 1, "rank", (0,), ("n0",), "forward", "compute", 38.0, 90.0, 100.0,
                  138.0, 50, 60, 1.0, "slowdown: ...")  # fmt: skip
    endpoint.latest.alerted((onset,))
    endpoint.latest.hung()
    text = endpoint.collector.text().decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    return {s.name for s in samples}, {label for s in samples for label in s.labels}


def queries() -> tuple[list[dict], list[str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [t for p in dashboard["panels"] for t in p["targets"]]
    assert all(p["targets"] for p in dashboard["panels"])
    variables = [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return targets, [t["expr"] for t in targets] + variables


def test_every_query_names_what_the_endpoint_serves(tmp_path: Path) -> None:
    (tmp_path / "rank").mkdir()
    (tmp_path / "node").mkdir()
    names, _ = served(tmp_path / "rank", "rank")
    names |= served(tmp_path / "node", "node")[0]
    _, exprs = queries()
    named = {m for e in exprs for m in re.findall(r"\b(?:scalescope|DCGM)_\w+", e)}
    assert named - DCGM_ONLY <= names, sorted(named - DCGM_ONLY - names)
    wanted = {
        "scalescope_hang",
        "scalescope_phase_seconds_total",
        "scalescope_collective_bytes_per_second",
        "scalescope_collective_bus_bytes_per_second",
    }
    assert wanted <= named


def test_every_label_it_groups_joins_or_shows_is_served(tmp_path: Path) -> None:
    _, labels = served(tmp_path, "rank")
    targets, exprs = queries()
    grouped = {
        label.strip()
        for e in exprs
        for inside in re.findall(r"\b(?:by|on|group_left|ignoring)\s*\(([^)]*)\)", e)
        for label in inside.split(",")
    }
    shown = {m for t in targets for m in re.findall(r"\{\{(\w+)\}\}", t.get("legendFormat", ""))}
    assert {"op", "dim", "Hostname", "gpu", "rank"} <= grouped | shown
    assert grouped | shown <= labels, sorted((grouped | shown) - labels)
