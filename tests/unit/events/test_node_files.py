"""events/node_file.py and node_stats.py: a node file built from the node's rank files holds
exactly what the rank files' rows say (recomputed here row by row, in plain Python); the
generator's fast path (benchmarks/synthetic_nodes.py) writes the same files; a missing or cut
node file is a one-line error naming it."""

from __future__ import annotations

import math
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.events.files import events_path, node_file_path  # noqa: E402
from scalescope.events.node_file import (  # noqa: E402
    NodeFileError,
    iter_node_tables,
    read_manifest,
    read_node_table,
)
from scalescope.events.node_stats import build_run_node_files  # noqa: E402
from scalescope.events.reader import read_event_stream  # noqa: E402
from synthetic_nodes import write_scale_run  # noqa: E402


def _by_hand(run_dir: Path, ranks: list[int]) -> list[dict]:
    """The ``colls`` rows of a node from its ranks' rows, one row at a time."""
    acc: dict[tuple, dict] = {}
    arrivals: dict[tuple, list] = defaultdict(list)
    for rank in ranks:
        rows = read_event_stream(events_path(run_dir, rank)).table.to_pylist()
        starts = {r["step"]: r["start_ns"] for r in rows if r["kind"] == 2}
        last_end: dict[str, int] = {}
        for r in rows:
            if r["kind"] != 1 or r["dur_ns"] < 0:
                continue
            end = r["start_ns"] + r["dur_ns"]
            arrive = max(r["start_ns"], last_end.get(r["group"], r["start_ns"]))
            last_end[r["group"]] = end
            if r["step"] not in starts:
                continue
            cls = int(math.floor(math.log2(r["nbytes"]))) if r["nbytes"] > 0 else -1
            key = (r["step"], r["group"], r["name"], cls)
            a = acc.setdefault(key, {"ranks": set(), "calls": 0, "bytes": 0, "call_sum_ns": 0,
                                     "call_max_ns": 0, "transfer_min_ns": None,
                                     "arrive_sum_ns": 0})  # fmt: skip
            a["ranks"].add(rank)
            a["calls"] += 1
            a["bytes"] += r["nbytes"]
            a["call_sum_ns"] += r["dur_ns"]
            a["call_max_ns"] = max(a["call_max_ns"], r["dur_ns"])
            transfer = end - arrive
            a["transfer_min_ns"] = min(a["transfer_min_ns"] or transfer, transfer)
            a["arrive_sum_ns"] += arrive - starts[r["step"]]
            arrivals[key].append((arrive - starts[r["step"]], rank))
    out = []
    for key in sorted(acc):
        a = acc[key]
        latest = max(arrivals[key], key=lambda x: (x[0], -x[1]))
        out.append({"step": key[0], "group": key[1], "op": key[2], "size_class": key[3],
                    "ranks": len(a["ranks"]), "calls": a["calls"], "bytes": a["bytes"],
                    "call_sum_ns": a["call_sum_ns"], "call_max_ns": a["call_max_ns"],
                    "transfer_min_ns": a["transfer_min_ns"],
                    "arrive_min_ns": min(x[0] for x in arrivals[key]),
                    "arrive_max_ns": latest[0], "arrive_sum_ns": a["arrive_sum_ns"],
                    "last_rank": latest[1]})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """32 ranks (4 nodes) of the pipeline layout with a slow link, every rank's file."""
    run = tmp_path_factory.mktemp("nodes") / "run"
    write_scale_run(run, 32, 30, "slow_link", seed=3, layout="pipeline", sample_every=0)
    return run


def test_a_node_file_from_rank_files_holds_what_their_rows_say(pipeline_run, tmp_path):
    manifest = build_run_node_files(pipeline_run, 500, tmp_path)
    node = manifest.nodes[1]
    colls = read_node_table(node_file_path(tmp_path, 0, node.node, "colls"), "colls")
    assert colls.to_pylist() == _by_hand(pipeline_run, node.ranks)
    steps = read_node_table(node_file_path(tmp_path, 0, node.node, "steps"), "steps")
    assert steps.num_rows == 30 * len(node.ranks)
    assert sorted(set(steps.column("rank").to_pylist())) == node.ranks


@pytest.mark.parametrize("layout,plant", [("pipeline", "slow_link"), ("ddp", "slow_node")])
def test_the_generators_node_files_are_the_builders(tmp_path, layout, plant):
    run = tmp_path / "run"
    write_scale_run(run, 24 if layout == "ddp" else 32, 520, plant, seed=5, layout=layout,
                    sample_every=0)  # fmt: skip
    manifest = read_manifest(run)
    assert manifest.windows == [0, 500]
    rebuilt = tmp_path / "rebuilt"
    build_run_node_files(run, manifest.window_steps, rebuilt)
    for table in ("steps", "colls"):
        mine = list(iter_node_tables(run, manifest, table))
        theirs = list(iter_node_tables(rebuilt, manifest, table))
        assert len(mine) == len(theirs) == 2 * len(manifest.nodes)
        for (w, n, a), (_, _, b) in zip(mine, theirs, strict=True):
            assert a.equals(b), f"window {w} node {n} {table}"


def test_a_missing_node_file_is_one_line_naming_it(pipeline_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(pipeline_run, run)
    manifest = read_manifest(run)
    gone = node_file_path(run, 0, 2, "colls")
    gone.unlink()
    with pytest.raises(NodeFileError) as info:
        list(iter_node_tables(run, manifest, "colls"))
    assert str(info.value) == f"{gone}: missing (the manifest lists node and window)"


def test_a_cut_node_file_is_one_line_naming_it(pipeline_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(pipeline_run, run)
    cut = node_file_path(run, 0, 1, "steps")
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(NodeFileError) as info:
        read_node_table(cut, "steps")
    message = str(info.value)
    assert message.startswith(f"{cut}: not a complete node file")
    assert "\n" not in message


def test_a_missing_manifest_is_one_line(tmp_path):
    with pytest.raises(NodeFileError, match="nodes.json: missing"):
        read_manifest(tmp_path)


SAME_AT_SUMMARY = ("step", "group", "op", "size_class", "ranks", "calls", "bytes", "call_sum_ns")
"""What a SUMMARY row keeps exactly: the node file's other columns (arrivals, the longest
call, the least transfer) take each summarised call at its row's means."""


def test_a_run_recorded_as_summaries_gives_the_node_files_of_every_call(
    pipeline_run, tmp_path, monkeypatch
):
    """The same run folded as at ``--record summary`` (the default; windows: steps 0-1 and
    2 in every 10): every step's calls are in the node files, counted once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench"))
    from levels import summarised_run

    monkeypatch.setenv("SCALESCOPE_RECORD_WINDOWS", "2:10:2")
    summarised_run(pipeline_run, tmp_path / "summary", warmup_steps=1)
    kinds = read_event_stream(events_path(tmp_path / "summary", 0)).table.column("kind")
    assert 5 in kinds.to_pylist() and kinds.to_pylist().count(1) < 0.5 * len(kinds)
    built = {}
    for name in ("full", "summary"):
        source = pipeline_run if name == "full" else tmp_path / "summary"
        manifest = build_run_node_files(source, 500, tmp_path / f"{name}-nodes")
        built[name] = [
            t.select(SAME_AT_SUMMARY).to_pylist()
            for _, _, t in iter_node_tables(tmp_path / f"{name}-nodes", manifest, "colls")
        ]
    assert built["summary"] == built["full"] and sum(map(len, built["full"])) > 0
