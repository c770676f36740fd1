"""`scalescope project` on a real scale study recorded here by `scalescope scale --ranks
1,2,3 --bench resnet18` (32×32 images, batch 8 per rank, one thread per rank) on this
2-core machine, so the 3-rank size is oversubscribed (3 ranks share 2 cores). The study is
recorded once for the module.

Validation: fitted on 1 and 2 ranks, the model predicts the held-out 3-rank throughput
within ``MAX_ERROR_PCT``. Timings of a run that other processes slowed are not its own, and
the model takes the cores to run at one speed, between them and from one size's run to the
next, which this VM's two vCPUs at times do not (one 26-48% slower for minutes,
``real_runs.MAX_CPU_SPEED_GAP_PCT``; measured by speedometers through the study): either way
the study is recorded again once, then the accuracy test is skipped with what it saw.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import torchvision
from machine import usable_cores
from real_runs import (
    CLI,
    MAX_CPU_SPEED_GAP_PCT,
    MAX_EXTERNAL_PCT,
    ExternalLoad,
    Speedometers,
    skip_or_fail,
    slower_pct,
)

from conftest import cli_env, figure, scalescope_in_process
from scalescope.events.study import ScalePoint, ScaleStudy, load_study, save_study

pytestmark = pytest.mark.timeout(900)
STUDY_RANKS = (1, 2, 3)
MAX_ERROR_PCT = 20.0
"""Of samples/s. The 3 ranks' compute over the 2 ranks' (the model's 1.5) varied from 1.21
to 1.64 between quiet studies here, speed premises met: a single oversubscribed run on 2
cores is not reproducible to better than that. Ten such studies, with the model's exposed
transfer calibrated on the reference (docs/project.md): errors -6.8, +1.5, +2.0, -2.9,
-0.4, +2.3, -4.2, +8.1, -16.8 and +15.5%; before that calibration up to +15.7%. On cores of their
own (``make gpu-check``'s 8-rank study) the bound is 15 %."""
SCALE = (
    "scale", "--ranks", ",".join(map(str, STUDY_RANKS)), "--bench", "resnet18",
    "--image-size", "32", "--batch-size", "8", "--steps", "15", "--warmup-steps", "3",
    "--threads-per-rank", "1", "--oversubscribe",
)  # fmt: skip


@dataclass
class Study:
    path: Path
    external_pct: float
    table: str
    """What `scale` printed."""
    speed_gap: str | None = None
    """How the cpus' speed was unequal during the study (speedometers), if it was."""

    @property
    def load_note(self) -> str | None:
        if self.external_pct <= MAX_EXTERNAL_PCT:
            return None
        return f"other processes used {self.external_pct:.0f}% of the CPUs during the study"

    @property
    def speed_note(self) -> str | None:
        return self.speed_gap and f"{self.speed_gap} (speedometers)"


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *map(str, args)], cwd=cwd, env=cli_env(), capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip


def record_study(root: Path) -> Study:
    meters = Speedometers([0, 1], root)
    with ExternalLoad() as load, meters:
        done = subprocess.run(
            [*CLI, *SCALE, "--study-dir", str(root)], cwd=root, env=cli_env(),
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return Study(root, load.pct, done.stdout, speed_gap(meters, root))


def speed_gap(meters: Speedometers, root: Path) -> str | None:
    """Why the cpus did not run at one speed through the study: one slower than the other,
    or one slower during one size's run than during another's (each size is a run of its
    own: a VM slowed 25% for the 1- and 2-rank runs only made the 3-rank prediction 16% off)."""
    gap = slower_pct(*meters.work_s.values())
    if gap > MAX_CPU_SPEED_GAP_PCT:
        return f"one cpu was {gap:.0f}% slower than the other during the study"
    windows = []
    for point in load_study(root).points:
        run = json.loads((root / point.run_dir / "run.json").read_text())
        windows.append((run["start_time"], run["end_time"]))
    for cpu in meters.cpus:
        by_size = [meters.work_s_between(cpu, start, end) for start, end in windows]
        measured = [s for s in by_size if s is not None]
        if len(measured) < len(by_size):
            return f"cpu {cpu}'s speed was not measured during every size's run"
        gap = slower_pct(*measured)
        if gap > MAX_CPU_SPEED_GAP_PCT:
            return f"cpu {cpu} ran {gap:.0f}% slower during one size's run than another's"
    return None


def test_the_study_is_scales_own_with_the_oversubscribed_size_marked(study: Study):
    """3 ranks of one thread are oversubscribed on 2 cores, not on 4."""
    cores = usable_cores()
    points = load_study(study.path).points
    assert [(p.ranks, p.status, p.oversubscribed) for p in points] == [
        (n, "ok", n > cores) for n in STUDY_RANKS
    ]
    marked = "3 ranks oversubscribed: 3 ranks × 1 threads exceed" in " ".join(study.table.split())
    assert marked == (STUDY_RANKS[-1] > cores), study.table


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Study:
    recorded = record_study(tmp_path_factory.mktemp("study-a"))
    if recorded.load_note is None and recorded.speed_note is None:
        return recorded
    return record_study(tmp_path_factory.mktemp("study-b"))


def bench_rate(run_dir: Path) -> float:
    """Samples/s by the workload's own clock (bench.json), after its warm-up."""
    bench = json.loads((run_dir / "bench.json").read_text())
    steps = bench["step_times_s"][bench["warmup_steps"] :]
    return bench["global_batch_size"] / statistics.fmean(steps)


def test_validation_predicts_the_held_out_size(study: Study, tmp_path):
    out = tmp_path / "validation.json"
    done = cli("project", "--validate", study.path, "--json", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    print(done.stdout, study.speed_note or "the cpus ran at one speed through the study")
    doc = json.loads(out.read_text())
    assert doc["fitted_ranks"] == [1, 2]
    (held,) = doc["held_out"]
    assert held["ranks"] == 3 and held["reference_ranks"] == 2
    assert f"{held['error_pct']:+.1f}%" in done.stdout
    # the measured side is the run's own: the workload's clock agrees with the probe's
    measured = bench_rate(study.path / "ranks-3")
    assert held["measured_samples_per_s"] == pytest.approx(measured, rel=0.1)
    error = 100 * (held["predicted_samples_per_s"] / measured - 1)
    assert held["terms"]["compute_ms"] > 0 and held["terms"]["exposed_ms"] > 0
    if study.speed_note is not None:  # the VM's vCPUs, which no scheduling of tests controls
        pytest.skip(f"{study.speed_note}; error was {error:+.1f}%")
    if study.load_note is not None:
        skip_or_fail(f"{study.load_note}; error was {error:+.1f}%")
    figure("project --validate, held-out samples/s error", error, 0.0, MAX_ERROR_PCT, "%")
    assert abs(error) <= MAX_ERROR_PCT, done.stdout


def test_projection_of_a_run_reproduces_it_at_its_own_size(study: Study, tmp_path):
    out = tmp_path / "project.json"
    run = study.path / "ranks-2"
    done = cli("project", run, "--nodes", "1,2,4", "--json", out, "--epoch-samples", 1000,
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    own, two, four = doc["points"]
    assert [p["ranks"] for p in doc["points"]] == [2, 4, 8]
    assert own["samples_per_s"] == pytest.approx(16 / (own["step_ms"] / 1e3))
    assert own["epoch_s"] == pytest.approx(63 * own["step_ms"] / 1e3)  # 1000 / 16, rounded up
    resnet18 = torchvision.models.resnet18(num_classes=1000)
    assert sum(doc["inputs"]["buckets"]) == 4 * sum(p.numel() for p in resnet18.parameters())
    assert own["samples_per_s"] == pytest.approx(bench_rate(run), rel=0.2)
    assert four["terms"]["exposed_ms"] >= two["terms"]["exposed_ms"]
    assert json.loads((run / "projection.json").read_text()) == doc
    if study.load_note is None:
        assert four["efficiency"] <= 1.0


def test_a_study_is_projected_from_its_largest_size(study: Study, tmp_path):
    out = tmp_path / "project.json"
    done = scalescope_in_process("project", study.path, "--nodes", "1,2", "--json", out,
                                 cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "projected from the study's largest completed size: 3 ranks" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["run_dir"] == str(study.path / "ranks-3") and doc["points"][0]["ranks"] == 3
    assert json.loads((study.path / "ranks-3" / "projection.json").read_text()) == doc


def test_the_run_dashboard_shows_the_stored_projection(study: Study, tmp_path):
    run = study.path / "ranks-2"
    done = scalescope_in_process("project", run, "--nodes", "1,2,3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {run / 'projection.json'}" in done.stderr.replace("\n", "")
    page = tmp_path / "report.html"
    done = scalescope_in_process("report", run, "--html", page, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert 'id="chart-projection" data-chart' in text and '<table id="projected-sizes">' in text
    stored = json.loads((run / "projection.json").read_text())
    assert [p["nodes"] for p in stored["points"]] == [1, 2, 3]
    for p in stored["points"]:
        assert f'<td class="num">{p["samples_per_s"]:,.1f}</td>' in text


def test_a_run_directory_that_cannot_hold_the_projection_is_a_warning(study: Study, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(study.path / "ranks-2", run, ignore=shutil.ignore_patterns("projection.json"))
    (run / "projection.json").mkdir()
    out = tmp_path / "p.json"
    done = scalescope_in_process("project", run, "--nodes", "1,2", "--json", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning: the projection was not stored in" in done.stderr.replace("\n", " ")
    assert json.loads(out.read_text())["points"]


def test_other_hardware_and_the_html_page(study: Study, tmp_path):
    page = tmp_path / "project.html"
    done = cli("project", study.path / "ranks-1", "--nodes", "1,128", "--hardware", "a64fx",
               "--comm", write_fits(tmp_path), "--html", page, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "a64fx, 4 ranks per node" in done.stdout and "bound" in done.stdout
    text = page.read_text()
    assert 'id="chart-project-throughput"' in text and '<table id="projection">' in text


def write_fits(root: Path) -> Path:
    fit = {"op": "all_reduce", "backend": "gloo", "world_size": 2, "alpha_s": 20e-6,
           "beta_s_per_byte": 1e-9, "rel_err": 0.02, "num_points": 8, "min_bytes": 8,
           "max_bytes": 1 << 26}  # fmt: skip
    path = root / "comm.json"
    path.write_text(json.dumps({"fits": [fit]}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a RUN_DIR to project, or --validate STUDY_DIR"),
        (("RUN", "--nodes", "1,two"), "--nodes takes numbers like 1,2,4, got '1,two'"),
        (("RUN", "--hardware", "tpu[v9]"), "unknown hardware 'tpu[v9]'"),
        (("RUN", "--global-batch", "3", "--nodes", "2"), "--global-batch 3 is smaller than 4"),
        (("RUN", "--hardware", "v100", "--per-rank-batch", "100000"), "GB per rank; v100"),
        (("RUN1",), "a 1-rank run measured no gradient transfers"),
        (("RUN", "--comm", "missing.json"), "not a scalescope comm JSON"),
        (("--validate", "RUN"), "no scale.json"),
        (("nowhere",), "is not a scalescope run directory"),
    ],
)
def test_bad_input_fails_with_one_line(study: Study, tmp_path, args, message):
    runs = {"RUN": study.path / "ranks-2", "RUN1": study.path / "ranks-1"}
    done = scalescope_in_process("project", *(runs.get(a, a) for a in args), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr.replace("\n", " ")
    assert "Traceback" not in done.stderr


def test_validation_needs_a_size_to_fit_on(study: Study, tmp_path):
    save_study(ScaleStudy(points=[ScalePoint(ranks=3, run_dir=str(study.path / "ranks-3"))]),
               tmp_path)  # fmt: skip
    done = cli("project", "--validate", tmp_path, cwd=tmp_path)
    assert done.returncode == 2 and "needs at least one more to fit on" in done.stderr
