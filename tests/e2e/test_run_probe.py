"""`scalescope run` on a real 2-rank DDP script: what the probe records against what DDP says."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from conftest import DDP_TRAIN, scalescope, scalescope_in_process
from scalescope.events import Kind, load_run
from scalescope.report.media.page import plotly_payload

STEPS = 6


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def _collectives(run, rank: int, tag: str) -> dict[int, list[int]]:
    """Message sizes per step, in issue order, of one rank's collectives with ``tag``."""
    ev = run.events
    mask = (ev.rank == rank) & (ev.kind == Kind.COLLECTIVE) & ev.where("tag", tag)
    sizes: dict[int, list[int]] = defaultdict(list)
    for i in np.flatnonzero(mask)[np.argsort(ev.seq[mask], kind="stable")]:
        sizes[int(ev.step[i])].append(int(ev.nbytes[i]))
    return sizes


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    facts = tmp / "facts.json"
    proc = scalescope(
        "run",
        "-n",
        "2",
        "--run-dir",
        tmp / "run",
        "--no-report",
        "--ranks-output",
        "0",
        DDP_TRAIN,
        "--steps",
        STEPS,
        "--user-allreduce",
        100,
        "--facts",
        facts,
        "--world-line",
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr
    (tmp / "stdout.txt").write_text(proc.stdout)
    return load_run(tmp / "run"), json.loads(facts.read_text())


@pytest.fixture
def damaged_copy(recorded, tmp_path):
    """A copy of the recorded run directory that a test may damage."""
    run, _ = recorded
    return Path(shutil.copytree(run.path, tmp_path / "copy"))


def test_run_completes_with_every_rank(recorded):
    run, facts = recorded
    assert run.meta.status == "completed"
    assert run.problems == []
    assert sorted(run.ranks) == [0, 1]
    assert all(m.status == "completed" and m.exit_code == 0 for m in run.ranks.values())
    assert run.meta.world_size == facts["world_size"] == 2
    for rank in (0, 1):
        steps = run.events.select((run.events.rank == rank) & (run.events.kind == Kind.STEP))
        assert list(steps.step) == list(range(STEPS))
        assert set(steps.count.tolist()) == {8}
        assert (steps.dur_ns > 0).all()


def test_ranks_output_shows_rank_0_and_keeps_every_ranks_lines(recorded):
    """``--ranks-output 0``: rank 0's lines on the terminal, every rank's in RUN_DIR/logs."""
    run, _ = recorded
    shown = (run.path.parent / "stdout.txt").read_text()
    assert "rank 0 of 2: sum 3" in shown and "rank 1 of 2" not in shown
    kept = {p.parent.name: p.read_text() for p in (run.path / "logs").rglob("stdout.log")}
    assert sorted(kept) == ["0", "1"] and "rank 1 of 2: sum 3" in kept["1"]


def test_gradient_bytes_per_step_equal_trainable_parameters(recorded):
    run, facts = recorded
    for rank in (0, 1):
        per_step = _collectives(run, rank, "gradients")
        assert sorted(per_step) == list(range(STEPS))
        for step, sizes in per_step.items():
            assert sum(sizes) == facts["trainable_bytes"], step


def test_bucket_allreduces_match_ddp_buckets(recorded):
    run, facts = recorded
    initial = _sizes(facts["logging"]["bucket_sizes"])
    rebuilt = _sizes(facts["logging"]["rebuilt_bucket_sizes"])
    assert len(rebuilt) > 1, "bucket_cap_mb should split this model into several buckets"
    for rank in (0, 1):
        per_step = _collectives(run, rank, "gradients")
        assert per_step[0] == initial
        for step in range(1, STEPS):
            assert per_step[step] == rebuilt, step


def test_parameter_broadcast_counted_once(recorded):
    """One broadcast per dtype (c10d coalesces same-dtype tensors), every byte once."""
    run, facts = recorded
    dtypes = 2  # float32 weights and running stats, int64 num_batches_tracked
    for rank in (0, 1):
        sizes = _collectives(run, rank, "parameters")
        assert list(sizes) == [0] and len(sizes[0]) == dtypes
        assert sum(sizes[0]) == facts["param_bytes"] + facts["buffer_bytes"]
        assert sorted(sizes[0])[0] == 8, "int64 num_batches_tracked apart from float32"
        buffers = _collectives(run, rank, "buffers")
        assert len(buffers) == STEPS
        assert all(sorted(v) == [8, facts["buffer_bytes"] - 8] for v in buffers.values())


def test_user_allreduce_exact_size_and_tag(recorded):
    run, _ = recorded
    ev = run.events
    user = ev.select((ev.kind == Kind.COLLECTIVE) & ev.where("tag", "user"))
    world_line = user.select(user.count == 1)  # --world-line's sum, once per rank at its end
    assert len(world_line) == 2 and set(world_line.nbytes.tolist()) == {4}
    user = user.select(user.count != 1)
    assert len(user) == 2 * STEPS
    assert set(user.nbytes.tolist()) == {100 * 8}
    assert set(user.count.tolist()) == {100}
    assert set(user.strings("dtype")) == {"float64"}
    assert set(user.strings("name")) == {"all_reduce"}
    assert (user.dur_ns > 0).all()


def test_sequence_numbers_match_across_ranks(recorded):
    run, _ = recorded
    ev = run.events.of_kind(Kind.COLLECTIVE)
    by_rank = []
    for rank in (0, 1):
        sel = ev.select(ev.rank == rank)
        order = np.argsort(sel.seq)
        names = np.asarray(sel.strings("name"))[order].tolist()
        seqs, sizes = sel.seq[order].tolist(), sel.nbytes[order].tolist()
        by_rank.append(list(zip(seqs, names, sizes, strict=True)))
    assert [seq for seq, _, _ in by_rank[0]] == list(range(len(by_rank[0])))
    assert by_rank[0] == by_rank[1]


def test_phases_tile_inside_steps(recorded):
    run, _ = recorded
    ev = run.events
    for rank in (0, 1):
        steps = ev.select((ev.rank == rank) & (ev.kind == Kind.STEP))
        phases = ev.select((ev.rank == rank) & (ev.kind == Kind.PHASE))
        names = set(phases.strings("name"))
        assert {"data", "forward", "backward", "optimizer"} <= names
        for s, start, dur in zip(steps.step, steps.start_ns, steps.dur_ns, strict=True):
            in_step = phases.select(phases.step == s)
            assert in_step.start_ns.min() >= start
            assert (in_step.start_ns + in_step.dur_ns).max() <= start + dur
            assert in_step.dur_ns.sum() <= dur


@pytest.mark.heavy
def test_user_comm_hook_composes(tmp_path: Path):
    facts = tmp_path / "facts.json"
    proc = scalescope(
        "run",
        "-n",
        "2",
        "--run-dir",
        tmp_path / "run",
        "--no-report",
        DDP_TRAIN,
        "--steps",
        3,
        "--hook",
        "fp16",
        "--facts",
        facts,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run, facts = load_run(tmp_path / "run"), json.loads(facts.read_text())
    ev = run.events
    grads = ev.select((ev.kind == Kind.COLLECTIVE) & ev.where("tag", "gradients"))
    assert set(grads.strings("dtype")) == {"float16"}
    for rank in (0, 1):
        for sizes in _collectives(run, rank, "gradients").values():
            assert sum(sizes) == facts["trainable_bytes"] // 2


def test_report_of_the_run(recorded, tmp_path):
    run, facts = recorded
    proc = scalescope("report", run.path, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Throughput and step time" in proc.stdout
    assert f"{facts['trainable_bytes']:,} B" in proc.stdout  # gradients per step
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema"] == "scalescope.report/2"
    grads = [t for t in doc["collectives"]["per_step"] if t["tag"] == "gradients"]
    assert grads[0]["nbytes_per_step"] == facts["trainable_bytes"]


def test_node_files_written_live_equal_those_built_after(recorded, tmp_path):
    """The launcher's node relay wrote the run's node files (one window of 500 steps: the
    last, partial, written at the end) as build_run_node_files builds them afterwards."""
    from scalescope.events.node_file import iter_node_tables, read_manifest
    from scalescope.events.node_stats import build_run_node_files

    run, _ = recorded
    live = read_manifest(run.path)
    built = build_run_node_files(run.path, live.window_steps, out=tmp_path)
    assert live.windows == [0] and live.nodes[0].ranks == [0, 1]
    for table in ("steps", "colls"):
        ours = list(iter_node_tables(run.path, live, table))
        theirs = list(iter_node_tables(tmp_path, built, table))
        assert len(ours) == len(theirs) == 1 and ours[0][2].num_rows > 0
        assert ours[0][2].equals(theirs[0][2]), table


def test_report_with_a_missing_rank_file(damaged_copy, tmp_path):
    """A run that lost a rank's file reports from the rank files it has, node files or not
    (a run that lost most of them is analysed from its node files: test_node_files_live)."""
    (damaged_copy / "events" / "rank-00001.arrows").unlink()
    proc = scalescope("report", damaged_copy, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "rank 1: event file rank-00001.arrows is missing" in proc.stdout
    assert "Throughput and step time" in proc.stdout and "all_reduce" in proc.stdout


def test_report_with_a_truncated_rank_file(damaged_copy, tmp_path):
    path = damaged_copy / "events" / "rank-00000.arrows"
    path.write_bytes(path.read_bytes()[:-100])
    proc = scalescope("report", damaged_copy, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "rank 0: rank-00000.arrows truncated after batch" in proc.stdout
    assert "rank-00001" not in proc.stdout


def test_report_of_a_directory_that_is_not_a_run(tmp_path):
    proc = scalescope_in_process("report", tmp_path, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("is not a scalescope run directory (no run.json)")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_clock_offsets_measured_at_start_and_end(recorded):
    """Both ranks share this machine's monotonic clock: the true offset is 0."""
    run, _ = recorded
    assert [(s.when, s.offset_ns) for s in run.ranks[0].clock] == [("start", 0), ("end", 0)]
    samples = run.ranks[1].clock
    assert [s.when for s in samples] == ["start", "end"]
    for sample in samples:
        assert sample.rounds == 8
        assert 0 < sample.uncertainty_ns < 50_000_000
        assert abs(sample.offset_ns) <= sample.uncertainty_ns


def test_report_writes_dashboard_and_timeline(recorded, tmp_path):
    run, _ = recorded
    proc = scalescope(
        "report", run.path, "--html", tmp_path / "d.html", "--timeline", tmp_path / "t.json",
        "--steps", 2, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "d.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="chart-latency"' in page
    ours = page.replace(plotly_payload(), "")
    assert 'src="http' not in ours and 'href="http' not in ours
    trace = json.loads((tmp_path / "t.json").read_text())
    steps = {e["args"]["step"] for e in trace["traceEvents"] if "step" in e.get("args", {})}
    assert steps == {1, 2}, "two steps after the one warm-up step"
    assert {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"} == {1, 2}


def test_baseline_of_a_script_run_is_refused(recorded, tmp_path):
    run, _ = recorded
    proc = scalescope_in_process("report", run.path, "--baseline", run.path, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --baseline {run.path}: its FLOP/s cannot be judged: model FLOPs are "
        "counted for bench runs only (a script's model is unknown)"
    )
