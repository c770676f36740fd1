"""`scalescope comm` after the ranks ended: read their record, analyse it, write every view."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from scalescope.analyze.comm_bench import CommBenchmark, comm_results
from scalescope.events.files import COMM_FILE
from scalescope.launch.runner import RunSpec
from scalescope.launch.session import Outcome, start


@dataclass(frozen=True)
class CommFiles:
    json: Path | None = None
    csv: Path | None = None
    html: Path | None = None


def run_comm(
    spec: RunSpec, nproc_given: bool, master_addr: str | None, unavailable: dict[str, str]
) -> tuple[Outcome, CommBenchmark | None]:
    """Launch the benchmark's ranks; the results where this process reports (rank 0's node)."""
    outcome = start(spec, nproc_given, master_addr)
    if not outcome.report_here:
        return outcome, None
    return outcome, load_comm(outcome.run_dir, unavailable)


def load_comm(run_dir: Path, unavailable: dict[str, str]) -> CommBenchmark:
    """The results of a comm run directory; ValueError when rank 0 wrote none."""
    path = Path(run_dir) / COMM_FILE
    try:
        raw = json.loads(path.read_text())
        return comm_results(raw, unavailable)
    except FileNotFoundError as exc:
        raise ValueError(f"{run_dir}: no {COMM_FILE}: the benchmark did not finish") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: malformed comm results ({exc})") from exc


def write_comm(bench: CommBenchmark, run_dir: Path, files: CommFiles, console: Console) -> list:
    """Print the tables and write the files asked for; returns the paths written."""
    from scalescope.report.comm_view import comm_csv, comm_json, render_comm

    render_comm(bench, console)
    written = []
    if files.json is not None:
        doc = comm_json(bench, str(run_dir))
        files.json.write_text(json.dumps(doc, indent=2) + "\n")
        written.append(files.json)
    if files.csv is not None:
        files.csv.write_text(comm_csv(bench))
        written.append(files.csv)
    if files.html is not None:
        from scalescope.report.comm_view import render_comm_html

        files.html.write_text(render_comm_html(bench), encoding="utf-8")
        written.append(files.html)
    return written


def show_nccl_tests(path: Path, console: Console) -> None:
    """An nccl-tests log in comm's columns (algbw and busbw recomputed from its times)."""
    from scalescope.analyze.comm_bench import rows_from_nccl_tests
    from scalescope.ingest.nccl_tests import parse_nccl_tests
    from scalescope.report.comm_view import nccl_table
    from scalescope.report.document_terminal import render_block

    log = parse_nccl_tests(path)
    title = f"{log.op} from nccl-tests, {log.world_size} ranks ({path.name})"
    render_block(nccl_table(list(rows_from_nccl_tests(log)), title), console)
    if log.avg_busbw_gbps is not None:
        console.print(f"the log's average bus bandwidth: {log.avg_busbw_gbps:.3f} GB/s")
    for problem in log.problems:
        console.print(f"skipped {problem}", markup=False)
