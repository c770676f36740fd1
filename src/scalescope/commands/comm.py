"""`scalescope comm`: the benchmark's ranks started through the same launcher as run; after
they ended, their record read and analysed, and every view written. Or an nccl-tests log
shown in the same columns, with nothing run."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from scalescope.analyze.comm.comm_bench import CommBenchmark, comm_results
from scalescope.api.launching import launch_spec, start_or_plan
from scalescope.commands.common import CommandError, err, launch_error
from scalescope.commands.options.launching import CommCommand
from scalescope.events.files import COMM_FILE
from scalescope.launch.options.groups import AtEnd
from scalescope.launch.run.runner import RunSpec
from scalescope.launch.run.session import Outcome, start


def comm(command: CommCommand) -> int:
    """Run the benchmark (or show an nccl-tests log), print and write its views; the run's
    exit code."""
    from scalescope.bench.comm_options import CommOptions
    from scalescope.ingest import IngestError
    from scalescope.report.formatting import report_console

    if command.nccl_tests is not None:
        try:
            show_nccl_tests(command.nccl_tests, report_console())
        except IngestError as exc:
            raise CommandError(str(exc)) from None
        return 0
    c, launch = command, command.launch
    recording = replace(launch.recording, no_probe=not c.probe).every_call()
    config = replace(launch, at_end=AtEnd(no_report=True), recording=recording)  # --html: plots
    try:
        options = CommOptions.parse(c.ops, c.sizes, c.factor, c.dtype, c.backend, c.iters, c.warmup)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    runnable, unavailable = options.split_backends()
    if not runnable:
        reasons = "; ".join(f"{b}: {why}" for b, why in unavailable.items())
        raise CommandError(f"no backend can run here ({reasons})")
    try:
        spec = launch_spec(
            config, c.nproc_per_node, target="scalescope.bench.comm", is_module=True,
            args=options.workload_args(runnable), warmup_steps=0, workload="comm",
            options=options.as_dict() | {"unavailable": unavailable},
        )  # fmt: skip
        if config.recording.dry_run:
            return start_or_plan(spec, config, c.nproc_per_node, err)
        given = c.nproc_per_node is not None
        outcome, bench = run_comm(spec, given, config.rendezvous.master_addr, unavailable)
    except ValueError as exc:
        raise launch_error(exc) from None
    if bench is None:
        return outcome.exit_code
    files = CommFiles(json=c.json_file, csv=c.csv_file, html=c.html)
    for path in write_comm(bench, outcome.run_dir, files, report_console()):
        err.print(f"wrote {path}")
    err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    return outcome.exit_code


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
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render, write
    from scalescope.report.subjects import CommRun

    render_document(render(bench, "terminal"), console)
    written = []
    if files.json is not None:
        written.append(write(CommRun(bench=bench, run_dir=run_dir), "json", files.json))
    if files.csv is not None:
        written.append(write(bench, "csv", files.csv))
    if files.html is not None:
        written.append(write(bench, "html", files.html))
    return written


def show_nccl_tests(path: Path, console: Console) -> None:
    """An nccl-tests log in comm's columns (algbw and busbw recomputed from its times)."""
    from scalescope.analyze.comm.comm_bench import rows_from_nccl_tests
    from scalescope.ingest.nccl_tests import parse_nccl_tests
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import document
    from scalescope.report.subjects import NcclTestsRows

    log = parse_nccl_tests(path)
    title = f"{log.op} from nccl-tests, {log.world_size} ranks ({path.name})"
    rows = NcclTestsRows(rows=tuple(rows_from_nccl_tests(log)), title=title)
    render_document(document(rows), console)
    if log.avg_busbw_gbps is not None:
        console.print(f"the log's average bus bandwidth: {log.avg_busbw_gbps:.3f} GB/s")
    for problem in log.problems:
        console.print(f"skipped {problem}", markup=False)
