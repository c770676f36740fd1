"""The live view's figures against the rows written, and its rendering of many ranks."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import msgspec
import pytest
from analysed import analysed  # noqa: E402
from rich.console import Console
from run_builders import phase_row, step_row, write_run_dir

from scalescope.analyze.layouts.coordinates import RankPlace
from scalescope.analyze.live import LiveSnapshot, RankLive, live_snapshot
from scalescope.events import EventWriter, RankMeta, RunMeta
from scalescope.events.run import (
    GroupMeta,
    PipelineMeta,
    events_path,
    rank_meta_path,
    write_json_atomic,
)
from scalescope.live.run_view import LiveTop, RankMetas
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import LiveExtras, LiveFrame
from scalescope.report.views.live import phase_bar, rank_table

MS = 1_000_000
PHASES_MS = {0: {"data": 1, "forward": 3, "backward": 4, "optimizer": 1},
             1: {"data": 11, "forward": 3, "backward": 4, "optimizer": 1}}  # fmt: skip
STEPS, SAMPLES = 30, 8


def frame(snap: LiveSnapshot, extras: LiveExtras = LiveExtras()):
    """The live view as ``top`` draws it: through the registry."""
    return document_renderable(document(LiveFrame(snapshot=snap, extras=extras)))


def rank_rows(rank: int) -> list:
    phases = PHASES_MS[rank]
    step_ms = sum(phases.values()) + 1  # 1 ms of "other"
    rows, t = [], 0
    for s in range(STEPS):
        rows.append(step_row(s, t, step_ms * MS, SAMPLES))
        at = t
        for name, ms in phases.items():
            rows.append(phase_row(s, name, at, ms * MS))
            at += ms * MS
        t += step_ms * MS
    return rows


def write_run(tmp_path: Path) -> Path:
    meta = RunMeta(run_id="live", command=[], script="x.py", world_size=2, warmup_steps=1,
                   start_time=time.time() - 30)  # fmt: skip
    failed = RankMeta(rank=1, world_size=2, status="failed", exit_code=1,
                      error="Traceback ...\nRuntimeError: out of cheese\n")  # fmt: skip
    ok = RankMeta(rank=0, world_size=2)
    return write_run_dir(tmp_path, meta, {r: [rank_rows(r)] for r in (0, 1)}, {0: ok, 1: failed})


def test_figures_match_the_rows(tmp_path: Path) -> None:
    top = LiveTop(write_run(tmp_path))
    text = render(top.frame())
    snap = top_snapshot(top)
    assert [r.steps for r in snap.ranks] == [STEPS, STEPS]
    for r in snap.ranks:
        expected = sum(PHASES_MS[r.rank].values()) + 1
        assert abs(r.step_ms - expected) < 1e-6
        assert dict(r.phases_ms)["data"] == PHASES_MS[r.rank]["data"]
        assert abs(dict(r.phases_ms)["other"] - 1.0) < 1e-6
    span_s = STEPS * (sum(PHASES_MS[1].values()) + 1) / 1e3  # the longer rank's span
    assert abs(snap.samples_per_s_mean - 2 * STEPS * SAMPLES / span_s) < 1e-6
    assert snap.ranks[1].status == "failed"
    assert snap.ranks[1].last_words == "RuntimeError: out of cheese"
    assert "rank 1 failed: RuntimeError: out of cheese" in text
    assert "FAILED" in text


def top_snapshot(top: LiveTop) -> LiveSnapshot:
    from scalescope.events.run import Run, read_rank_meta

    meta = top.tail.meta
    metas = {r: read_rank_meta(top.run_dir, r) for r in range(meta.world_size)}
    run = Run(top.run_dir, meta, top.tail.window(), {r: m for r, m in metas.items() if m})
    return live_snapshot(meta, analysed(run), top.tail.totals, metas, {}, {}, time.time())


def render(renderable: object, width: int = 120) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_bar_widths_follow_the_phase_split() -> None:
    rank = RankLive(0, "running", 5, 20.0, (("data", 10.0), ("forward", 5.0), ("other", 5.0)),
                    None, None, None, None)  # fmt: skip
    assert phase_bar(rank, width=20).plain == "d" * 10 + "f" * 5 + "." * 5


def test_thousands_of_ranks_are_summarised() -> None:
    ranks = tuple(
        RankLive(r, "running", 10, 100.0 + r, (("forward", 100.0 + r),), None, None, None, None)
        for r in range(2000)
    )
    dead = RankLive(2000, "died", 3, None, (), None, None, None, "its process ended")
    snap = LiveSnapshot("big", "running", 2001, 10.0, 3, 1.0, 1.0, (*ranks, dead), 1999, "forward")
    text = render(frame(snap, LiveExtras(finding="straggler, 5 % of the step")))
    lines = text.splitlines()
    assert len(lines) < 40
    assert any(line.split()[:2] == ["1999*", "running"] for line in lines)  # slowest
    assert any(line.split()[:2] == ["0", "running"] for line in lines)  # fastest
    assert any(line.split()[:2] == ["2000", "DIED"] for line in lines)
    assert "step ms of 2000 ranks: 100.0" in text and "2,099.0" in text
    assert "verdict so far: straggler, 5 % of the step" in text
    assert "straggler: rank" not in text, "the window's verdict is top's one headline"


def test_a_rank_gone_without_a_word_is_marked_died_with_its_last_stderr_line(
    tmp_path: Path,
) -> None:
    import socket
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    meta = RunMeta(run_id="live", command=[], script="x.py", world_size=2,
                   start_time=time.time())  # fmt: skip
    ranks = {r: RankMeta(rank=r, local_rank=r, world_size=2, hostname=socket.gethostname(),
                         pid=pid) for r, pid in ((0, os.getpid()), (1, gone.pid))}  # fmt: skip
    write_run_dir(tmp_path, meta, {r: [rank_rows(r)] for r in (0, 1)}, ranks)
    log = tmp_path / "logs" / "run_x" / "attempt_0" / "1" / "stderr.log"
    log.parent.mkdir(parents=True)
    log.write_text("loading...\nKilled by the OOM killer\n\n")
    text = render(LiveTop(tmp_path).frame())
    rows = {line.split()[0].rstrip("*"): line.split()[1] for line in text.splitlines()
            if line.split() and line.split()[0].rstrip("*").isdigit()}  # fmt: skip
    assert rows["0"] == "running" and rows["1"] == "DIED", text
    assert "rank 1 died: Killed by the OOM killer" in text


def test_a_rank_that_stopped_writing_is_silent(tmp_path: Path) -> None:
    top = LiveTop(write_run(tmp_path))
    top.frame()
    meta = top.tail.meta
    snap = live_snapshot(meta, None, top.tail.totals, {}, {}, {0: 3.0, 1: 20.0}, time.time())
    assert [r.status for r in snap.ranks] == ["running", "silent"]
    assert snap.ranks[1].last_words == "no events for 20 s"


def test_twenty_starting_ranks_are_shown_starting_with_their_stage() -> None:
    """Issue 27's 20 ranks on 2 cores at 53 s: starting, none SILENT, the longest shown."""
    ranks = tuple(
        RankLive(
            r,
            "starting",
            0,
            None,
            (),
            None,
            None,
            None,
            None,
            "import" if r < 12 else "init_process_group",
            40.0 - r,
        )  # fmt: skip
        for r in range(20)
    )
    snap = LiveSnapshot("many", "running", 20, 53.0, 0, None, None, ranks, None, None)
    text = render(frame(snap))
    assert "SILENT" not in text
    assert "starting (import, 40 s)" in text
    assert "16 of 20 ranks shown" in text
    assert "starting: 12 in import (up to 40 s), 8 in init_process_group (up to 28 s)" in text


