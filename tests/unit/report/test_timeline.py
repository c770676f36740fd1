"""Chrome trace timeline: the trace-event format, one process per rank, aligned and bounded.

Also the run builder the HTML tests (unit and browser) share: ``build_run``.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from run_builders import Row, coll_row, mem_row, phase_row, step_row, write_run_dir

from scalescope.analyze.ranks.clocks import align_clocks, clock_offsets
from scalescope.events import Kind, RankMeta, Run, RunMeta, load_run
from scalescope.events.run import ClockSync
from scalescope.report.media.timeline import (
    PID_BASE,
    chrome_trace,
    default_steps,
    pid_of,
)

MS = 1_000_000
STEP_MS = 100
WARMUP = 1
BUCKETS = {"large": 4 * 1024 * 1024, "small": 256 * 1024, "last": 1024 * 1024}
BUFFER_BYTES = 1024
PARAM_BYTES = 8 * 1024 * 1024
OFFSETS = {0: 0, 1: 7 * MS}
"""Rank 1's perf clock reads 7 ms less than rank 0's: add 7 ms to put it on rank 0's."""
FORWARD_MS = {0: 20, 1: 30}
"""Rank 1 is the straggler: its forward is 10 ms longer, so it arrives last at every bucket."""


def _step_rows(rank: int, step: int, seq: int) -> tuple[list[Row], int]:
    """One step on the common clock (rank 0's): phases, a buffer broadcast, three gradient
    all_reduces (the small one overlaps the large one), each completing 3 ms after the
    later rank issued it."""
    t = 50 * MS + step * STEP_MS * MS
    fwd = FORWARD_MS.get(rank, FORWARD_MS[0]) * MS
    issue = {b: t + 5 * MS + fwd + d for b, d in (("large", 10 * MS), ("small", 12 * MS))}
    issue["last"] = t + 5 * MS + fwd + 30 * MS
    late = {b: max(issue[b] - fwd + FORWARD_MS[r] * MS for r in FORWARD_MS) for b in issue}
    done = {"large": late["large"] + 3 * MS, "small": late["large"] + 5 * MS}
    done["last"] = late["last"] + 3 * MS
    end_bwd = t + 5 * MS + fwd + 30 * MS
    rows = [
        step_row(step, t, STEP_MS * MS, 32),
        phase_row(step, "data", t, 5 * MS),
        phase_row(step, "forward", t + 5 * MS, fwd),
        coll_row(step, "broadcast", t + 5 * MS, 50_000, BUFFER_BYTES, seq, "buffers"),
        phase_row(step, "backward", t + 5 * MS + fwd, 30 * MS),
        phase_row(step, "comm_wait", end_bwd, done["last"] - end_bwd),
        phase_row(step, "optimizer", done["last"], 5 * MS),
        mem_row(step, "rss_peak", 2 * 1024**3),
    ]
    for i, name in enumerate(("large", "small", "last"), start=1):
        dur = done[name] - issue[name]
        rows.append(coll_row(step, "all_reduce", issue[name], dur, BUCKETS[name], seq + i))
    return rows, seq + 4


def rank_rows(rank: int, num_steps: int, hang: bool = False) -> list[Row]:
    """Rows of one rank on its own clock (common time minus its offset)."""
    rows = [coll_row(0, "broadcast", 10 * MS, 3 * MS, PARAM_BYTES, 0, "parameters")]
    seq = 1
    for step in range(num_steps):
        step_rows, seq = _step_rows(rank, step, seq)
        rows += step_rows
    if hang and rank == 0:
        t = 50 * MS + num_steps * STEP_MS * MS
        rows.append(coll_row(num_steps, "all_reduce", t, -1, BUCKETS["large"], seq))
    off = OFFSETS.get(rank, 0)
    return [(*r[:3], r[3] - off if r[1] != int(Kind.MEMORY) else 0, *r[4:]) for r in rows]


def _rank_meta(rank: int, world_size: int, host: str, error: str | None, steps: int) -> RankMeta:
    offset = OFFSETS.get(rank, 0)
    return RankMeta(
        rank=rank,
        local_rank=0,
        world_size=world_size,
        hostname=host,
        status="failed" if error else "completed",
        exit_code=1 if error else 0,
        error=error,
        steps=steps,
        clock=[ClockSync(when="start", offset_ns=offset, uncertainty_ns=1000)],
    )


