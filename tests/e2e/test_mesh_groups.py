"""A 2-D mesh (dp x tp) on 4 ranks: the probe records each group's members and the mesh
dimension that made it, checked against what torch gave the script; without names the
dimensions are told by stride."""

from __future__ import annotations

import json

import pytest
from analysed import analysed  # noqa: E402

from conftest import SCRIPTS, scalescope
from scalescope.analyze.ranks.groups import process_groups
from scalescope.diagnose.engine import diagnose_run
from scalescope.events import load_run


@pytest.fixture(scope="module")
def mesh_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mesh")
    proc = scalescope(
        "run", "-n", 4, "--oversubscribe", "--run-dir", tmp / "run", "--no-report",
        SCRIPTS / "mesh_train.py", "--steps", 3, "--facts", tmp, cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp


def test_each_group_carries_its_members_and_its_mesh_dimension(mesh_run):
    run = load_run(mesh_run / "run")
    truth = {r: json.loads((mesh_run / f"mesh-{r}.json").read_text()) for r in range(4)}
    for rank, meta in run.ranks.items():
        recorded = {g.dim: g.ranks for g in meta.groups.values() if g.dim}
        assert recorded == truth[rank], rank
    groups = {g.ranks: g for g in process_groups(run)}
    for ranks, dim in (((0, 1), "tp"), ((2, 3), "tp"), ((0, 2), "dp"), ((1, 3), "dp")):
        assert groups[ranks].dim == dim and groups[ranks].named
    labels = {g.label for g in groups.values() if g.dim in ("dp", "tp")}
    recorded = {str(run.events.symbols[int(i)]) for i in set(run.events.group.tolist())}
    assert labels <= recorded  # the rows carry the labels the groups are known by


def test_the_collectives_per_dimension_are_what_the_script_issued(mesh_run):
    """Per rank and step: one all-reduce of the 16 x 64 activations over tp, two of the
    gradients (64 x 64 weight, 64 bias) over dp; 3 steps, none of them a training step of
    the probe's (no DataLoader, no optimizer), so every row counts."""
    analysis = analysed(load_run(mesh_run / "run"))
    dims = {d.dim: d for d in analysis.dims}
    assert set(dims) == {"dp", "tp"} and dims["dp"].named and dims["tp"].named
    assert (dims["tp"].calls, dims["dp"].calls) == (4 * 3, 4 * 3 * 2)
    assert dims["tp"].bytes_per_rank == 3 * 16 * 64 * 4
    assert dims["dp"].bytes_per_rank == 3 * (64 * 64 + 64) * 4
    assert (dims["dp"].groups, dims["dp"].ranks_per_group) == (2, 2)


def test_the_collectives_tables_carry_the_dimension_and_the_groups_size(mesh_run):
    """Per op and dimension; the bus factor's n is the pair's 2 (all-reduce: 2(n-1)/n = 1),
    not the world's 4 (1.5)."""
    c = analysed(load_run(mesh_run / "run")).collectives
    assert {(o.op, o.dim): o.calls for o in c.ops} == {
        ("all_reduce", "dp"): 4 * 3 * 2,
        ("all_reduce", "tp"): 4 * 3,
    }
    assert {z.group_ranks for z in c.sizes} == {2}
    assert all(z.busbw_gbps == pytest.approx(z.algbw_gbps) for z in c.sizes)


def test_a_tensor_parallel_pair_counts_its_samples_once(tmp_path):
    """Each tp pair loads the same 16-sample batches, each dp replica its own: the run's
    samples are the dp replicas' (2 x 16 per measured step), each rank's its own 16. The
    mesh is unflattened from a 1-D one, as torchtitan makes its own: dp and tp named still."""
    proc = scalescope(
        "run", "-n", 4, "--oversubscribe", "--run-dir", tmp_path / "run", "--no-report",
        SCRIPTS / "mesh_train.py", "--steps", 5, "--loader", "--unflatten", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = load_run(tmp_path / "run")
    analysis = analysed(run)
    steps = analysis.steps
    measured = steps.ranks[0].num_steps
    assert steps.sample_copies == 2
    assert steps.total_samples == 2 * 16 * measured
    assert [r.samples for r in steps.ranks] == [16 * measured] * 4
    assert steps.samples_per_s == pytest.approx(steps.total_samples / steps.span_s)
    assert {g.backend for g in analysis.groups if g.dim in ("dp", "tp")} == {"gloo"}
    assert {w.dim for w in analysis.cross_rank.waits if w.op == "all_reduce"} >= {"dp", "tp"}
    tp = next(f for f in diagnose_run(run, analysis).findings if f.code.startswith("TP_"))
    assert tp.code == "TP_COMM" and tp.level == "info", "gloo: a share, never 'exposed'"
    tp_ms = next(d for d in analysis.dims if d.dim == "tp").ms_per_rank / measured
    step_ms = sum(r.mean_step_ms for r in steps.ranks) / len(steps.ranks)
    assert tp.share_pct == pytest.approx(100 * tp_ms / step_ms)


def test_top_shows_each_ranks_index_along_dp_and_tp(mesh_run):
    """`top RUN --once` on the finished run: a place column, each rank's index in the groups
    torch gave the script."""
    proc = scalescope("top", mesh_run / "run", "--once", cwd=mesh_run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(line.split()[:3] == ["rank", "place", "status"] for line in lines), proc.stdout
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0].isdigit()}
    for rank in range(4):
        truth = json.loads((mesh_run / f"mesh-{rank}.json").read_text())
        dp, tp = truth["dp"].index(rank), truth["tp"].index(rank)
        assert f" dp {dp} · tp {tp} " in rows[str(rank)], proc.stdout
