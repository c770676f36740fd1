"""A live 4-rank run in which rank 2 slows down in forward from a chosen step (ddp_train.py
sleeps there from ``--sleep-from``): the launcher's watch names the rank and the phase while
it trains, in its log, ``alerts.jsonl`` and the ``--on-slowdown`` hook, and the report prints
the slowdown with its cost. Content only: how soon after the onset is `make bench`'s
(benchmarks/slowdown_streams.py, and the offline replay of this run's kind in
tests/unit/analyze/test_slowdown_replay.py)."""

from __future__ import annotations

import json

import pytest

from conftest import DDP_TRAIN, run_then_report
from scalescope.analyze.slowdown import read_alerts

pytestmark = pytest.mark.live

SLOW_RANK, FROM, STEPS = 2, 220, 330


@pytest.fixture(scope="module")
def slowed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slowdown")
    hook = 'printf "%s\\n" "$SCALESCOPE_ALERT" >> hook.jsonl'
    proc, report = run_then_report(
        4, "--oversubscribe", "--on-slowdown", hook, DDP_TRAIN, "--steps", STEPS,
        "--sleep-rank", SLOW_RANK, "--sleep-s", 0.03, "--sleep-where", "forward",
        "--sleep-from", FROM, cwd=tmp, timeout=300,
    )  # fmt: skip
    return tmp, proc, report


def named(alerts):
    return [a for a in alerts if a.event == "onset" and a.ranks == (SLOW_RANK,)]


def test_the_watch_names_the_rank_and_the_phase_while_it_trains(slowed):
    tmp, proc, _ = slowed
    alerts = read_alerts(tmp / "run")
    assert alerts, proc.stderr[-2000:]
    (alert, *_) = named(alerts)
    assert (alert.subject, alert.phase, alert.category) == ("rank", "forward", "compute")
    assert FROM - 40 <= alert.since_step <= alert.detected_step < STEPS
    assert alert.now_ms > alert.baseline_ms * 1.1
    assert f"scalescope: {alert.message}" in proc.stderr


def test_the_hook_gets_each_alert_as_json(slowed):
    tmp, _, _ = slowed
    hooked = [json.loads(line) for line in (tmp / "hook.jsonl").read_text().splitlines()]
    written = [json.loads(line) for line in (tmp / "run" / "alerts.jsonl").read_text().splitlines()]
    assert hooked == written


def test_the_report_prints_the_slowdown_with_its_cost(slowed):
    tmp, _, report = slowed
    ours = [s for s in report["slowdowns"] if s["onset"]["ranks"] == [SLOW_RANK]]
    assert ours and ours[0]["onset"]["phase"] == "forward"
    assert ours[0]["steps"] > 0 and ours[0]["lost_s"] > 0
    assert ours[0]["fix_cause"] == f"rank:{SLOW_RANK}"