def test_the_frame_is_a_document_the_page_says_too() -> None:
    from scalescope.report.document import Line
    from scalescope.report.media.html import document_html
    from scalescope.report.views.live import live_document

    dead = RankLive(1, "died", 3, None, (), None, None, None, "<b>gone</b>")
    ok = RankLive(0, "running", 5, 20.0, (("data", 10.0), ("forward", 10.0)), 1.0, None, None,
                  None)  # fmt: skip
    snap = LiveSnapshot("<run>", "running", 2, 10.0, 5, 1.0, 1.0, (ok, dead), 0, "data")
    doc = live_document(snap, LiveExtras(output=("<out>",)))
    page = document_html(doc)
    assert '<td class="bold red">DIED</td>' in page and "&lt;b&gt;gone" in page
    assert '<span class="yellow">dddddddddddd</span>' in page and "&lt;out&gt;" in page
    lines = [b.text + "".join(r for r, _ in b.after) for b in doc.blocks if isinstance(b, Line)]
    assert "verdict so far: none yet" in lines


def test_status_files_are_read_again_only_when_they_change(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    metas = RankMetas(run_dir)
    assert metas.get(1).status == "failed" and metas.get(0).status == "running"
    assert metas.get(1).status == "failed" and metas.reads == 2  # unchanged: not read again
    write_json_atomic(rank_meta_path(run_dir, 0), RankMeta(rank=0, world_size=2,
                                                           status="completed"))  # fmt: skip
    assert metas.get(0).status == "completed" and metas.reads == 3
    assert metas.get(5) is None


def test_a_costly_analysis_waits_while_the_totals_go_on(tmp_path: Path) -> None:
    """After an analysis that took long, new rows are counted at once and analysed once
    ANALYSIS_SHARE of the time allows; the run's end is analysed at once."""
    meta = RunMeta(run_id="live", command=[], script="x.py", world_size=1, status="running",
                   start_time=time.time())  # fmt: skip
    write_run_dir(tmp_path, meta, {})
    writer = EventWriter(events_path(tmp_path, 0), 0)
    writer.write(rank_rows(0)[:50])
    top = LiveTop(tmp_path)
    top.frame()
    assert top.analyses == 1
    top.analysis_s = 3600.0  # as if it had taken an hour
    writer.write(rank_rows(0)[50:100])
    top.frame()
    assert top.analyses == 1 and top.window_stale
    assert top.tail.totals[0].steps == 20  # the totals are current
    top.analysis_s = 0.0
    top.frame()
    assert top.analyses == 2 and not top.window_stale
    top.analysis_s = 3600.0
    writer.write(rank_rows(0)[100:])
    writer.close()
    write_json_atomic(tmp_path / "run.json", msgspec.structs.replace(meta, status="completed"))
    top.frame()
    assert top.analyses == 3 and top.analysis.steps.ranks[0].num_steps > 0


MESH = {"tp0": (0, 1), "tp1": (2, 3), "dp0": (0, 2), "dp1": (1, 3)}
"""A dp x tp mesh of 4 ranks, by label: its groups' members."""


def write_mesh_run(tmp_path: Path, pipeline: bool = False) -> Path:
    """A finished run of 4 ranks whose meta files name their mesh groups (and, with
    ``pipeline``, a stage: the dp index)."""
    meta = RunMeta(run_id="mesh", command=[], script="x.py", world_size=4, warmup_steps=1,
                   start_time=time.time() - 30, status="completed")  # fmt: skip
    ranks = {}
    for r in range(4):
        groups = {label: GroupMeta(ranks=list(members), dim=label[:2])
                  for label, members in MESH.items() if r in members}  # fmt: skip
        stage = PipelineMeta(stage=r // 2, stages=2, stages_held=[r // 2]) if pipeline else None
        ranks[r] = RankMeta(rank=r, world_size=4, status="completed", groups=groups,
                            pipeline=stage)  # fmt: skip
    return write_run_dir(tmp_path, meta, {r: [rank_rows(r % 2)] for r in range(4)}, ranks)


def rank_lines(text: str) -> dict[str, str]:
    """The rank table's rows by their rank, the rank cut off."""
    out = {}
    for line in text.splitlines():
        first, _, rest = line.strip().partition(" ")
        if first.rstrip("*").isdigit():
            out[first.rstrip("*")] = rest.strip()
    return out


def test_a_mesh_runs_ranks_show_their_place_and_a_data_parallel_runs_do_not(
    tmp_path: Path,
) -> None:
    mesh = render(LiveTop(write_mesh_run(tmp_path / "mesh"), finding_every_s=0).frame())
    header = next(line for line in mesh.splitlines() if line.split()[:2] == ["rank", "place"])
    assert header.split()[2] == "status", mesh
    rows = rank_lines(mesh)
    for r, (dp, tp) in {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}.items():
        assert rows[str(r)].startswith(f"dp {dp} · tp {tp}  completed"), mesh
    staged = render(LiveTop(write_mesh_run(tmp_path / "pipe", True), finding_every_s=0).frame())
    assert rank_lines(staged)["3"].startswith("stage 1 · dp 1 · tp 1  completed"), staged
    ddp = render(LiveTop(write_run(tmp_path / "ddp"), finding_every_s=0).frame())
    assert "place" not in ddp and "·" not in ddp
    assert any(line.split()[:2] == ["rank", "status"] for line in ddp.splitlines()), ddp


def test_the_places_are_worked_out_again_only_when_the_groups_change(tmp_path: Path) -> None:
    top = LiveTop(write_mesh_run(tmp_path))
    top.frame()
    places = top.places
    assert places[3] == RankPlace(coords=(("dp", 1), ("tp", 1)))
    meta = top.tail.meta
    metas = {r: top.metas.get(r) for r in range(meta.world_size)}
    top.analyse(meta, metas, time.time())
    assert top.analyses == 2 and top.places is places


def test_the_rank_table_has_a_place_column_only_with_places() -> None:
    ranks = [RankLive(r, "running", 5, 20.0, (("forward", 20.0),), None, None, None, None)
             for r in range(2)]  # fmt: skip
    plain = rank_table(ranks, None)
    assert [c.name for c in plain.columns][:2] == ["rank", "status"]
    places = {0: RankPlace(stages=(0, 2), coords=(("stride 2", 1),))}
    table = rank_table(ranks, None, places)
    assert [c.name for c in table.columns][:3] == ["rank", "place", "status"]
    assert [row[1] for row in table.rows] == ["stages 0, 2 · stride 2: 1", "-"]
    assert all(len(styles) == len(table.columns) for styles in table.cell_styles)


def test_a_watch_stopped_on_an_error_is_a_line_of_the_frame(tmp_path: Path) -> None:
    from scalescope.events.watch_stops import record_stop

    top = LiveTop(write_run(tmp_path))
    assert "watch stopped" not in render(top.frame(), width=200)
    record_stop(top.run_dir, "slowdown", "ValueError: nan")
    text = render(top.frame(), width=200)
    assert "the slowdown watch stopped on an error (ValueError: nan)" in text


def test_each_rank_says_its_share_on_a_cpu_as_its_rows_sum_it() -> None:
    """Rank 1 sleeps 70 ms a step in forward (recorded with CPU rows): top's ``on CPU %`` says
    it was seldom on a CPU, its peer mostly; each figure is its training thread's CPU time over
    its phases' time but the exposed communication (its waiting, a column of its own) in the
    measured steps, summed here from the raw rows."""
    from recorded_runs import RUNS

    from scalescope.api.recording import load
    from scalescope.events.schema import EXTRA_PHASES, PHASES, Kind

    rec = load(RUNS / "straggler_forward_2" / "run")
    snap = live_snapshot(rec.run.meta, rec.analysis, {}, {}, {}, {}, time.time())
    measured = rec.steps().to_pydict()
    kept = {(r, s) for r, s, m in zip(measured["rank"], measured["step"], measured["measured"],
                                      strict=True) if m}  # fmt: skip
    events = rec.run.events
    names = events.symbols.strings
    cpu = {(int(events.rank[i]), int(events.start_ns[i])): (int(events.count[i]),
                                                             int(events.seq[i]))
           for i in range(len(events)) if events.kind[i] == Kind.CPU}  # fmt: skip
    on, wall = {0: 0, 1: 0}, {0: 0, 1: 0}
    for i in range(len(events)):
        rank, start = int(events.rank[i]), int(events.start_ns[i])
        work = names[events.name[i]] != "comm_wait"
        if events.kind[i] != Kind.PHASE or (rank, int(events.step[i])) not in kept or not work:
            continue
        assert names[events.name[i]] in (*PHASES, *EXTRA_PHASES) and (rank, start) in cpu
        process, thread = cpu[rank, start]
        on[rank] += thread if thread >= 0 else process
        wall[rank] += int(events.dur_ns[i])
    shares = {r.rank: r.on_cpu_pct for r in snap.ranks}
    for rank in (0, 1):
        assert shares[rank] == pytest.approx(100 * on[rank] / wall[rank], abs=0.01)
    assert shares[1] < 20 < 50 < shares[0]
    text = render(frame(snap))
    header = next(line for line in text.splitlines() if "on CPU %" in line)
    row = next(line for line in text.splitlines() if line.split()[:1] == ["1*"])
    assert header.index("on CPU %") < header.index("memory")
    assert f" {shares[1]:.0f} " in row


def test_no_cpu_column_without_cpu_rows() -> None:
    ok = RankLive(0, "running", 5, 20.0, (("forward", 20.0),), None, None, None, None)
    assert "on CPU %" not in [c.name for c in rank_table([ok], None).columns]
    shown = RankLive(1, "running", 5, 20.0, (("forward", 20.0),), None, None, None, None,
                     on_cpu_pct=12.4)  # fmt: skip
    table = rank_table([ok, shown], None)
    cpu = [c.name for c in table.columns].index("on CPU %")
    assert [row[cpu] for row in table.rows] == ["-", "12"]
    assert all(len(styles) == len(table.columns) for styles in table.cell_styles)
