"""The slowed link recorded once (tests/data/runs/slowdown_link, the job of
tests/helpers/slow_link_job.py): three namespaced hosts in a ring of pipeline pairs, the path
between host0 and host1 throttled mid-run. What node 0's watch wrote while it trained, the
detector replayed over the recording, and the report's slowdowns all name that link."""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from recorded_runs import load_scenario

from scalescope.analyze.watch.slowdown_alerts import read_alerts
from scalescope.analyze.watch.slowdown_replay import replay_run
from scalescope.events import load_run

LINK = ("host0", "host1")


@pytest.fixture(scope="module")
def run():
    return load_run(load_scenario("slowdown_link").run_dir)


def ends(run) -> tuple[int, ...]:
    return tuple(sorted(r for r, m in run.ranks.items() if m.hostname in LINK))


def test_the_watch_named_the_link_while_it_trained(run):
    onsets = [a for a in read_alerts(run.path) if a.event == "onset"]
    assert [(a.subject, a.nodes, a.ranks) for a in onsets[:1]] == [("link", LINK, ends(run))]
    assert onsets[0].category == "communication"
    assert "link host0 <-> host1 (the collectives of ranks" in onsets[0].message


def test_the_replay_names_the_same_link(run):
    onsets = [a for a in replay_run(run) if a.event == "onset"]
    assert [(a.subject, a.nodes) for a in onsets[:1]] == [("link", LINK)]
    watched = next(a for a in read_alerts(run.path) if a.event == "onset")
    assert abs(onsets[0].since_step - watched.since_step) <= 40


def test_the_report_prices_the_link_with_the_what_if(run):
    """The receiving end of the slow link blocks in ``Work.wait`` for its recv: the what-if
    counts that as waiting for the transfer (step_grid: a send or recv done no later than
    the wait for it), not as the rank's own time, so fixing the link buys the slowdown back
    and fixing the rank or its node does not."""
    analysis = analysed(run)
    (cost, *_) = analysis.slowdowns
    assert cost.fix_cause == "link:host0,host1" and cost.lost_s > 0 and cost.steps > 0
    lost_per_step = cost.onset.now_ms - cost.onset.baseline_ms
    assert cost.fix_gain_ms > 0.5 * lost_per_step
    gains = {f.cause: f.gain_ms for f in analysis.whatif.fixes}
    assert all(gains.get(f"rank:{r}", 0.0) < 0.2 * cost.fix_gain_ms for r in ends(run))
    assert any(f"rank:{r}" in gains for r in ends(run))
