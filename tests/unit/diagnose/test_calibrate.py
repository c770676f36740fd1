"""--threshold NAME=VALUE parsing, and what --baseline refuses."""

from __future__ import annotations

import pytest

from scalescope.diagnose.calibrate import calibrate, parse_overrides, threshold_names
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds


def test_no_override_keeps_the_defaults():
    assert parse_overrides([]) == DEFAULT_THRESHOLDS


def test_overrides_are_typed_and_accept_dashes():
    t = parse_overrides(["data_share_pct=20", "small-file-bytes=4096", "min_core_use=0.75"])
    assert t == Thresholds(data_share_pct=20.0, small_file_bytes=4096, min_core_use=0.75)
    assert isinstance(t.small_file_bytes, int) and isinstance(t.data_share_pct, float)


def test_later_override_of_the_same_name_wins():
    assert parse_overrides(["imbalance_pct=5", "imbalance_pct=7"]).imbalance_pct == 7.0


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("bogus=1", "NAME one of data_share_pct, "),
        ("data_share_pct", "expected NAME=VALUE"),
        ("data_share_pct=abc", "'abc' is not a number"),
        ("small_file_bytes=1.5", "'1.5' is not a number"),
        ("data_share_pct=200", "data_share_pct must be in (0, 100], got 200.0"),
        ("flops_low_fraction=0.9", "flops_low_fraction must not exceed flops_expected_fraction"),
    ],
)
def test_bad_overrides_say_why(item, message):
    with pytest.raises(ValueError, match="^--threshold") as info:
        parse_overrides([item])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_every_threshold_can_be_named():
    assert len(threshold_names()) == len(set(threshold_names())) == 19
    assert "flops_expected_fraction" in threshold_names()


def test_baseline_that_is_not_a_run(tmp_path):
    from scalescope.events.run import RunDirError

    with pytest.raises(RunDirError, match="not a scalescope run directory"):
        calibrate(tmp_path)
