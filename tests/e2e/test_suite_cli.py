"""`scalescope suite` through the CLI: one `--quick` run of four workloads checked many ways,
the table of all six on a recorded suite, a failing run, and bad input. Analytics results are
checked against scikit-learn on the same rows."""

from __future__ import annotations

import json
import math
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import scalescope, scalescope_in_process, start_scalescope
from scalescope.analyze.columns.slot_index import measured_steps
from scalescope.bench.tables import make_rows
from scalescope.events import Kind, load_run
from scalescope.events.run import rank_meta_path

pytestmark = pytest.mark.timeout(900)

sklearn = pytest.importorskip("sklearn")
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.svm import LinearSVC  # noqa: E402

WORKLOADS = ("resnet50", "lstm", "transformer", "pca", "kmeans", "svm")
LIVE = ("pca", "svm")
"""What CI runs live (two 2-rank runs against six): one workload without steps and one with,
both checked against scikit-learn. The six together (the sequence models' tokens and losses,
k-means against scikit-learn among them) run in ``make bench``
(benchmarks/live/test_suite_quick_all.py, the same checks); CI checks the table of all six
on a recorded suite (``RECORDED``)."""
RECORDED = Path(__file__).resolve().parents[1] / "data" / "suites" / "quick"
"""``suite --quick`` of all six, recorded by tests/data/record.py suite_quick: its suite.json,
the table it printed (table.txt) and each workload's own record."""
UNITS = {"resnet50": "images/s", "lstm": "tokens/s", "pca": "rows/s"}
CI_BUDGET_S = 180