def build_run(
    run_dir: Path,
    *,
    num_steps: int = 6,
    world_size: int = 2,
    run_id: str = "run-1",
    hostnames: tuple[str, ...] = ("node-a", "node-b"),
    script_args: tuple[str, ...] = ("--epochs", "1"),
    hang: bool = False,
    errors: dict[int, str] | None = None,
    probe: bool = True,
) -> Run:
    """A run (2 ranks unless told; ranks past 1 behave as rank 0, hosts past the given ones
    are node-N) written through the real writers and loaded back with ``load_run``."""
    hosts = [*hostnames, *(f"node-{r}" for r in range(len(hostnames), world_size))]
    ranks = {
        r: _rank_meta(r, world_size, hosts[r], (errors or {}).get(r), num_steps)
        for r in range(world_size)
    }
    meta = RunMeta(
        run_id=run_id,
        command=["scalescope", "run", "train.py", *script_args],
        script="train.py",
        script_args=list(script_args),
        world_size=world_size,
        nproc_per_node=1,
        nnodes=world_size,
        warmup_steps=WARMUP,
        probe=probe,
        hostnames=hosts,
        start_time=1000.0,
        end_time=1010.0,
        status="failed" if errors else "completed",
        ranks={str(r): m for r, m in ranks.items()},
    )
    events = {r: [rank_rows(r, num_steps, hang)] for r in ranks} if probe else {}
    return load_run(write_run_dir(run_dir, meta, events, ranks))


# ---- trace-event format checks -------------------------------------------------------

REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"},
    "i": {"name", "cat", "ph", "ts", "pid", "tid", "s"},
    "M": {"name", "ph", "pid", "tid", "args"},
}


def check_trace_format(trace: dict) -> None:
    """The JSON object form of the Trace Event Format, as Perfetto and chrome://tracing load it."""
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    assert trace["displayTimeUnit"] in ("ms", "ns")
    assert json.loads(json.dumps(trace)) == trace  # plain JSON types only
    for e in trace["traceEvents"]:
        assert e["ph"] in REQUIRED, e
        assert REQUIRED[e["ph"]] <= set(e), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["pid"] > 0 and e["tid"] > 0 if e["ph"] != "M" else e["pid"] > 0
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] in ("X", "i"):
            assert isinstance(e["ts"], int | float) and e["ts"] >= 0
            assert isinstance(e["args"], dict)
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        if e["ph"] == "M":
            assert e["name"] in (
                "process_name",
                "process_sort_index",
                "thread_name",
                "thread_sort_index",
            )


def check_lanes_do_not_overlap(trace: dict) -> None:
    """Complete events of one thread never partly overlap (they would not nest)."""
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - 1e-6


def _events(trace: dict, ph: str = "X", **match) -> list[dict]:
    return [
        e
        for e in trace["traceEvents"]
        if e["ph"] == ph and all(e.get(k) == v for k, v in match.items())
    ]


@pytest.fixture
def run(tmp_path) -> Run:
    return build_run(tmp_path / "run", num_steps=14, hang=True)


def test_trace_has_the_format(run):
    trace = chrome_trace(run, OFFSETS)
    check_trace_format(trace)
    check_lanes_do_not_overlap(trace)
    assert trace["metadata"]["run_id"] == "run-1"


def test_one_process_per_rank_with_names(run):
    trace = chrome_trace(run, OFFSETS)
    pids = {e["pid"] for e in trace["traceEvents"]}
    assert pids == {pid_of(0), pid_of(1)} == {PID_BASE, PID_BASE + 1}
    names = {e["pid"]: e["args"]["name"] for e in _events(trace, "M", name="process_name")}
    assert names == {pid_of(0): "rank 0 (node-a)", pid_of(1): "rank 1 (node-b)"}
    sort = {
        e["pid"]: e["args"]["sort_index"] for e in _events(trace, "M", name="process_sort_index")
    }
    assert sort == {pid_of(0): 0, pid_of(1): 1}
    threads = {e["args"]["name"] for e in _events(trace, "M", name="thread_name", pid=pid_of(0))}
    assert {"steps", "phases", "collectives", "collectives 2"} <= threads


def test_default_steps_are_the_first_ten_after_warmup(run):
    assert default_steps(run.events, WARMUP) == range(1, 11)
    trace = chrome_trace(run, OFFSETS)
    steps = {e["args"]["step"] for e in _events(trace)}
    assert steps == set(range(1, 11))
    assert trace["metadata"]["steps"] == [1, 11]
    assert len(_events(trace, cat="step")) == 2 * 10


