"""Kineto traces: real torch.profiler runs recorded here (2-rank gloo, tests/data/traces/) and
the real shared traces.

Every expectation is computed here from the JSON itself (json module, counting the events
by hand), never with the ingester's code.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from analysed import analysed  # noqa: E402
from torch.profiler import ProfilerActivity, profile

from scalescope.events import Kind
from scalescope.ingest import KINETO, IngestError, ingest

HERE = Path(__file__).resolve()
TRACES = HERE.parents[4] / "shared" / "traces"
RECORDED = HERE.parents[2] / "data" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"real traces not found at {TRACES} (a clone outside the workspace has no ../shared)",
)
SIZES = {
    "float": 4, "Float": 4, "double": 8, "Double": 8, "long int": 8, "Long": 8, "long": 8, "int": 4,
    "Int": 4, "c10::BFloat16": 2, "BFloat16": 2, "c10::Half": 2, "Half": 2,
    "unsigned char": 1, "Byte": 1, "signed char": 1, "Char": 1,
}  # fmt: skip
OPS = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "broadcast": "broadcast",
    "all_gather": "all_gather", "_all_gather_base": "all_gather", "all_to_all": "all_to_all",
    "barrier": "barrier", "send": "send", "recv": "recv", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter",
}  # fmt: skip
TIMES_WORLD = {"all_gather", "gather", "scatter"}
PARAM_BYTES = 4 * (64 * 256 + 256 + 2 * 256 + 256 * 256 + 256 + 256 * 10 + 10)
"""ddp_profiled.py's model: the gradient bytes DDP all-reduces per step."""


@pytest.fixture(scope="module")
def runs() -> dict[str, Path]:
    """torch.profiler traces of two real 2-rank gloo runs under torchrun, recorded once
    (tests/data/record.py kineto_traces): DDP training, and one call of every op."""
    return {"ddp": RECORDED / "kineto-ddp", "ops": RECORDED / "kineto-ops"}


