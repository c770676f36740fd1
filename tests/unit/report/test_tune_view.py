"""The tune table, summary and JSON, rendered to a fixed-width console."""

from __future__ import annotations

import io
import json
import statistics
from dataclasses import replace

import pytest
from rich.console import Console
from tune_results import confirm_run, tune_result

from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render
from scalescope.report.views.tune import tune_json

EVIL = "[bold]<script>alert(1)</script>"


def rendered(result) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, color_system=None)
    render_document(render(result, "terminal"), console)
    return out.getvalue()


def test_table_ranks_by_samples_per_s_with_speedup_and_flags() -> None:
    text = rendered(tune_result())
    lines = [line for line in text.splitlines() if line.startswith("│")]
    numbers = [line.split("│")[1].strip() for line in lines if line.split("│")[1].strip()]
    assert numbers == ["2", "1", "0", "3"]
    assert "150.0 samples/s" in lines[0] and "1.50x" in lines[0]
    assert "changes the numerics: bfloat16 autocast" in lines[0]
    assert "1.25x" in lines[1] and "1.00x" in lines[2]
    assert "failed" in lines[3] and "RuntimeError: x" in lines[3]
    assert "best: trial 2, median 150.0 samples/s of 1 run (1.50x the baseline's median" in text
    assert "no significant gain" not in text
    assert "note: the best configuration changes the numerics: bfloat16 autocast" in text
    assert "scalescope run t.py --tag=x" in text


def confirmed():
    """Trial 2 (150 once) re-measures at 96 and 98; trial 1 at 130, 128; the baseline at
    110 and 90."""
    runs = ((0, 1, 110.0), (2, 1, 96.0), (1, 1, 130.0), (1, 2, 128.0), (2, 2, 98.0), (0, 2, 90.0))
    return tune_result(confirmations=tuple(confirm_run(*r) for r in runs))


def test_confirmed_table_shows_runs_and_medians() -> None:
    text = rendered(confirmed())
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()]
    rows = {r[0]: r for r in rows if r and r[0].isdigit()}
    base = statistics.median([100.0, 110.0, 90.0])
    for trial, values in {"1": [125.0, 130.0, 128.0], "2": [150.0, 96.0, 98.0]}.items():
        median = statistics.median(values)
        assert rows[trial][2:5] == ["3", f"{median:,.1f} samples/s", f"{median / base:.2f}x"]
    assert rows["0"][2:5] == ["3", f"{base:,.1f} samples/s", "1.00x"]
    assert "best: trial 1, median 128.0 samples/s of 3 runs (1.28x the baseline's median;" in text
    assert "baseline spread 20.0 samples/s over 3 runs" in text  # 110 - 90
    assert "no significant gain" not in text  # 128 - 100 > 20


def test_a_gain_within_the_spread_is_not_recommended() -> None:
    runs = ((0, 1, 140.0), (0, 2, 60.0), (2, 1, 120.0), (2, 2, 118.0), (1, 1, 70.0))
    result = tune_result(confirmations=tuple(confirm_run(*r) for r in runs))
    result = replace(result, reuse="")  # what the search leaves when nothing is recommended
    text = rendered(result)
    assert "best: trial 2, median 120.0 samples/s of 3 runs" in text
    assert "no significant gain: keep the configuration as given" in text
    assert "reuse it with" not in text and "changes bfloat16" not in text.split("best:")[1]
    doc = json.loads(tune_json(result))
    assert doc["best_trial"] == 2 and doc["recommended_trial"] is None
    assert doc["baseline_spread"] == 140.0 - 60.0
    assert "no significant gain" in render(result, "html")


def test_user_strings_print_verbatim() -> None:
    text = rendered(tune_result(EVIL))
    assert f"--tag={EVIL}" in text


def test_json_has_every_trial() -> None:
    doc = json.loads(tune_json(tune_result()))
    assert [t["number"] for t in doc["trials"]] == [2, 1, 0, 3]
    best = doc["trials"][0]
    assert best["speedup"] == 1.5 and best["changes"] == ["the numerics: bfloat16 autocast"]
    assert doc["unit"] == "samples/s" and doc["required_runs"] == 1
    assert doc["recommended_runs"] == 1 and doc["recommended_speedup"] == 1.5
    assert doc["best_trial"] == 2 and doc["trials"][3]["samples_per_s"] is None
    assert doc["space"]["bucket_cap_mb"] == [5.0, 25.0]
    assert best["measurements"] == [150.0] and best["median"] == 150.0
    assert doc["confirmations"] == [] and doc["recommended_trial"] == 2


def test_json_has_the_confirmation_runs_and_medians() -> None:
    doc = json.loads(tune_json(confirmed()))
    assert [t["number"] for t in doc["trials"]] == [1, 0, 2, 3]
    assert len(doc["confirmations"]) == 6
    assert doc["confirmations"][1] == {
        "trial": 2, "round": 1, "status": "ok", "samples_per_s": 96.0, "unit": "samples/s",
        "seconds": 2.0, "run_dir": "trials/c-2-1", "error": None, "samples_per_step": None,
    }  # fmt: skip
    trial = {t["number"]: t for t in doc["trials"]}
    assert trial[2]["measurements"] == [150.0, 96.0, 98.0] and trial[2]["median"] == 98.0
    assert trial[1]["speedup"] == pytest.approx(128.0 / 100.0)
    assert doc["best_trial"] == doc["recommended_trial"] == 1


def test_a_leader_short_of_runs_is_named_but_not_recommended() -> None:
    """Trial 2 (150 once) leads by median with one run of three: trial 1 is recommended."""
    runs = ((0, 1, 110.0), (1, 1, 130.0), (1, 2, 128.0), (0, 2, 90.0))
    result = replace(confirmed(), confirmations=tuple(confirm_run(*r) for r in runs))
    result = replace(result, required_runs=3)
    text = rendered(result)
    assert "best: trial 1, median 128.0 samples/s of 3 runs" in text
    assert "not recommended: trial 2 has a higher median (150.0 samples/s) but 1 of 3" in text
    doc = json.loads(tune_json(result))
    assert doc["recommended_trial"] == 1 and doc["recommended_runs"] == 3
    assert doc["required_runs"] == 3


def test_html_escapes_user_strings() -> None:
    page = render(tune_result(EVIL), "html")
    assert "<script>alert(1)" not in page.replace("<script>window", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'id="chart-trials"' in page and 'id="chart-knobs"' in page


def test_the_knobs_the_layout_left_out_are_one_line_in_the_output_and_the_json() -> None:
    from scalescope.tune.space import SpaceContext, left_out_note

    note = left_out_note(None, SpaceContext(nproc=2, cores=8, bench=True, fsdp=True))
    result = replace(tune_result(), notes=(note,))
    text = rendered(result)
    assert "note: left out for this FSDP2 job: channels_last (FSDP2 cannot shard the " in text
    assert json.loads(tune_json(result))["notes"] == [note]
    assert "left out" not in rendered(tune_result()), "nothing left out, nothing said"