def test_steps_bound_the_trace(run):
    trace = chrome_trace(run, OFFSETS, steps=range(3, 5))
    assert {e["args"]["step"] for e in _events(trace)} == {3, 4}
    per_rank_step = 1 + 5 + 4  # step, phases, collectives
    assert len(_events(trace)) == 2 * 2 * per_rank_step
    assert not _events(trace, "i")
    assert chrome_trace(run, OFFSETS, steps=range(100, 110))["traceEvents"][0]["ph"] == "M"


def test_events_carry_names_and_args(run):
    trace = chrome_trace(run, OFFSETS, steps=range(2, 3))
    phases = [e["name"] for e in _events(trace, cat="phase", pid=pid_of(0))]
    assert phases == ["data", "forward", "backward", "comm_wait", "optimizer"]
    [large] = [
        e
        for e in _events(trace, cat="collective", pid=pid_of(1))
        if e["args"]["bytes"] == BUCKETS["large"]
    ]
    assert large["name"] == "all_reduce"
    assert large["args"] == {
        "step": 2,
        "bytes": BUCKETS["large"],
        "dtype": "float32",
        "group": "0",
        "seq": 1 + 4 * 2 + 1,
        "tag": "gradients",
    }
    assert large["dur"] == pytest.approx(3000.0)  # the later rank waits for no one
    [step] = _events(trace, cat="step", pid=pid_of(0))
    assert step["name"] == "step 2" and step["args"] == {"step": 2, "samples": 32}
    assert step["dur"] == pytest.approx(STEP_MS * 1000.0)


def test_incomplete_collective_is_an_instant_event(run):
    trace = chrome_trace(run, OFFSETS, steps=range(12, 15))
    check_trace_format(trace)
    [hung] = _events(trace, "i")
    assert hung["name"] == "all_reduce (never completed)"
    assert hung["pid"] == pid_of(0) and hung["args"]["step"] == 14
    assert hung["s"] == "t"
    tid_names = {e["tid"]: e["args"]["name"] for e in _events(trace, "M", name="thread_name")}
    assert tid_names[hung["tid"]] == "collectives"


def test_offsets_align_the_ranks(run):
    aligned = chrome_trace(run, OFFSETS, steps=range(2, 3))
    starts = {e["pid"]: e["ts"] for e in _events(aligned, cat="step")}
    assert starts[pid_of(0)] == pytest.approx(starts[pid_of(1)])
    assert min(e["ts"] for e in _events(aligned)) == 0
    raw = chrome_trace(run, None, steps=range(2, 3))
    starts = {e["pid"]: e["ts"] for e in _events(raw, cat="step")}
    assert starts[pid_of(0)] - starts[pid_of(1)] == pytest.approx(OFFSETS[1] / 1e3)
    assert raw["metadata"]["offsets_ns"] == {"0": 0, "1": 0}
    assert aligned["metadata"]["offsets_ns"] == {"0": 0, "1": OFFSETS[1]}


def test_run_offsets_use_the_probe_clock_samples(run):
    assert clock_offsets(align_clocks(run)) == OFFSETS


def test_probe_off_gives_an_empty_trace(tmp_path):
    run = build_run(tmp_path / "off", probe=False)
    trace = chrome_trace(run)
    check_trace_format(trace)
    assert not _events(trace) and not _events(trace, "i")


def test_user_strings_are_json_escaped(tmp_path):
    host = '</script><script>alert("x")</script>'
    run = build_run(tmp_path / "evil", hostnames=(host, "b"), run_id='"quoted\nid')
    path = tmp_path / "trace.json"
    path.write_bytes(msgspec.json.encode(chrome_trace(run, OFFSETS)))
    loaded = json.loads(path.read_text())
    check_trace_format(loaded)
    names = [e["args"]["name"] for e in _events(loaded, "M", name="process_name")]
    assert names[0] == f"rank 0 ({host})"
    assert loaded["metadata"]["run_id"] == '"quoted\nid'


def test_ranks_bound_the_trace(tmp_path):
    run = build_run(tmp_path / "four", world_size=4)
    trace = chrome_trace(run, clock_offsets(align_clocks(run)), ranks=[1, 3])
    check_trace_format(trace)
    assert {e["pid"] for e in trace["traceEvents"]} == {pid_of(1), pid_of(3)}
    assert set(trace["metadata"]["offsets_ns"]) == {"1", "3"}
