"""Tensor-parallel findings on runs written by hand: a dp x tp mesh of 4 ranks on two hosts,
tp inside a node or across them, on gloo or NCCL. The tp share is checked against the rows'
own sums, and the replayed saving against the step worked out by hand: every rank issues its
tp all-reduce at the same time, so its 2 ms are all transfer, on the critical path: hiding
them saves 2 ms a step, a 2x faster tp link 1 ms."""

from __future__ import annotations

import io
import json

import msgspec
import pytest
from analysed import analysed  # noqa: E402
from rich.console import Console
from run_builders import phase_row, step_row, write_run_dir

from scalescope.diagnose.engine import diagnose_run
from scalescope.events import RankMeta, RunMeta, load_run
from scalescope.events.run import GroupMeta
from scalescope.events.schema import Kind
from scalescope.report.document import Table
from scalescope.report.media.report_json import report_json
from scalescope.report.views.diagnosis import render_diagnosis
from scalescope.report.views.run import run_document

MS = 1_000_000
STEPS, WARMUP = 6, 1
TP_MS, TP_BYTES = 2, 64 * 1024
HOSTS = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}


def coll(step: int, start: int, dur: int, nbytes: int, group: str, seq: int) -> tuple:
    return (step, int(Kind.COLLECTIVE), "all_reduce", start, dur, nbytes, nbytes // 4,
            "float32", group, seq, "user")  # fmt: skip


def rank_rows(rank: int, tp: str, dp: str, late_ms: int = 0) -> list[tuple]:
    """``late_ms``: its tp all-reduce issued that much later, completing with its pair's."""
    rows, t = [], 0
    late = late_ms * MS
    for step in range(STEPS):
        start = t
        rows.append(phase_row(step, "forward", t, 5 * MS))
        rows.append(coll(step, t + 2 * MS + late, TP_MS * MS - late, TP_BYTES, tp, step))
        t += 5 * MS
        rows.append(phase_row(step, "backward", t, 8 * MS))
        rows.append(coll(step, t + 7 * MS, MS, 1 << 20, dp, step))
        t += 8 * MS
        rows.append(phase_row(step, "optimizer", t, MS))
        t += MS
        rows.append(step_row(step, start, t - start, 16))
    return rows


def mesh_run(
    tmp_path, tp_pairs: list[tuple[int, int]], backend: str, late_ms: dict[int, int] | None = None
):
    """tp groups as given; the dp groups pair the tp groups' i-th members; ``late_ms``: per
    rank, how late it issues its tp all-reduce (rank_rows)."""
    label: dict[int, dict[str, tuple[str, tuple[int, ...]]]] = {r: {} for r in range(4)}
    for dim, groups in (("tp", tp_pairs), ("dp", list(zip(*tp_pairs, strict=True)))):
        for i, members in enumerate(groups):
            for r in members:
                label[r][dim] = (f"{dim}{i}", tuple(members))
    files = {
        r: RankMeta(
            rank=r,
            world_size=4,
            hostname=HOSTS[r],
            status="completed",
            groups={
                lab: GroupMeta(ranks=list(members), dim=dim, backend=backend)
                for dim, (lab, members) in label[r].items()
            },
        )  # fmt: skip
        for r in range(4)
    }
    late = late_ms or {}
    rows = {r: [rank_rows(r, label[r]["tp"][0], label[r]["dp"][0], late.get(r, 0))]
            for r in range(4)}  # fmt: skip
    meta = RunMeta(run_id="tp", command=["train.py"], script="train.py", world_size=4,
                   nproc_per_node=2, warmup_steps=WARMUP, hostnames=sorted(set(HOSTS.values())),
                   status="completed")  # fmt: skip
    return load_run(write_run_dir(tmp_path / "run", meta, rows, files))


def by_code(findings, code: str):
    return next((f for f in findings if f.code == code), None)


def test_tp_on_gloo_is_information_with_its_share(tmp_path) -> None:
    run = mesh_run(tmp_path, [(0, 1), (2, 3)], "gloo")
    findings = diagnose_run(run, analysed(run)).findings
    tp = by_code(findings, "TP_COMM")
    assert tp is not None and tp.level == "info"
    assert by_code(findings, "TP_COMM_EXPOSED") is None
    assert by_code(findings, "TP_ACROSS_NODES") is None, "tp pairs are inside a node"
    colls = run.events.of_kind(Kind.COLLECTIVE)
    tp_rows = colls.select(colls.where("group", "tp0") | colls.where("group", "tp1"))
    measured = tp_rows.step >= WARMUP
    ms_per_step = tp_rows.dur_ns[measured].sum() / 1e6 / 4 / (STEPS - WARMUP)
    assert ms_per_step == TP_MS
    assert tp.share_pct == pytest.approx(100 * ms_per_step / 14.0)
    assert "blocks the host" in tp.summary and "exposed" in tp.summary
    evidence = {e.name: e.value for e in tp.evidence}
    assert evidence["calls per step and rank"] == 1.0
    assert evidence["bytes per step and rank"] == pytest.approx(TP_BYTES / 1e6, abs=1e-3)
    assert tp.saved_ms_per_step == pytest.approx(TP_MS / 2), "blocking: a faster link, not hiding"
    assert tp.basis == "replayed with comm 2x faster (dim tp)"


