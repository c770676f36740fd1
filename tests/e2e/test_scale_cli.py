"""`scalescope scale` with real ranks: a table whose samples/s are the runs' own, and a size
that cannot start (one rank more than this machine's cores) recorded as failed while the
others report."""

from __future__ import annotations

import msgspec
import pytest
from analysed import analysed  # noqa: E402
from machine import counted, usable_cores
from table_text import header_columns

from conftest import DDP_TRAIN, scalescope, scalescope_in_process
from scalescope.events import Kind, load_run
from scalescope.events.study import ScalePoint, ScaleStudy, load_study, save_study
from scalescope.report.media.report_json import report_json

BATCH, STEPS, WARMUP = 4, 8, 2
CORES = usable_cores()
TOO_MANY = CORES + 1


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    proc = scalescope(
        "scale", "--ranks", f"1,2,{TOO_MANY}", "--batch-size", BATCH, "--warmup-steps", WARMUP,
        "--threads-per-rank", 1, "--bind-to", "core", "--study-dir", tmp / "study",
        "--html", tmp / "scale.html", "--", DDP_TRAIN, "--steps", STEPS, "--batch-size", "{batch}",
        cwd=tmp,
    )  # fmt: skip
    return proc, tmp


def test_failed_size_is_recorded_and_the_others_report(study):
    proc, tmp = study
    assert proc.returncode == 1, proc.stderr  # one size failed
    s = load_study(tmp / "study")
    assert [(p.ranks, p.status) for p in s.points] == [(1, "ok"), (2, "ok"), (TOO_MANY, "failed")]
    too_many = f"{TOO_MANY} ranks × 1 thread = {TOO_MANY} > {counted(CORES, 'core')}"
    assert too_many in s.points[2].error
    assert f"{TOO_MANY} ranks failed: {too_many}" in " ".join(proc.stdout.split())
    assert s.mode == "weak" and s.workload == str(DDP_TRAIN)
    assert [p.per_rank_batch for p in s.points] == [BATCH] * 3


def test_samples_per_s_are_the_runs_own(study):
    proc, tmp = study
    s = load_study(tmp / "study")
    for p in s.points[:2]:
        run = load_run(tmp / "study" / p.run_dir)
        assert run.meta.world_size == p.ranks
        doc = report_json(analysed(run), None)
        assert p.samples_per_s == doc["steps"]["samples_per_s"]
        assert p.step_ms == doc["steps"]["mean_step_ms"]
        ev = run.events
        steps = ev.select(ev.kind == Kind.STEP)
        assert set(steps.count.tolist()) == {BATCH}  # each rank's samples per step
        assert len(steps) == STEPS * p.ranks
        assert f"{p.samples_per_s:,.1f}" in proc.stdout


def test_speedup_efficiency_and_breakdown(study):
    proc, tmp = study
    s = load_study(tmp / "study")
    one, two = s.points[0], s.points[1]
    speedup = two.samples_per_s / one.samples_per_s
    row = next(line for line in proc.stdout.splitlines() if line.strip("│ ").startswith("2 "))
    assert f"{speedup:.2f}" in row and f"{100 * speedup / 2:.0f}" in row
    cores = msgspec.json.decode((tmp / "study" / "ranks-2" / "run.json").read_bytes())
    assert two.oversubscribed == (2 * two.threads_per_rank > cores["hardware"]["usable_cores"])
    (columns,) = header_columns(proc.stdout)
    for col in ("compute (ms)", "exposed comm (ms)", "waiting (ms)", "data (ms)"):
        assert col in columns, columns


def test_dashboard_page_has_the_scaling_charts(study):
    _, tmp = study
    page = (tmp / "scale.html").read_text()
    assert 'id="chart-scale-throughput"' in page and 'id="chart-scale-breakdown"' in page
    assert f"{TOO_MANY} ranks failed" in page


def test_breakdown_per_size_from_each_runs_analysis(study):
    _, tmp = study
    from scalescope.api.reporting import study_table

    table = study_table(tmp / "study", load_study(tmp / "study"))
    one, two, three = table.rows
    assert one.breakdown.compute_ms > 0 and one.breakdown.waiting_ms is None
    assert two.breakdown.compute_ms > 0 and two.breakdown.waiting_ms is not None
    assert two.breakdown.compute_ms < two.step_ms
    assert three.breakdown is None and three.speedup is None and three.status == "failed"


def test_report_re_renders_the_study(study, tmp_path):
    proc, tmp = study
    again = scalescope(
        "report", tmp / "study", "--html", tmp_path / "again.html", cwd=tmp_path, timeout=120
    )
    assert again.returncode == 0, again.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith(("┃", "│"))]
    assert table and all(line in again.stdout for line in table)
    assert 'id="chart-scale-throughput"' in (tmp_path / "again.html").read_text()


@pytest.mark.heavy
def test_a_size_that_crashes_mid_run_is_marked_and_keeps_its_steps(tmp_path):
    """Rank 1 raises at step 3: the 1-rank size has no rank 1 and completes; the 2-rank size
    starts, records its first steps, and is marked failed with the rank's own error."""
    proc = scalescope(
        "scale", "--ranks", "1,2", "--batch-size", BATCH, "--warmup-steps", 1,
        "--threads-per-rank", 1, "--study-dir", tmp_path / "study", "--", DDP_TRAIN,
        "--steps", STEPS, "--batch-size", "{batch}", "--fail-rank", 1, "--fail-step", 3,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    one, two = load_study(tmp_path / "study").points
    assert (one.status, two.status) == ("ok", "failed")
    assert "deliberate failure on rank 1 at step 3" in two.error
    assert "2 ranks failed: " in proc.stdout and "deliberate failure on rank 1" in proc.stdout
    ev = load_run(tmp_path / "study" / "ranks-2").events
    steps = ev.select(ev.kind == Kind.STEP)
    assert set(steps.step[steps.rank == 1].tolist()) >= {0, 1, 2}


def test_project_refuses_a_study_with_no_completed_size(tmp_path):
    """Through the CLI: one line, exit 2, the study left as it was."""
    failed = ScalePoint(ranks=TOO_MANY, status="failed", error=f"{TOO_MANY} > {CORES} cores")
    save_study(ScaleStudy(workload="w", points=[failed]), tmp_path / "study")
    before = sorted((p, p.read_bytes()) for p in (tmp_path / "study").rglob("*"))
    done = scalescope_in_process(
        "project", tmp_path / "study", "--nodes", "1,2", "--json", tmp_path / "p.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith("the scale study has no completed size to project from"), line
    assert str(tmp_path / "study") in line
    assert sorted((p, p.read_bytes()) for p in (tmp_path / "study").rglob("*")) == before
    assert not (tmp_path / "p.json").exists()
