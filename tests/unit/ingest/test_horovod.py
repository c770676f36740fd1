"""Horovod timelines: ops and bytes per tensor instance, the per-activity table, a cut file.

Expectations are computed here by hand from the JSON (json module, own B/E replay), not
with the ingester's code.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from rich.console import Console

from scalescope.events import Kind
from scalescope.ingest import HOROVOD, ingest
from scalescope.report.views.horovod import render_horovod_phases, render_ingest_source

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"real traces not found at {TRACES} (a clone outside the workspace has no ../shared)",
)
TIMELINES = ["horovod_timeline_gpu_8workers.json", "horovod_timeline_cpu_8workers.json"]
OPS = {"ALLREDUCE": "all_reduce", "BROADCAST": "broadcast"}
DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}


def complete_elements(text: str) -> list[dict]:
    """Elements of the top-level array up to the first one that does not parse."""
    decoder, out = json.JSONDecoder(), []
    pos = text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out
        out.append(value)


def replay(events: list[dict]) -> dict:
    """By hand: finished top-level ops (op, nbytes), open ones, and per-name wall/self/count."""
    stacks: dict[int, list[list]] = defaultdict(list)
    ops: Counter = Counter()
    wall: dict[str, float] = defaultdict(float)
    child: dict[int, float] = defaultdict(float)
    own: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for e in events:
        if e["ph"] == "B":
            stacks[e["pid"]].append([e["name"], e["ts"], id(e)])
        elif e["ph"] == "E":
            name, start, key = stacks[e["pid"]].pop()
            dur = e["ts"] - start
            wall[name] += dur
            own[name] += dur - child.pop(key, 0.0)
            count[name] += 1
            if stacks[e["pid"]]:
                child[stacks[e["pid"]][-1][2]] += dur
            elif name in OPS:
                args = e.get("args") or {}
                shape = json.loads(args["shape"]) if "shape" in args else None
                size = DTYPE_BYTES.get(args.get("dtype", ""), 0)
                ops[(OPS[name], size * math.prod(shape) if shape is not None else 0)] += 1
    still_open = sum(1 for s in stacks.values() if s)
    return {"ops": ops, "wall": wall, "self": own, "count": count, "open": still_open}


@pytest.mark.parametrize("name", TIMELINES)
def test_ops_and_bytes_per_instance_match_the_file(name: str) -> None:
    events = json.loads((TRACES / name).read_text())
    expected = replay(events)
    result = ingest(TRACES / name)
    assert result.format == HOROVOD
    assert result.run.meta.world_size == 8  # rank marks 0..7
    rows = result.run.events.of_kind(Kind.COLLECTIVE)
    got = Counter(zip(rows.strings("name"), rows.nbytes.tolist(), strict=True))
    assert got == expected["ops"]
    assert (rows.dur_ns >= 0).all()
    assert set(rows.rank.tolist()) == {0}
    assert sorted(rows.seq.tolist()) == list(range(len(rows)))


@pytest.mark.parametrize("name", TIMELINES)
def test_phase_table_matches_a_replay_by_hand(name: str) -> None:
    expected = replay(json.loads((TRACES / name).read_text()))
    result = ingest(TRACES / name)
    table = {row.phase: row for row in result.horovod_phases}
    assert set(table) == set(expected["count"])
    for phase, row in table.items():
        assert row.occurrences == expected["count"][phase]
        assert row.wall_ms == pytest.approx(expected["wall"][phase] / 1e3)
        assert row.self_ms == pytest.approx(expected["self"][phase] / 1e3)
        assert row.avg_wall_ms == pytest.approx(row.wall_ms / row.occurrences)
    walls = [row.wall_ms for row in result.horovod_phases]
    assert walls == sorted(walls, reverse=True)


def test_wait_is_the_negotiation_and_transfer_the_mpi_activity() -> None:
    events = json.loads((TRACES / "horovod_timeline_cpu_8workers.json").read_text())
    spans: dict[tuple[int, str], list[float]] = defaultdict(list)
    stacks: dict[int, list[tuple[str, float]]] = defaultdict(list)
    dense = None
    for e in events:
        if e["ph"] == "B":
            stacks[e["pid"]].append((e["name"], e["ts"]))
        elif e["ph"] == "E":
            name, start = stacks[e["pid"]].pop()
            spans[(e["pid"], name)].append(e["ts"] - start)
            if (e.get("args") or {}).get("shape") == "[9216, 128]":
                dense = e["pid"]
    result = ingest(TRACES / "horovod_timeline_cpu_8workers.json")
    big = max((w for w in result.horovod_waits if w.op == "all_reduce"), key=lambda w: w.nbytes)
    assert big.nbytes == 9216 * 128 * 4  # the dense layer's gradient, one tensor (one pid)
    negotiate = spans[(dense, "NEGOTIATE_ALLREDUCE")]
    transfer = spans[(dense, "MPI_ALLREDUCE")]
    assert big.instances == len(negotiate) == len(transfer)
    assert big.skew_avg_us == pytest.approx(np.mean(negotiate))
    assert big.skew_max_us == pytest.approx(max(negotiate))
    assert big.transfer_avg_us == pytest.approx(np.mean(transfer))
    share = 100 * big.skew_avg_us / (big.skew_avg_us + big.transfer_avg_us)
    assert big.wait_share_pct == pytest.approx(share)


def test_a_timeline_cut_mid_array_keeps_every_complete_event(tmp_path: Path) -> None:
    """Horovod writes the timeline as it goes; a killed job leaves it without its ``]``."""
    text = (TRACES / "horovod_timeline_cpu_8workers.json").read_text()
    cut_at = text.index('"ph": "E"', len(text) // 2) + 5  # inside an event
    cut = tmp_path / "timeline.json"
    cut.write_text(text[:cut_at])
    expected = replay(complete_elements(text[:cut_at]))
    result = ingest(cut)
    assert any(
        "before the array is closed" in p and "stopped at byte" in p for p in result.problems
    )
    assert any("still open" in p for p in result.problems)
    rows = result.run.events.of_kind(Kind.COLLECTIVE)
    done = rows.select(rows.dur_ns >= 0)
    assert Counter(zip(done.strings("name"), done.nbytes.tolist(), strict=True)) == expected["ops"]
    assert expected["open"] > 0
    assert int((rows.dur_ns < 0).sum()) <= expected["open"]
    assert int((rows.dur_ns < 0).sum()) >= 1
    assert result.run.meta.status == "interrupted"
    analysis = analysed(result.run)
    assert analysis.collectives is not None
    assert analysis.collectives.incomplete_calls == int((rows.dur_ns < 0).sum())


def test_gradients_and_parameters_are_tagged_from_tensor_names() -> None:
    result = ingest(TRACES / "horovod_timeline_gpu_8workers.json")
    rows = result.run.events.of_kind(Kind.COLLECTIVE)
    tags = Counter(zip(rows.strings("name"), rows.strings("tag"), strict=True))
    assert tags[("broadcast", "parameters")] == 50
    assert tags[("all_reduce", "gradients")] == 8 * 154
    assert any("without dtype/shape" in p for p in result.problems)  # broadcast ends carry none


def test_the_view_renders_both_tables() -> None:
    result = ingest(TRACES / "horovod_timeline_cpu_8workers.json")
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    render_ingest_source(result, console)
    render_horovod_phases(result, console)
    text = out.getvalue()
    assert "Horovod timeline" in text
    for phase in ("NEGOTIATE_ALLREDUCE", "MPI_ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER"):
        assert phase in text
    assert "wait avg ms" in text
