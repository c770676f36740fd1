import dataclasses
import math

import numpy as np
import pytest

from scalescope.bench.throughput import (
    DASHES,
    HEADER,
    Throughput,
    format_step_line,
    format_total,
    throughput,
)


def numpy_reference(times: list[float], images: int) -> tuple[float, float, float]:
    t = np.asarray(times)
    speeds = images / t
    mean = images / t.mean()
    ci = speeds.std() / np.sqrt(len(speeds))  # one standard error, as tf_cnn_benchmarks
    jitter = 1.4826 * np.median(np.abs(speeds - np.median(speeds)))
    return float(mean), float(ci), float(jitter)


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_matches_numpy(n: int) -> None:
    times = list(np.random.default_rng(n).uniform(0.05, 0.5, size=n))
    stats = throughput(times, 64)
    mean, ci, jitter = numpy_reference(times, 64)
    assert stats.mean == pytest.approx(mean, rel=1e-12)
    assert stats.ci == pytest.approx(ci, rel=1e-9, abs=1e-12)
    assert stats.jitter == pytest.approx(jitter, rel=1e-9, abs=1e-12)
    assert stats.steps == n
    assert stats.images == 64 * n
    assert stats.seconds == pytest.approx(sum(times))


def test_mean_is_total_images_over_total_time() -> None:
    stats = throughput([0.1, 0.2, 0.4], 32)
    assert stats.mean == pytest.approx(96 / 0.7)
    assert stats.images / stats.seconds == pytest.approx(stats.mean)


def test_constant_steps_have_no_spread() -> None:
    stats = throughput([0.25] * 10, 100)
    assert stats.mean == pytest.approx(400.0)
    assert stats.ci == pytest.approx(0.0, abs=1e-9)
    assert stats.jitter == pytest.approx(0.0, abs=1e-9)


def test_jitter_ignores_one_outlier() -> None:
    steady = throughput([0.1] * 9 + [0.1001], 10)
    spiky = throughput([0.1] * 9 + [5.0], 10)
    assert spiky.jitter == pytest.approx(steady.jitter, abs=1e-6)
    assert spiky.ci > steady.ci


@pytest.mark.parametrize(
    ("times", "images"),
    [([], 8), ([0.1, 0.0], 8), ([0.1, -1.0], 8), ([math.nan], 8), ([math.inf], 8), ([0.1], 0)],
)
def test_rejects_bad_input(times: list[float], images: int) -> None:
    with pytest.raises(ValueError):
        throughput(times, images)


def test_result_is_frozen() -> None:
    stats = throughput([0.1], 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.mean = 1.0  # type: ignore[misc]


def test_step_line_format() -> None:
    stats = Throughput(steps=10, images_per_step=8, seconds=1.0, mean=215.34, ci=0.49, jitter=1.23)
    assert (
        format_step_line(10, stats, 6.90812)
        == "10\timages/sec: 215.3 +/- 0.5 (jitter = 1.2)\t6.908"
    )


def test_total_block_and_header() -> None:
    assert DASHES == "-" * 64
    assert format_total(215.0851).split("\n") == [DASHES, "total images/sec: 215.09", DASHES]
    assert HEADER == "Step\tImg/sec\ttotal_loss"
