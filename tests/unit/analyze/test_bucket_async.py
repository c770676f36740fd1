"""DDP's gradient buckets are asynchronous whatever their timing (step_grid.issued_async). A
rank late enough to hold every bucket back, by less than backward's work between two
buckets, has each bucket complete before the next one's issue on every rank in every step:
read as blocking by timing alone, the replay of that rank at the others' pace had the others
issue their next bucket as soon as the last one completed, the backward in between lost, and
fixing the rank gained more than the run without it (benchmarks/synthetic_run.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.model.step_grid import issued_async  # noqa: E402
from scalescope.diagnose.recording import Recording  # noqa: E402
from synthetic_run import Plant, write_run  # noqa: E402


def test_a_bucket_followed_by_another_is_asynchronous_the_last_left_to_its_timing() -> None:
    tags = np.array([["buffers", "gradients", "gradients", "gradients", "user"]] * 2)
    assert issued_async(tags).tolist() == [[False, True, True, False, False]] * 2


def test_a_slow_rank_s_replayed_fix_gains_what_the_run_without_it_does(tmp_path) -> None:
    """16 ranks, rank 5 computing 16 % slower: each bucket waits ~8 ms for it, ~17 ms of
    backward between two buckets (read as blocking: 17.8 ms replayed against 11.3 ms)."""
    planted = write_run(tmp_path / "planted", 16, 12, Plant("slow_rank", 5, 1.16), seed=7)
    clean = write_run(tmp_path / "clean", 16, 12, None, seed=7)
    fixed = Recording.load(tmp_path / "planted").what_if(["rank:5"])
    assert fixed is not None
    assert fixed.fixes[0].gain_ms == pytest.approx(planted.step_ms - clean.step_ms, rel=0.1)