def rank_file(folder: Path, rank: int) -> Path:
    return next(folder.glob(f"rank{rank}.*"))


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def contains(outer: dict, inner: dict) -> bool:
    return (
        outer["tid"] == inner["tid"]
        and outer["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )


def expected_by_hand(events: list[dict], world: int) -> Counter:
    """(op, nbytes) per collective as the file holds it, counted by hand."""
    xs = [e for e in events if e.get("ph") == "X"]
    comms = [e for e in xs if e["name"] == "record_param_comms" and e.get("cat") == "cpu_op"]
    named = [e for e in comms if e["args"].get("Collective name") not in (None, "wait")]
    out: Counter = Counter()
    for e in named:
        a = e["args"]
        out[(OPS[a["Collective name"]], a["In msg nelems"] * SIZES[a["dtype"]])] += 1
    backends = ("gloo:",) if named else ("gloo:", "nccl:")
    for e in xs:
        if e.get("cat") != "user_annotation" or not e["name"].startswith(backends):
            continue
        op = OPS[e["name"].split(":", 1)[1]]
        dims, types = e["args"].get("Input Dims") or [[]], e["args"].get("Input type") or [""]
        nbytes = 0 if op == "barrier" else math.prod(dims[0]) * SIZES[types[0]]
        issuer = [o for o in xs if o["name"] == "c10d::_allgather_base_" and contains(o, e)]
        if op == "all_gather" and issuer:
            nbytes = math.prod(issuer[0]["args"]["Input Dims"][0]) * SIZES[types[0]]
        elif op in TIMES_WORLD:
            nbytes *= world
        out[(op, nbytes)] += 1
    return out


def ingested(result, rank: int) -> Counter:
    ev = result.run.events
    rows = ev.select((ev.rank == rank) & (ev.kind == Kind.COLLECTIVE))
    return Counter(zip(rows.strings("name"), rows.nbytes.tolist(), strict=True))


@pytest.mark.parametrize("which", ["ddp", "ops"])
def test_collectives_per_op_and_size_match_each_file(runs, which: str) -> None:
    result = ingest(runs[which])
    assert result.format == KINETO
    assert result.run.meta.world_size == 2
    assert result.problems == []
    for rank in (0, 1):
        expected = expected_by_hand(load(rank_file(runs[which], rank))["traceEvents"], 2)
        assert expected, "the trace holds collectives"
        assert ingested(result, rank) == expected


def test_every_op_is_named_and_sized_like_the_probe(runs) -> None:
    got = ingested(ingest(runs["ops"]), 0)
    assert got[("all_reduce", 4000)] == 1
    assert got[("all_reduce", 6)] == 1  # bfloat16
    assert got[("broadcast", 80)] == 1
    assert got[("all_gather", 80)] == 2  # list output and into_tensor: the whole output
    assert got[("all_to_all", 128)] == 1
    assert got[("barrier", 0)] == 1
    assert got[("send", 28)] == 1
    assert got[("reduce", 20)] == 1
    assert got[("gather", 32)] == 1
    assert got[("all_reduce", 200)] == 1


def test_a_send_and_a_recv_name_their_peer_from_the_issuing_op(runs) -> None:
    """c10d::send(tensors, pg, dst, tag) and recv_(tensors, pg, src, tag) record the partner
    in ``Concrete Inputs``: rank 0 sends to 1, rank 1 receives from 0; nothing else has one."""
    ev = ingest(runs["ops"]).run.events
    colls = ev.select(ev.kind == Kind.COLLECTIVE)
    rows = zip(colls.rank.tolist(), colls.strings("name"), colls.peer.tolist(), strict=True)
    peers = Counter(rows)
    assert peers[(0, "send", 1)] == 1 and peers[(1, "recv", 0)] == 1
    p2p = colls.where("name", "send") | colls.where("name", "recv")
    assert (colls.peer[~p2p] == -1).all()


def test_steps_phases_and_tags_of_ddp_training(runs) -> None:
    result = ingest(runs["ddp"])
    ev = result.run.events
    for rank in (0, 1):
        raw = load(rank_file(runs["ddp"], rank))["traceEvents"]
        numbers = sorted(int(e["name"].split("#")[1]) for e in raw if "ProfilerStep#" in e["name"])
        steps = ev.select((ev.rank == rank) & (ev.kind == Kind.STEP))
        assert sorted(steps.step.tolist()) == numbers == [2, 3, 4]
        mine = ev.select(ev.rank == rank)
        for step in numbers:
            in_step = mine.select(mine.step == step)
            phases = set(in_step.of_kind(Kind.PHASE).strings("name"))
            assert phases == {"data", "forward", "backward", "comm_wait", "optimizer"}
            colls = in_step.of_kind(Kind.COLLECTIVE)
            by_tag = Counter()
            for tag, nbytes in zip(colls.strings("tag"), colls.nbytes.tolist(), strict=True):
                by_tag[tag] += nbytes
            assert by_tag == {"gradients": PARAM_BYTES, "user": 4, "buffers": 2 * 256 * 4 + 8}


def test_sequence_numbers_match_across_ranks(runs) -> None:
    ev = ingest(runs["ddp"]).run.events.of_kind(Kind.COLLECTIVE)
    per_rank = []
    for rank in (0, 1):
        rows = ev.select(ev.rank == rank)
        per_rank.append(
            dict(
                zip(
                    rows.seq.tolist(),
                    zip(rows.strings("name"), rows.nbytes.tolist(), strict=True),
                    strict=True,
                )
            )
        )
    assert per_rank[0] == per_rank[1]
    assert sorted(per_rank[0]) == list(range(len(per_rank[0])))


def test_the_run_analyses_like_a_recorded_one(runs) -> None:
    analysis = analysed(ingest(runs["ddp"]).run)
    assert analysis.workload == KINETO
    assert analysis.steps is not None and len(analysis.steps.ranks) == 2
    rank0 = analysis.steps.ranks[0]
    assert rank0.num_steps == 3
    assert {p.phase for p in rank0.phases} >= {"forward", "backward", "optimizer", "step"}
    assert analysis.collectives is not None
    sizes = {(s.op, s.nbytes) for s in analysis.collectives.sizes}
    assert ("all_reduce", 4) in sizes


@needs_traces
@pytest.mark.parametrize(
    ("name", "world", "steps"),
    [
        ("hta_nccl_data_rank0.json.gz", 2, 3),
        ("hta_sampled_rank-0.json.gz", 128, 2),
        ("hta_sampled_rank-1.json.gz", 128, 2),
        ("hta_cpu_only_gloo_rank-34.json.gz", 300, 1),
    ],
)
def test_real_shared_traces(name: str, world: int, steps: int) -> None:
    doc = load(TRACES / name)
    rank = doc["distributedInfo"]["rank"]
    result = ingest(TRACES / name)
    assert result.run.meta.world_size == doc["distributedInfo"]["world_size"] == world
    assert ingested(result, rank) == expected_by_hand(doc["traceEvents"], world)
    assert int((result.run.events.kind == Kind.STEP).sum()) == steps
    assert any(f"1 of {world} ranks" in p and "missing" in p for p in result.problems)


def cut_inside_an_event(text: str, fraction: float) -> str:
    return text[: text.index('"ph"', int(len(text) * fraction)) + 3]


def complete_events(text: str) -> list[dict]:
    """Elements of traceEvents up to the first that does not parse (by hand, json module)."""
    decoder, out = json.JSONDecoder(), []
    pos = text.index("[", text.index('"traceEvents"')) + 1
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out
        out.append(value)


def test_truncated_json_keeps_what_is_complete(runs, tmp_path: Path) -> None:
    text = rank_file(runs["ddp"], 0).read_text()
    cut = cut_inside_an_event(text, 0.6)
    path = tmp_path / "rank0.json"
    path.write_text(cut)
    kept = complete_events(cut)
    result = ingest(path)
    (problem,) = [p for p in result.problems if "stopped at byte" in p]
    assert f"after {len(kept):,} complete events" in problem
    assert ingested(result, 0) == expected_by_hand(kept, 2)
    assert result.run.ranks[0].status == "interrupted"


def test_truncated_gzip_keeps_what_is_complete(runs, tmp_path: Path) -> None:
    data = rank_file(runs["ops"], 1).read_bytes()
    path = tmp_path / "rank1.pt.trace.json.gz"
    path.write_bytes(data[: int(len(data) * 0.7)])
    result = ingest(path)
    assert any("gzip stream is cut short" in p for p in result.problems)
    full = ingested(ingest(rank_file(runs["ops"], 1)), 1)
    assert ingested(result, 1) <= full


def test_missing_rank_is_named_and_the_rest_analysed(runs, tmp_path: Path) -> None:
    shutil.copy(rank_file(runs["ddp"], 1), tmp_path)
    result = ingest(tmp_path)
    assert any("1 of 2 ranks: rank(s) 0 missing" in p for p in result.problems)
    assert result.run.events.ranks() == [1]
    assert analysed(result.run).steps is not None


def test_ranks_of_two_runs_keep_one_run(runs, tmp_path: Path) -> None:
    shutil.copy(rank_file(runs["ddp"], 0), tmp_path)
    shutil.copy(rank_file(runs["ops"], 1), tmp_path)
    result = ingest(tmp_path)
    (mixed,) = [p for p in result.problems if p.startswith("mixed runs")]
    assert rank_file(runs["ddp"], 0).name in mixed  # the earlier run is left out
    assert result.run.events.ranks() == [1]
    assert any("rank(s) 0 missing" in p for p in result.problems)


@needs_traces
def test_ranks_of_runs_with_different_world_sizes(tmp_path: Path) -> None:
    for name in ("hta_nccl_data_rank0.json.gz", "hta_sampled_rank-0.json.gz"):
        shutil.copy(TRACES / name, tmp_path)
    shutil.copy(TRACES / "hta_sampled_rank-1.json.gz", tmp_path)
    (tmp_path / "notes.txt").write_text("profiled on Tuesday")
    result = ingest(tmp_path)
    assert any("mixed runs" in p and "hta_nccl_data_rank0" in p for p in result.problems)
    assert any("notes.txt: not a trace" in p for p in result.problems)
    assert result.run.meta.world_size == 128
    assert result.run.events.ranks() == [0, 1]


def empty_trace(path: Path) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        pass
    prof.export_chrome_trace(str(path))


def test_empty_trace(runs, tmp_path: Path) -> None:
    empty = tmp_path / "alone" / "rank1.json"
    empty.parent.mkdir()
    empty_trace(empty)
    with pytest.raises(IngestError, match="no trace events"):
        ingest(empty)
    folder = tmp_path / "both"
    folder.mkdir()
    shutil.copy(empty, folder)
    shutil.copy(rank_file(runs["ddp"], 0), folder)
    result = ingest(folder)
    assert any("rank1.json: empty trace" in p for p in result.problems)
    assert result.run.events.ranks() == [0]


def single_process_trace(path: Path) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    prof.export_chrome_trace(str(path))


def test_rank_from_the_file_name_else_a_clear_error(tmp_path: Path) -> None:
    single_process_trace(tmp_path / "a.json")
    result = ingest(tmp_path / "a.json")
    assert any("taken as rank 0" in p for p in result.problems)
    single_process_trace(tmp_path / "b.json")
    with pytest.raises(IngestError, match="cannot tell the rank of a.json, b.json"):
        ingest(tmp_path)
    named = tmp_path / "named"
    named.mkdir()
    (tmp_path / "a.json").rename(named / "rank3.json")
    assert ingest(named).run.meta.ranks.keys() == {"3"}
