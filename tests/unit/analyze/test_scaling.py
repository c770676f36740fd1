"""Scaling efficiency: linear scaling is 1.0, whatever the base rank count."""

from __future__ import annotations

import pytest

from scalescope.analyze.scaling import scaling_efficiency


def test_linear_and_sublinear():
    assert scaling_efficiency(2, 200.0, 1, 100.0) == pytest.approx(1.0)
    assert scaling_efficiency(4, 300.0, 1, 100.0) == pytest.approx(0.75)
    assert scaling_efficiency(8, 600.0, 2, 200.0) == pytest.approx(0.75)


def test_no_base_gives_none():
    assert scaling_efficiency(2, 100.0, 1, 0.0) is None