def test_tp_on_nccl_above_the_threshold_is_a_warning(tmp_path) -> None:
    run = mesh_run(tmp_path, [(0, 1), (2, 3)], "nccl")
    tp = by_code(diagnose_run(run, analysed(run)).findings, "TP_COMM_EXPOSED")
    assert tp is not None and tp.level == "warning"
    assert tp.share_pct == pytest.approx(100 * TP_MS / 14.0)
    assert any("async tensor parallelism" in r for r in tp.remedies)
    assert tp.saved_ms_per_step == pytest.approx(TP_MS), "overlapped on streams: hidden"
    assert tp.basis == "replayed without it: no transfer time (dim tp)"


def test_a_tp_group_across_hosts_is_named(tmp_path) -> None:
    run = mesh_run(tmp_path, [(0, 2), (1, 3)], "gloo")
    findings = diagnose_run(run, analysed(run)).findings
    found = by_code(findings, "TP_ACROSS_NODES")
    assert found is not None
    assert "2 of 2 tensor-parallel groups span hosts (ranks 0,2 on node-a, node-b)" in (
        found.summary
    )
    assert any("inside a node" in r for r in found.remedies)
    assert found.saved_ms_per_step == pytest.approx(TP_MS / 2)
    assert found.basis.startswith("replayed with comm 2x faster (dim tp); ")
    assert "assumed" in found.basis
    share = by_code(findings, "TP_COMM")
    assert share.saved_ms_per_step is None and share.basis == "explained by TP_ACROSS_NODES"


def test_each_finding_carries_its_dimension_in_json_and_words(tmp_path) -> None:
    run = mesh_run(tmp_path, [(0, 1), (2, 3)], "nccl")
    diagnosis = diagnose_run(run, analysed(run))
    dims = {f["code"]: f["dim"] for f in msgspec.to_builtins(diagnosis)["findings"]}
    assert dims["TP_COMM_EXPOSED"] == "tp"
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_diagnosis(diagnosis, console)
    assert "1. communication (tensor parallel), dim tp: " in console.file.getvalue()


def test_the_waits_carry_the_dimension(tmp_path) -> None:
    """Each (group, seq) instance's wait is reported under its group's mesh dimension: per
    dimension, its 2 groups x the measured steps."""
    run = mesh_run(tmp_path, [(0, 1), (2, 3)], "gloo")
    waits = analysed(run).cross_rank.waits
    assert {(w.dim, w.instances) for w in waits} == {
        ("tp", 2 * (STEPS - WARMUP)), ("dp", 2 * (STEPS - WARMUP)),
    }  # fmt: skip
    assert {w.nbytes for w in waits if w.dim == "tp"} == {TP_BYTES}


def tables(block) -> list[Table]:
    """Every table of a document or section, however deep."""
    if isinstance(block, Table):
        return [block]
    return [t for b in getattr(block, "blocks", ()) for t in tables(b)]


def test_the_waits_per_dimension_sum_each_ranks_wait_and_transfer(tmp_path) -> None:
    """Rank 3 issues its tp all-reduce 1 ms late: rank 2 waits 1 ms for it, and their pair
    moves the bytes in 1 ms, the other pair in TP_MS; dp waits for nobody (1 ms each).
    Per rank over the measured steps, as DimTotals counts: the report's dimension table
    shows both."""
    run = mesh_run(tmp_path, [(0, 1), (2, 3)], "gloo", late_ms={3: 1})
    analysis = analysed(run)
    measured = STEPS - WARMUP
    dims = {d.dim: d for d in analysis.cross_rank.dims}
    assert list(dims) == ["tp", "dp"], "the most waiting first"
    tp, dp = dims["tp"], dims["dp"]
    assert (tp.instances, tp.ranks, dp.instances, dp.ranks) == (2 * measured, 4, 2 * measured, 4)
    assert tp.wait_ms_per_rank == pytest.approx(1 * measured / 4)
    assert tp.transfer_ms_per_rank == pytest.approx((2 * TP_MS + 2 * 1) * measured / 4)
    assert tp.wait_share_pct == pytest.approx(100 * 1 / (1 + 2 * TP_MS + 2))
    assert (dp.wait_ms_per_rank, dp.wait_share_pct) == (0.0, 0.0)
    assert dp.transfer_ms_per_rank == pytest.approx(1 * measured)
    (table,) = [b for b in tables(run_document(analysis)) if b.title == "Collectives by dimension"]
    names = [c.name for c in table.columns]
    row = dict(zip(names, next(v for v in table.values if v[0] == "tp"), strict=True))
    assert row["waiting"] == tp.wait_ms_per_rank and row["transfer"] == tp.transfer_ms_per_rank
    doc = json.loads(msgspec.json.encode(report_json(analysis, None)))
    assert {d["dim"]: d["wait_ms_per_rank"] for d in doc["cross_rank"]["dims"]} == {
        "tp": pytest.approx(1 * measured / 4), "dp": 0.0,
    }  # fmt: skip
    assert {d["dim"] for d in doc["dims"]} == {"tp", "dp"}
