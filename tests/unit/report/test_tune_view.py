"""The tune table, summary and JSON, rendered to a fixed-width console."""

from __future__ import annotations

import io
import json

from rich.console import Console
from tune_results import tune_result

from scalescope.report.tune_html import render_tune_html
from scalescope.report.tune_view import render_tune, tune_json

EVIL = "[bold]<script>alert(1)</script>"


def rendered(result) -> str:
    out = io.StringIO()
    render_tune(result, Console(file=out, width=200, highlight=False, color_system=None))
    return out.getvalue()


def test_table_ranks_by_samples_per_s_with_speedup_and_flags() -> None:
    text = rendered(tune_result())
    lines = [line for line in text.splitlines() if line.startswith("│")]
    numbers = [line.split("│")[1].strip() for line in lines if line.split("│")[1].strip()]
    assert numbers == ["2", "1", "0", "3"]
    assert "150.0 samples/s" in lines[0] and "1.50x" in lines[0]
    assert "changes bfloat16 autocast" in lines[0]
    assert "1.25x" in lines[1] and "1.00x" in lines[2]
    assert "failed" in lines[3] and "RuntimeError: x" in lines[3]
    assert "best: trial 2, 150.0 samples/s (1.50x the baseline)" in text
    assert "note: the best configuration changes bfloat16 autocast" in text
    assert "scalescope run t.py --tag=x" in text


def test_user_strings_print_verbatim() -> None:
    text = rendered(tune_result(EVIL))
    assert f"--tag={EVIL}" in text


def test_json_has_every_trial() -> None:
    doc = json.loads(tune_json(tune_result()))
    assert [t["number"] for t in doc["trials"]] == [2, 1, 0, 3]
    best = doc["trials"][0]
    assert best["speedup"] == 1.5 and best["changes"] == ["bfloat16 autocast"]
    assert doc["best_trial"] == 2 and doc["trials"][3]["samples_per_s"] is None
    assert doc["space"]["bucket_cap_mb"] == [5.0, 25.0]


def test_html_escapes_user_strings() -> None:
    page = render_tune_html(tune_result(EVIL))
    assert "<script>alert(1)" not in page.replace("<script>window", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'id="chart-trials"' in page and 'id="chart-knobs"' in page