def run_quick(tmp: Path, workloads: tuple[str, ...]):
    """``suite --quick --workloads …`` in ``tmp``: its process, its JSON, its folder, its wall."""
    begin = time.monotonic()
    proc = scalescope(
        "suite", "--quick", "--workloads", ",".join(workloads), "--suite-dir", tmp / "suite",
        "--json", tmp / "suite.json", cwd=tmp, timeout=600,
    )  # fmt: skip
    wall_s = time.monotonic() - begin
    print(f"\nscalescope suite --quick took {wall_s:.1f} s (CI budget {CI_BUDGET_S} s)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp / "suite.json").read_text())
    return proc, doc, tmp / "suite", wall_s


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_quick(tmp_path_factory.mktemp("suite"), LIVE)


def _entry(doc: dict, workload: str, ranks: int = 2) -> dict:
    return next(e for e in doc["entries"] if e["workload"] == workload and e["ranks"] == ranks)


def _record(suite_dir, workload: str, ranks: int = 2) -> dict:
    return json.loads((suite_dir / f"{workload}-n{ranks}" / "workload.json").read_text())


def _row(table: str, workload: str) -> str:
    return next(x for x in table.splitlines() if x.startswith(f"│ {workload} "))


def check_one_table(quick, workloads: tuple[str, ...]) -> None:
    proc, doc, suite_dir, wall_s = quick
    assert [e["workload"] for e in doc["entries"]] == list(workloads)
    assert all(e["status"] == "completed" and e["error"] is None for e in doc["entries"])
    assert doc == json.loads((suite_dir / "suite.json").read_text())
    for workload in (w for w in workloads if w in UNITS):
        line = _row(proc.stdout, workload)
        assert UNITS[workload] in line and " ok " in line
    if wall_s > CI_BUDGET_S:  # a shared, loaded machine; CI has the cores to itself
        warnings.warn(f"suite --quick took {wall_s:.0f} s, over the CI budget", stacklevel=1)


def check_time_and_throughput(quick, workloads: tuple[str, ...]) -> None:
    _, doc, suite_dir, _ = quick
    if "resnet50" in workloads:
        bench = json.loads((suite_dir / "resnet50-n2" / "bench.json").read_text())
        measured = bench["step_times_s"][bench["warmup_steps"] :]
        resnet = _entry(doc, "resnet50")
        assert resnet["time_s"] == pytest.approx(sum(measured))
        assert resnet["throughput"] == pytest.approx(len(measured) * 2 * 2 / sum(measured))
        assert resnet["size"] == 32 and bench["image_size"] == 32
    for workload in (w for w in workloads if w != "resnet50"):
        record, entry = _record(suite_dir, workload), _entry(doc, workload)
        assert entry["throughput"] == pytest.approx(record["items"] / record["time_s"])
        assert entry["throughput_unit"] == record["unit"] + "/s"
    if "lstm" in workloads:
        lstm = _record(suite_dir, "lstm")["options"]
        tokens = (lstm["steps"] - lstm["warmup_steps"]) * lstm["batch_size"] * lstm["seq_len"]
        assert _record(suite_dir, "lstm")["items"] == tokens * 2


def check_sequence_models_trained(quick, workloads: tuple[str, ...]) -> None:
    """Both ranks trained from the untrained model's loss, ln(vocab) (a uniform guess), and
    ended on a finite one (tests/unit/bench/test_sequence_models.py: longer runs lower it)."""
    _, _, suite_dir, _ = quick
    for workload in (w for w in ("lstm", "transformer") if w in workloads):
        record = _record(suite_dir, workload)
        first, final = record["result"]["first_loss"], record["result"]["final_loss"]
        finite = [isinstance(v, float) and math.isfinite(v) for v in (first, final)]
        assert finite == [True, True], (workload, record["result"])  # NaN is written as null
        assert first == pytest.approx(math.log(record["options"]["vocab"]), rel=0.15)
        assert final < 1.5 * first


def test_quick_suite_runs_the_chosen_workloads_in_one_table(quick):
    check_one_table(quick, LIVE)


def test_a_recorded_quick_suite_prints_every_workload_in_one_table(tmp_path):
    """The table of all six workloads, re-rendered from the recorded suite.json: exactly what
    the suite printed, one ok row per workload in the suite's order, each in its unit."""
    doc = json.loads((RECORDED / "suite.json").read_text())
    assert [e["workload"] for e in doc["entries"]] == list(WORKLOADS)
    assert all(e["status"] == "completed" for e in doc["entries"])
    again = scalescope_in_process("report", RECORDED, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == (RECORDED / "table.txt").read_text()
    rows = [_row(again.stdout, w) for w in WORKLOADS]
    assert all(" ok " in row for row in rows)
    for workload, unit in UNITS.items():
        assert unit in rows[WORKLOADS.index(workload)]
    at = [again.stdout.index(row) for row in rows]
    assert at == sorted(at)


def test_time_and_throughput_are_the_workloads_own(quick):
    check_time_and_throughput(quick, LIVE)


def test_per_rank_split_comes_from_the_recorded_events(quick):
    _, doc, suite_dir, _ = quick
    for workload, warmup in [("svm", 1), ("pca", 0)]:
        run = load_run(suite_dir / f"{workload}-n2")
        steps = measured_steps(run.events, warmup).rows
        entry = _entry(doc, workload)
        assert [r["rank"] for r in entry["per_rank"]] == [0, 1]
        for split in entry["per_rank"]:
            mine = steps.select(steps.rank == split["rank"])
            if workload == "pca":  # no optimizer: the span of the rank's chunks and allreduce
                mine = run.events.select(run.events.rank == split["rank"])
                assert split["steps"] == 0
            else:
                assert split["steps"] == len(mine) > 0
            window = (mine.start_ns + mine.dur_ns).max() - mine.start_ns.min()
            assert split["window_s"] == pytest.approx(window / 1e9)
            assert 0 < split["collective_s"] <= split["window_s"]


def check_kmeans_is_an_ordinary_profiled_run(quick) -> None:
    """Every Lloyd update and the final inertia pass is one allreduce of sums, counts, inertia."""
    _, _, suite_dir, _ = quick
    run = load_run(suite_dir / "kmeans-n2")
    options = _record(suite_dir, "kmeans")["options"]
    assert run.meta.workload == "kmeans" and run.meta.world_size == 2
    colls = run.events.of_kind(Kind.COLLECTIVE)
    k, features = options["clusters"], options["features"]
    for rank in (0, 1):
        mine = colls.select((colls.rank == rank) & colls.where("name", "all_reduce"))
        assert len(mine) == options["iterations"] + 1
        assert set(mine.nbytes.tolist()) == {(k * features + k + 1) * 8}


def test_pca_matches_scikit_learn(quick):
    _, _, suite_dir, _ = quick
    record = _record(suite_dir, "pca")
    o, result = record["options"], record["result"]
    rows = make_rows("pca", 0, o["rows"], o["features"], 1, o["seed"]).numpy()
    reference = PCA(o["components"], svd_solver="full").fit(rows)
    ours = np.array(result["components"])
    assert np.abs(ours @ reference.components_.T) == pytest.approx(np.eye(o["components"]))
    assert result["explained_variance"] == pytest.approx(reference.explained_variance_, rel=1e-9)
    assert result["explained_variance_ratio"] == pytest.approx(
        reference.explained_variance_ratio_, rel=1e-9
    )
    assert result["mean"] == pytest.approx(reference.mean_, abs=1e-9)


def check_kmeans_matches_scikit_learn(quick) -> None:
    _, _, suite_dir, _ = quick
    record = _record(suite_dir, "kmeans")
    o, result = record["options"], record["result"]
    rows = make_rows("kmeans", 0, o["rows"], o["features"], o["clusters"], o["seed"]).numpy()
    reference = KMeans(
        o["clusters"], init=np.array(result["initial"]), n_init=1, max_iter=o["iterations"],
        tol=0, algorithm="lloyd",
    ).fit(rows)  # fmt: skip
    assert np.array(result["centroids"]) == pytest.approx(reference.cluster_centers_, abs=1e-9)
    assert result["inertia"] == pytest.approx(reference.inertia_, rel=1e-9)


def test_svm_accuracy_matches_scikit_learn(quick):
    _, _, suite_dir, _ = quick
    record = _record(suite_dir, "svm")
    o, result = record["options"], record["result"]
    n, held_out = o["rows"], result["test_rows"]
    data = make_rows("svm", 0, n + held_out, o["features"], 1, o["seed"]).numpy()
    train, test = data[:n], data[n:]
    reference = LinearSVC().fit(train[:, :-1], train[:, -1])
    assert result["train_accuracy"] == pytest.approx(
        reference.score(train[:, :-1], train[:, -1]), abs=0.03
    )
    assert result["test_accuracy"] == pytest.approx(
        reference.score(test[:, :-1], test[:, -1]), abs=0.03
    )
    assert result["test_accuracy"] > 0.9


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """pca at 1 and 2 ranks; svm with 100 rows: a batch per rank at 1 rank, not at 2."""
    tmp = tmp_path_factory.mktemp("suite-fail")
    proc = scalescope(
        "suite", "--quick", "--workloads", "svm,pca", "--ranks", "2,1", "--size", "svm=100",
        "--suite-dir", tmp / "suite", cwd=tmp, timeout=600,
    )  # fmt: skip
    return proc, json.loads((tmp / "suite" / "suite.json").read_text()), tmp


@pytest.mark.heavy
def test_failed_workload_is_marked_and_the_others_report(failing):
    proc, doc, tmp = failing
    assert proc.returncode == 1
    failed = _entry(doc, "svm", 2)
    assert failed["status"] == "failed" and failed["throughput"] is None
    reason = "ValueError: --rows 100 gives fewer rows per rank than one batch (64 x 2 ranks)"
    assert failed["error"] == reason
    assert f"svm on 2 ranks failed: {reason}" in proc.stdout
    assert _entry(doc, "svm", 1)["status"] == "completed"
    assert [(e["workload"], e["ranks"]) for e in doc["entries"]] == [
        ("pca", 1), ("pca", 2), ("svm", 1), ("svm", 2),
    ]  # fmt: skip


@pytest.mark.heavy
def test_scaling_efficiency_from_the_two_runs_records(failing):
    _, doc, tmp = failing
    one, two = (_record(tmp / "suite", "pca", n) for n in (1, 2))
    expected = (two["items"] / two["time_s"]) / (one["items"] / one["time_s"]) / 2
    assert _entry(doc, "pca", 2)["efficiency"] == pytest.approx(expected)
    assert _entry(doc, "pca", 1)["efficiency"] is None
    assert _entry(doc, "svm", 2)["efficiency"] is None


@pytest.mark.heavy
def test_report_prints_a_recorded_suite_again(failing):
    """`report SUITE_DIR` (or its suite.json) renders the table the suite printed, failed
    run and efficiency included, from suite.json alone."""
    proc, _, tmp = failing
    lines = proc.stdout.splitlines(keepends=True)  # the workloads' own lines come first
    start = next(i for i, line in enumerate(lines) if "scalescope suite: " in line)
    for path in (tmp / "suite", tmp / "suite" / "suite.json"):
        again = scalescope_in_process("report", path, cwd=tmp)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "".join(lines[start:])


@pytest.mark.parametrize(
    "body,message",
    [
        ("{", "suite.json: not a suite result (Input data was truncated)"),
        ('{"schema": "scalescope.scale/1"}', "no schema 'scalescope.suite/1'"),
        ('{"schema": "scalescope.suite/1", "quick": 1}', "malformed suite result (Expected"),
    ],
)
def test_report_of_a_bad_suite_json_is_one_line(tmp_path, body, message):
    suite_dir = tmp_path / "s[1]"
    suite_dir.mkdir()
    (suite_dir / "suite.json").write_text(body)
    proc = scalescope_in_process("report", suite_dir, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "s[1]" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.heavy
def test_report_of_a_suite_refuses_other_outputs(failing, tmp_path):
    _, _, tmp = failing
    proc = scalescope_in_process("report", tmp / "suite", "--html", tmp_path / "x.html", cwd=tmp)
    assert proc.returncode == 2 and "is a suite: its JSON is suite.json" in proc.stderr
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--ranks", "0,2"], "--ranks takes positive rank counts like 1,2,4, got '0,2'"),
        (["--workloads", "pca,cnn[x]"], "unknown workload 'cnn[x]'; valid: resnet50"),
        (["--size", "pca=[2]"], "--size 'pca=[2]': the size must be a positive whole number"),
    ],
)
def test_bad_input_is_one_line_and_starts_nothing(tmp_path, args, message):
    proc = scalescope_in_process(
        "suite", "--quick", *args, "--suite-dir", tmp_path / "s", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "s").exists()


@pytest.mark.heavy
def test_a_recorded_suite_is_not_overwritten(failing, tmp_path):
    _, _, tmp = failing
    before = (tmp / "suite" / "suite.json").read_bytes()
    proc = scalescope_in_process("suite", "--quick", "--suite-dir", tmp / "suite", cwd=tmp_path)
    assert proc.returncode == 2 and "already holds a suite" in proc.stderr
    assert (tmp / "suite" / "suite.json").read_bytes() == before


@pytest.mark.heavy
def test_sigterm_stops_the_suite_and_keeps_what_ran(tmp_path):
    """SIGTERM while kmeans runs: pca's row stays, kmeans is interrupted, svm never starts."""
    suite_dir = tmp_path / "suite"
    proc = start_scalescope(
        "suite", "--quick", "--workloads", "pca,kmeans,svm", "--size", "kmeans=2000000",
        "--suite-dir", suite_dir, cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 400
    while not rank_meta_path(suite_dir / "kmeans-n2", 1).exists():  # a big k-means started
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads((suite_dir / "suite.json").read_text())
    assert doc["interrupted"] is True
    assert [(e["workload"], e["status"]) for e in doc["entries"]] == [
        ("pca", "completed"), ("kmeans", "interrupted"),
    ]  # fmt: skip
    assert "Interrupted: the workloads after the last row did not run." in out
    assert not (suite_dir / "svm-n2").exists()
