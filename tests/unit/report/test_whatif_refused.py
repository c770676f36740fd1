"""A cause the what-if's model refuses is one line, and the rest of the what-if stays: the
recorded slowed link (tests/data/runs/slowdown_link) with an alert planted beside the real
one, whose link (inside host2) has no group of its shape; and a run the model holds no step
of says why in the report instead of dropping the section."""

from __future__ import annotations

import io
import json
import shutil

import msgspec
import numpy as np
import pytest
from recorded_runs import RUNS
from rich.console import Console

from scalescope.analyze.model.replay import ReplayRefused
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.whatif import what_if_of
from scalescope.diagnose.recording import Recording
from scalescope.report.media.report_json import report_json
from scalescope.report.views.run_terminal import render_terminal

LINK = RUNS / "slowdown_link" / "run"
INSIDE_HOST2 = "no group smaller than the world ran over the link 'host2'"


def terminal(analysis) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    render_terminal(analysis, console)
    return console.file.getvalue()


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Recording:
    """The recorded run with a second onset planted in its alerts.jsonl: a slow link inside
    host2 (``link:host2``), which no group smaller than the world lies on."""
    run_dir = tmp_path_factory.mktemp("planted") / "run"
    shutil.copytree(LINK, run_dir)
    alerts = run_dir / "alerts.jsonl"
    real = json.loads(alerts.read_text().splitlines()[0])
    bad = {**real, "id": 2, "ranks": [2], "nodes": ["host2"], "message": "planted"}
    alerts.write_text(alerts.read_text() + json.dumps(bad) + "\n")
    return Recording.load(run_dir)


def test_a_refused_alert_cause_is_one_entry_and_the_other_fixes_stay(planted):
    whatif = planted.analysis.whatif
    assert whatif is not None and planted.analysis.whatif_missing is None
    ((cause, why),) = whatif.refused
    assert cause == "link:host2" and why.startswith(INSIDE_HOST2) and "\n" not in why
    gains = {f.cause: f.gain_ms for f in whatif.fixes}
    assert "link:host2" not in gains and gains["link:host0,host1"] > 0
    assert whatif.slowdown is not None
    real, planted_cost = planted.analysis.slowdowns
    assert real.fix_gain_ms == gains["link:host0,host1"] and planted_cost.fix_gain_ms is None


def test_the_findings_keep_their_replayed_savings(planted):
    clean = Recording.load(LINK)
    assert [f.saved_ms_per_step for f in planted.findings] == [
        f.saved_ms_per_step for f in clean.findings
    ]
    assert any("replayed without it" in f.basis for f in planted.findings)


def test_the_report_prints_the_refused_cause_as_one_line_and_the_json_carries_it(planted):
    text = terminal(planted.analysis)
    (line,) = [t for t in text.splitlines() if t.startswith("link:host2: not replayed: ")]
    assert INSIDE_HOST2 in line
    assert "What fixing each cause buys" in text and "│ link:host0,host1 " in text
    doc = json.loads(msgspec.json.encode(report_json(planted.analysis, None)))
    assert doc["whatif"]["refused"] == [["link:host2", line.split("not replayed: ", 1)[1]]]
    assert doc["whatif_missing"] is None


def test_a_run_the_model_holds_no_step_of_says_why():
    rec = Recording.load(RUNS / "compute_resnet50" / "run")
    assert rec.analysis.whatif is None
    assert rec.analysis.whatif_missing == "fewer than two ranks recorded steps"
    text = terminal(rec.analysis)
    assert "Nothing replayed: fewer than two ranks recorded steps." in text
    doc = json.loads(msgspec.json.encode(report_json(rec.analysis, None)))
    assert doc["whatif"] is None and doc["whatif_missing"] == rec.analysis.whatif_missing


def ring_grid(blocking_sends: bool) -> StepGrid:
    """Three stages in a ring, each sending to the next, then receiving from the one before;
    with every send blocking, each waits for a receive that comes after the next one's own
    blocking send: no order completes the step."""
    shape = (2, 3, 2)
    blocking = np.ones(shape, dtype=bool)
    blocking[:, :, 0] = blocking_sends
    return StepGrid(
        steps=np.arange(2), ranks=np.arange(3), group=np.array([[1, 3], [2, 1], [3, 2]]),
        work_ns=np.full(shape, 1e6), blocking=blocking, transfer_ns=np.full(shape, 1e6),
        prejoin_ns=np.zeros((2, 3)), post_ns=np.zeros((2, 3)), joins=np.zeros((2, 3), bool),
        gap_ns=np.zeros((2, 3)), step_ns=np.full((2, 3), 4e6), samples=np.ones((2, 3)),
    )  # fmt: skip


def test_only_a_model_that_cannot_replay_its_own_steps_refuses_the_whole_what_if():
    fine = what_if_of(ring_grid(False), [], {}, 0, ["rank:9", "rank:1"])
    assert [f.cause for f in fine.fixes] == ["rank:1"]
    assert fine.refused == (("rank:9", "rank 9 is not in the model (ranks 0-2)"),)
    with pytest.raises(ReplayRefused, match="^step 0: its collectives wait on each other$"):
        what_if_of(ring_grid(True), [], {}, 0, ["rank:1"])
