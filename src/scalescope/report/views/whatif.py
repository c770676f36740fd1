"""`scalescope whatif`: the measured steps replayed, then with each cause fixed: the step
after the fix, its spread, what it gains and the throughput after it."""

from __future__ import annotations

import json
from dataclasses import asdict

from scalescope.analyze.model.causes import IDEAL_NOTE
from scalescope.analyze.model.replay import ReplayTimes
from scalescope.analyze.model.whatif import Fix, WhatIf, WhatIfTimeline
from scalescope.events.units import number_ranges
from scalescope.report.document import Block, Column, Document, Line, Section, Table

SCHEMA = "scalescope.whatif/1"
COLUMNS = (
    Column("cause fixed", align="left", no_wrap=True),
    Column("step", "ms"),
    Column("range", "ms"),
    Column("gain", "ms"),
    Column("gain", "%"),
    Column("samples/s after"),
    Column("how", align="left"),
)


def _row(fix: Fix) -> tuple[str, ...]:
    p = fix.prediction
    rate = "-" if fix.samples_per_s is None else f"{fix.samples_per_s:,.1f}"
    return (
        fix.cause, f"{p.step_ms:.2f}", f"{p.low_ms:.2f}-{p.high_ms:.2f}", f"{fix.gain_ms:+.2f}",
        f"{fix.gain_pct:+.1f}", rate, fix.note,
    )  # fmt: skip


def _values(fix: Fix) -> tuple[float | str | None, ...]:
    p = fix.prediction
    return (fix.cause, p.step_ms, None, fix.gain_ms, fix.gain_pct, fix.samples_per_s, fix.note)


def _blocks(result: WhatIf) -> list[Block]:
    base = result.replayed
    blocks: list[Block] = [
        Line(
            f"Measured step {result.measured_step_ms:.2f} ms (median of {result.steps} measured "
            f"steps x {result.ranks} ranks, {result.collectives_per_step} collectives a step); "
            f"replayed as measured: {base.step_ms:.2f} ms ({base.low_ms:.2f}-{base.high_ms:.2f})."
        ),
        Table(
            "What fixing each cause buys",
            COLUMNS,
            tuple(_row(f) for f in result.fixes),
            values=tuple(_values(f) for f in result.fixes),
            caption="Each row replays the steps with that cause fixed (A+B: both at once, not "
            "a sum). Step: the median step; range: its 10th-90th percentile; gain and "
            "samples/s: on the mean step, from the replay as measured (work every k steps "
            "counts).",
            html_id="whatif",
        ),
    ]
    if result.ideal is not None and result.slowdown is not None:
        blocks.append(
            Line(
                f"Ideal step {result.ideal.step_ms:.2f} ms (mean {result.ideal.mean_ms:.2f}): "
                f"{IDEAL_NOTE}; the run is {result.slowdown:.2f}x slower than it (S, on the "
                "mean step; `--fix ideal`)."
            )
        )
    blocks += [Line(f"{cause}: not replayed: {why}") for cause, why in result.refused]
    if result.windows:
        blocks.append(Line(windows_line(result.windows, result.kept)))
    if result.steady is not None and result.jitter_ms is not None:
        blocks.append(Line(_jitter_words(result.jitter_ms, result.replayed.mean_ms)))
    return blocks + [Line(f"Left out of the model: {why}.") for why in result.left_out]


def windows_line(steps: tuple[int, ...], kept: tuple[int, ...] = ()) -> str:
    """The replayed steps of a run recorded as summaries, as ranges (``0-9, 100-103``), and
    which of them the flight recorders kept."""
    rings = f" (steps {number_ranges(kept)} kept by the flight recorders: events/window-*)"
    return (
        f"Replayed: steps {number_ranges(steps)} ({len(steps)} steps), the windows recorded in "
        f"full{rings if kept else ''}; the other steps were recorded as summaries "
        "(--record summary)."
    )


def _jitter_words(jitter_ms: float, mean_ms: float) -> str:
    pct = 100.0 * jitter_ms / mean_ms if mean_ms > 0 else 0.0
    return (
        f"Jitter: {jitter_ms:+.2f} ms ({pct:+.1f} %) a step: the replay as measured against "
        "every rank within the spread at its own median step (the steps' spread, the slowest "
        "of noisy ranks setting each step's pace): no rank's cause, no fix above buys it back."
    )


TITLE = "What fixing each cause buys (replayed)"


def whatif_section(result: WhatIf | None, missing: str | None = None) -> Section | None:
    """The run report's section (``scalescope whatif RUN_DIR --fix ...`` for other causes);
    without a what-if, ``missing``: why none."""
    if result is None:
        return Section(TITLE, (Line(f"Nothing replayed: {missing}."),)) if missing else None
    if not result.fixes and not result.refused:
        return None
    more = Line(
        "Other causes: scalescope whatif RUN_DIR --fix "
        "rank:N|node:HOST|link:HOST,HOST|phase:NAME|comm:X|compute:X."
    )
    return Section(TITLE, (*_blocks(result), more))


def whatif_document(result: WhatIf) -> Document:
    return Document("scalescope whatif", tuple(_blocks(result)))


def whatif_json(result: WhatIf) -> bytes:
    return json.dumps({"schema": SCHEMA, **asdict(result)}, indent=2).encode() + b"\n"


def _process(pid: int, label: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}}


def _spans(pid: int, t: WhatIfTimeline, times: ReplayTimes, steps: tuple[str, ...]) -> list:
    events = []
    for i, rank in enumerate(t.ranks):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": rank,
                       "args": {"name": f"rank {rank}"}})  # fmt: skip
        for s, step in enumerate(steps):
            begin, end = times.start_ns[s, i], times.end_ns[s, i]
            events.append({"ph": "X", "name": step, "cat": "step", "pid": pid, "tid": rank,
                           "ts": begin / 1e3, "dur": (end - begin) / 1e3})  # fmt: skip
            for k, op in enumerate(t.ops):
                issue, done = times.issue_ns[s, i, k], times.done_ns[s, i, k]
                events.append({"ph": "X", "name": op, "cat": "collective", "pid": pid,
                               "tid": rank, "ts": issue / 1e3,
                               "dur": max(done - issue, 0.0) / 1e3})  # fmt: skip
    return events


def whatif_timeline(t: WhatIfTimeline) -> bytes:
    """A Chrome/Perfetto trace: the replay as measured (process 1) above the replay with the
    cause fixed (process 2), a track per rank, each step and each collective (issue to
    completion: the waiting is its length)."""
    measured = tuple(f"step {s}" for s in t.steps)
    fixed = tuple(f"step {i + 1} with {t.cause} fixed" for i in range(len(t.fixed.start_ns)))
    events = [
        _process(1, "as measured (replayed)"),
        _process(2, f"{t.cause} fixed (replayed; {t.note})"),
        *_spans(1, t, t.measured, measured),
        *_spans(2, t, t.fixed, fixed),
    ]
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}).encode() + b"\n"
