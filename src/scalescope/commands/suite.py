"""Run the suite: every workload at every rank count through the launcher, then one result.

Each run is an ordinary profiled run (its own run directory under the suite directory), so
``scalescope report SUITE_DIR/kmeans-n2`` shows it in full. A run that fails is kept in the
result with its error; the others still run. Ctrl-C or SIGTERM interrupts the current run
(its ranks are stopped and it is marked interrupted) and ends the suite with what ran.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from torch.distributed.elastic.multiprocessing.api import SignalException

from scalescope.analyze import RunAnalysis
from scalescope.analyze.runs.suite import with_efficiency
from scalescope.analyze.steps.rank_split import rank_splits
from scalescope.bench.records import WorkloadRecord, read_record
from scalescope.bench.suite_workloads import SuiteWorkload
from scalescope.commands.common import CommandError, err
from scalescope.commands.options.launching import SuiteCommand
from scalescope.diagnose.recording import Recording
from scalescope.events.files import SUITE_FILE
from scalescope.events.run import RunDirError
from scalescope.events.suite import SuiteEntry, SuiteResult
from scalescope.launch.placement.plan import MappingOptions, make_plan
from scalescope.launch.process.local import LaunchOptions
from scalescope.launch.run.runner import RunSpec, check_new_run_dir
from scalescope.launch.run.session import start


@dataclass(frozen=True, kw_only=True)
class SuitePlan:
    workloads: tuple[SuiteWorkload, ...]
    ranks: tuple[int, ...]
    quick: bool = False
    sizes: dict[str, int] = field(default_factory=dict)
    """Size overrides by workload name; the others use their default (or quick) size."""
    suite_dir: Path
    launch: LaunchOptions = field(default_factory=LaunchOptions)
    """Address and port of the rendezvous; ``nproc_per_node`` is set per run."""
    mapping: MappingOptions = field(default_factory=MappingOptions)
    command: tuple[str, ...] = ()

    def size_of(self, workload: SuiteWorkload) -> int:
        default = workload.quick_size if self.quick else workload.default_size
        return self.sizes.get(workload.name, default)


def default_suite_dir() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("scalescope_runs") / f"suite-{stamp}-{uuid.uuid4().hex[:4]}"


def run_dir_of(plan: SuitePlan, workload: SuiteWorkload, ranks: int) -> Path:
    return plan.suite_dir / f"{workload.name}-n{ranks}"


def check_plan(plan: SuitePlan) -> None:
    """Refuse before running anything: a placement that cannot run, a directory in use."""
    if (plan.suite_dir / SUITE_FILE).exists():
        raise ValueError(
            f"suite directory {plan.suite_dir} already holds a suite; choose another --run-dir"
        )
    for ranks in plan.ranks:
        make_plan(plan.mapping, ranks)
    for workload in plan.workloads:
        for ranks in plan.ranks:
            check_new_run_dir(run_dir_of(plan, workload, ranks))


def run_spec(plan: SuitePlan, workload: SuiteWorkload, ranks: int) -> RunSpec:
    size = plan.size_of(workload)
    return RunSpec(
        target=workload.module,
        is_module=True,
        args=workload.argv(size, plan.quick),
        launch=replace(plan.launch, nproc_per_node=ranks),
        mapping=plan.mapping,
        run_dir=run_dir_of(plan, workload, ranks),
        warmup_steps=workload.warmup_steps,
        workload=workload.name,
        options={"suite": str(plan.suite_dir), "size": size, "quick": plan.quick},
        command=list(plan.command),
    )


@contextmanager
def restored_environ() -> Iterator[None]:
    """The launcher writes the plan's variables into os.environ; one run's must not leak
    into the next (an OMP_NUM_THREADS left by a 1-rank run would count as the user's)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _error(analysis: RunAnalysis, record: WorkloadRecord | None) -> str | None:
    """The last line of the first failed rank's error, or why a finished run has no numbers."""
    if analysis.status != "completed":
        failed = analysis.first_failure
        if failed is not None and failed.error:
            return failed.error.strip().splitlines()[-1]
        return f"run {analysis.status}"
    return None if record is not None else "the workload wrote no workload.json"


def collect(plan: SuitePlan, workload: SuiteWorkload, ranks: int, status: str) -> SuiteEntry:
    """The entry of a finished run: its own record and the analysis of its events."""
    run_dir = run_dir_of(plan, workload, ranks)
    base = SuiteEntry(
        workload.name, workload.family, ranks, plan.size_of(workload), str(run_dir), status,
        None, None, None, None, None, (),
    )  # fmt: skip
    try:
        rec = Recording.load(run_dir)
    except RunDirError as exc:
        return replace(base, error=str(exc))
    run, analysis = rec.run, rec.analysis
    record = read_record(run_dir) if status == "completed" else None
    return replace(
        base,
        error=_error(analysis, record),
        wall_s=analysis.duration_s,
        time_s=record.time_s if record else None,
        throughput=record.throughput if record else None,
        unit=record.unit if record else None,
        per_rank=rank_splits(run.events, run.meta.warmup_steps),
    )


def run_one(plan: SuitePlan, workload: SuiteWorkload, ranks: int) -> SuiteEntry:
    """Launch one run and collect it; a launch the launcher refuses is an entry too."""
    try:
        with restored_environ():
            outcome = start(run_spec(plan, workload, ranks), nproc_given=True)
    except ValueError as exc:
        entry = collect(plan, workload, ranks, "not run")
        return replace(entry, error=str(exc))
    return collect(plan, workload, ranks, outcome.status)


def run_suite(plan: SuitePlan, on_start: Callable[[str], None] = lambda _: None) -> SuiteResult:
    """Run every workload at every rank count, in order; stop early only when interrupted."""
    check_plan(plan)
    plan.suite_dir.mkdir(parents=True, exist_ok=True)
    entries: list[SuiteEntry] = []
    interrupted = False
    for workload, ranks in itertools.product(plan.workloads, plan.ranks):
        on_start(f"{workload.name} on {ranks} rank{'s' if ranks > 1 else ''}")
        try:
            entries.append(run_one(plan, workload, ranks))
        except (KeyboardInterrupt, SignalException):
            # a signal between launches: torch's launcher left its handlers installed
            interrupted = True
            break
        interrupted = entries[-1].status == "interrupted"
        if interrupted:
            break
    return SuiteResult(
        str(plan.suite_dir), plan.quick, plan.command, with_efficiency(entries), interrupted
    )


def suite(command: SuiteCommand) -> int:
    """Run the suite, print its table, keep suite.json; 130 when interrupted, 1 when a run
    failed."""
    from scalescope.bench.suite_workloads import parse_ranks, parse_sizes, select_workloads
    from scalescope.events.suite import save_suite
    from scalescope.report.formatting import suite_console
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import progress, render

    c, rendezvous = command, command.launch.rendezvous
    try:
        plan = SuitePlan(
            workloads=select_workloads(c.workloads), ranks=parse_ranks(c.ranks), quick=c.quick,
            sizes=parse_sizes(list(c.size or [])), suite_dir=c.suite_dir or default_suite_dir(),
            launch=LaunchOptions(
                master_addr=rendezvous.master_addr, master_port=rendezvous.master_port
            ),
            mapping=c.launch.mapping, command=("scalescope", *sys.argv[1:]),
        )  # fmt: skip
        eta = progress("eta")(len(plan.workloads) * len(plan.ranks), "suite")
        result = run_suite(plan, lambda what: err.print(eta.line(what)))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    render_document(render(result, "terminal"), suite_console())
    for path in save_suite(result, plan.suite_dir / SUITE_FILE, c.json_file):
        err.print(f"wrote {path}")
    failed = [e for e in result.entries if e.status != "completed" or e.error]
    return 130 if result.interrupted else (1 if failed else 0)
