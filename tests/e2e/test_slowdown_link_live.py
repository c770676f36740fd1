"""A link that slows down while the job trains: three "hosts" (network namespaces on one
bridge), one rank each, the pipeline pairs of tests/e2e/scripts/pairs_train.py between
them; once node 0's watch has its baseline, the path between host0 and host1 only is
throttled by tc. The watch's alert names that link, from the ranks' live time per group, and
the offline replay of the recorded run names it too. Needs root, iproute2, htb and u32; about
40 s. The recorded run of the same scenario (tests/data/runs/slowdown_link) carries it into
CI (tests/recorded/test_slowdown_link_recorded.py)."""

from __future__ import annotations

import pytest
from slow_link_job import run_slowed_link

from scalescope.analyze.watch.slowdown_alerts import read_alerts
from scalescope.analyze.watch.slowdown_replay import replay_run
from scalescope.events import load_run

pytestmark = [pytest.mark.live, pytest.mark.heavy]


def test_the_watch_names_the_link_that_slowed(tmp_path):
    outcome = run_slowed_link(tmp_path)
    if isinstance(outcome, str):
        pytest.skip(outcome)
    ours = [a for a in read_alerts(tmp_path / "run") if a.event == "onset"]
    assert ours, outcome.stderr[-3000:]
    (alert, *_) = ours
    run = load_run(tmp_path / "run")
    ends = tuple(sorted(r for r, m in run.ranks.items() if m.hostname in ("host0", "host1")))
    assert (alert.subject, alert.nodes, alert.ranks) == ("link", ("host0", "host1"), ends)
    assert alert.category == "communication"
    assert "link host0 <-> host1" in alert.message and alert.message in outcome.stderr
    replayed = [a for a in replay_run(run) if a.event == "onset"]
    assert replayed and (replayed[0].subject, replayed[0].nodes) == ("link", ("host0", "host1"))
