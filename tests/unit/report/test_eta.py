"""The progress line of scale and suite: bar, count, time spent and left."""

from __future__ import annotations

from scalescope.report.views.eta import Eta


def test_time_left_is_the_mean_of_the_runs_done_times_the_runs_left() -> None:
    eta = Eta(total=4, label="scale", started=100.0)
    assert eta.line("1 rank", now=100.0) == (
        "scale [1/4] ░░░░░░░░░░░░░░░░░░░░ 0:00 elapsed, ? left: 1 rank"
    )
    assert eta.line("2 ranks", now=130.0).endswith("0:30 elapsed, ~1:30 left: 2 ranks")
    third = eta.line("3 ranks", now=200.0)  # two runs in 100 s: 50 s each, two left
    assert third.startswith("scale [3/4] " + "█" * 10 + "░" * 10)
    assert "1:40 elapsed, ~1:40 left" in third
