"""`scalescope run` of a 2-rank GPT-style script: each rank records its model's layer kinds,
and the compute remedies for that run leave out the convolution advice."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from analysed import analysed  # noqa: E402

from conftest import SCRIPTS, scalescope
from scalescope.diagnose import DEFAULT_THRESHOLDS
from scalescope.diagnose.engine import diagnosis_input
from scalescope.diagnose.rules_compute import ComputeRule
from scalescope.events.run import load_run, read_rank_meta


@pytest.mark.heavy
def test_a_transformer_run_records_attention_and_no_convolution(tmp_path: Path) -> None:
    proc = scalescope(
        "run", "-n", "2", "--run-dir", tmp_path / "run", "--no-report",
        SCRIPTS / "gpt_train.py", "--steps", "4", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        shares = read_rank_meta(tmp_path / "run", rank).layer_shares
        assert shares is not None, f"rank {rank} recorded no layer shares"
        assert shares["attention"] > 20 and shares["linear"] > 20
        assert shares["embedding"] > 0 and shares["normalization"] > 0
        assert "convolution" not in shares
        assert sum(shares.values()) == pytest.approx(100, abs=0.05)
    run = load_run(tmp_path / "run")
    assert run.ranks[0].layer_shares == read_rank_meta(tmp_path / "run", 0).layer_shares
    any_share = dataclasses.replace(DEFAULT_THRESHOLDS, compute_share_pct=0.01)
    finding = ComputeRule().evaluate(diagnosis_input(run, analysed(run), any_share))
    text = " ".join(finding.remedies)
    assert "channels" not in text and "scaled_dot_product_attention" in text
