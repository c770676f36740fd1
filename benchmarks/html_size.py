"""HTML dashboard size and render time for a synthetic run of 4 ranks x 1,000 steps.

Writes the run with the real EventWriter, loads and analyses it, renders the dashboard and
the Chrome trace, and prints their sizes (target: HTML < 5 MB, 1 MB = 1e6 bytes) with the
render time. plotly.js alone is most of the page; its size is printed separately.

    .venv/bin/python benchmarks/html_size.py --ranks 4 --steps 1000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np

from results import record
from scalescope.api.reporting import ReportFiles, run_report
from scalescope.diagnose.recording import Recording
from scalescope.events import EventWriter, Kind, RankMeta, RunMeta, load_run
from scalescope.events.run import ClockSync, events_path, rank_meta_path, write_json_atomic
from scalescope.report.media.page import plotly_payload
from scalescope.report.media.timeline import chrome_trace
from scalescope.report.views.dashboard import render_html

MS = 1_000_000
BUCKETS = (25 * 1024 * 1024, 25 * 1024 * 1024, 12 * 1024 * 1024, 1024 * 1024)
LIMIT_BYTES = 5_000_000
PERIOD_MS = 130


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", type=Path, default=None, help="also write the HTML here")
    return p.parse_args()


def step_rows(rank: int, step: int, t: int, rng: np.random.Generator, seq: int) -> list[tuple]:
    """One DDP-like step: data, forward (+ buffer broadcast), backward with four gradient
    buckets, comm_wait, optimizer; the last rank is a straggler in forward."""

    def row(kind, name, start, dur, nbytes=0, count=0, s=-1, tag="", dtype="", group=""):
        return (step, int(kind), name, start, dur, nbytes, count, dtype, group, s, tag)

    data, fwd = int(rng.integers(2, 5) * MS), int((30 + rng.integers(0, 3)) * MS)
    fwd += 8 * MS if rank == 3 else 0
    bwd, wait, opt = 60 * MS, int(rng.integers(1, 6) * MS), 5 * MS
    rows = [
        row(Kind.STEP, "step", t, data + fwd + bwd + wait + opt + MS, count=64),
        row(Kind.PHASE, "data", t, data),
        row(Kind.PHASE, "forward", t + data, fwd),
        row(
            Kind.COLLECTIVE,
            "broadcast",
            t + data,
            40_000,
            1024,
            256,
            seq,
            "buffers",
            "float32",
            "0",
        ),
        row(Kind.PHASE, "backward", t + data + fwd, bwd),
        row(Kind.PHASE, "comm_wait", t + data + fwd + bwd, wait),
        row(Kind.PHASE, "optimizer", t + data + fwd + bwd + wait, opt),
        row(Kind.MEMORY, "rss_peak", 0, 0, nbytes=3 * 1024**3),
    ]
    for i, nbytes in enumerate(BUCKETS, start=1):
        issue = t + data + fwd + i * 12 * MS
        rows.append(
            row(
                Kind.COLLECTIVE,
                "all_reduce",
                issue,
                int(nbytes / 2.5 + rng.integers(0, MS)),
                nbytes,
                nbytes // 4,
                seq + i,
                "gradients",
                "float32",
                "0",
            )
        )
    return rows


def write_synthetic_run(run_dir: Path, num_ranks: int, num_steps: int) -> None:
    ranks = {
        str(r): RankMeta(
            rank=r,
            world_size=num_ranks,
            hostname=f"node-{r // 2}",
            status="completed",
            exit_code=0,
            steps=num_steps,
            clock=[ClockSync(when="start", offset_ns=r * 1000, uncertainty_ns=500)],
        )
        for r in range(num_ranks)
    }
    meta = RunMeta(
        run_id="html-size",
        command=["scalescope", "bench", "resnet50"],
        script="",
        workload="resnet50",
        world_size=num_ranks,
        nproc_per_node=2,
        warmup_steps=5,
        hostnames=sorted({m.hostname for m in ranks.values()}),
        start_time=1.0,
        end_time=200.0,
        status="completed",
        ranks=ranks,
    )
    write_json_atomic(run_dir / "run.json", meta)
    for r in range(num_ranks):
        write_json_atomic(rank_meta_path(run_dir, r), ranks[str(r)])
        rng = np.random.default_rng(r)
        writer = EventWriter(events_path(run_dir, r), r)
        seq = 0
        for step in range(num_steps):  # steps start together: the collectives sync them
            writer.write(step_rows(r, step, step * PERIOD_MS * MS - r * 1000, rng, seq))
            seq += 1 + len(BUCKETS)
        writer.close()


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        write_synthetic_run(run_dir, args.ranks, args.steps)
        run = load_run(run_dir)
        start = time.perf_counter()
        rec = Recording.of(run)
        rec.analysis.reported()
        analysed = time.perf_counter()
        report = run_report(rec, files=ReportFiles(html=Path("page.html")))
        page = render_html(report)
        rendered = time.perf_counter()
        trace = msgspec.json.encode(chrome_trace(run, dict(report.offsets_ns)))
    size = len(page.encode())
    plotly_size = len(plotly_payload().encode())
    print(f"run: {args.ranks} ranks x {args.steps} steps, {len(run.events):,} events")
    print(
        f"html: {size / 1e6:.3f} MB (limit {LIMIT_BYTES / 1e6:.0f} MB): "
        f"plotly.js (gzip + base64) {plotly_size / 1e6:.3f} MB + "
        f"page {(size - plotly_size) / 1e3:.1f} kB"
    )
    print(f"headroom under the limit: {(LIMIT_BYTES - size) / 1e3:.1f} kB")
    print(f"analyse {analysed - start:.2f} s, render_html {rendered - analysed:.2f} s")
    print(f"timeline json (default 10 steps): {len(trace) / 1e3:.1f} kB")
    if args.out:
        args.out.write_text(page, encoding="utf-8")
    record(
        f"HTML dashboard of {args.ranks} ranks x {args.steps} steps", size / 1e6, "MB",
        f"< {LIMIT_BYTES / 1e6:.0f} MB", size < LIMIT_BYTES,
        f"plotly.js {plotly_size / 1e6:.3f} MB of it; render_html {rendered - analysed:.2f} s",
    )  # fmt: skip
    if size >= LIMIT_BYTES:
        raise SystemExit(f"HTML is {size / 1e6:.3f} MB, over the {LIMIT_BYTES / 1e6:.0f} MB limit")


if __name__ == "__main__":
    main()
