"""`scalescope run` and `bench`: the launch flags read into a run's spec, the ranks started
(or their plan printed, --dry-run), the report printed at the end.

The launch flags that run, bench, comm, scale, suite and tune share arrive as one
``LaunchFlags`` (declared for typer once, in cli/launch_options.py); ``launch_spec`` reads them
into the launcher's ``RunSpec`` and refuses a bad value with its flag's name, before torch is
imported.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalescope.commands.common import CommandError, err, plain_console

if TYPE_CHECKING:
    from scalescope.bench.options import BenchOptions
    from scalescope.launch.hang_watch import HangOptions
    from scalescope.launch.local import LaunchOptions, OutputOptions
    from scalescope.launch.plan import MappingOptions
    from scalescope.launch.runner import RunSpec
    from scalescope.launch.session import Outcome


@dataclass(frozen=True, kw_only=True)
class LaunchFlags:
    """The launch options as given (their help: cli/launch_options.py); a command that does
    not take one gets its default."""

    master_addr: str | None = None
    """Address of rank 0; None: 127.0.0.1, or found from srun/mpirun."""
    master_port: int | None = None
    """Port of the rendezvous; None: free, or derived from the job id under srun/mpirun."""
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    """HOST[:PORT] of the rendezvous of several nodes."""
    rdzv_backend: str = "c10d"
    rdzv_id: str = ""
    local_addr: str | None = None
    map_by: str = "numa"
    """Domains to spread ranks over: node, socket, numa, core."""
    threads_per_rank: int | None = None
    numa_nodes: str | None = None
    """NUMA nodes to use, as given: 0,1."""
    cpu_list: list[str] | None = None
    """Cpus of each rank, one item per rank: 0-11."""
    oversubscribe: bool = False
    no_bind: bool = False
    bind_to: str = "domain"
    allocator: str = "default"
    dry_run: bool = False
    """Print the placement plan and start nothing."""
    report_bindings: bool = False
    run_dir: Path | None = None
    """Where to record; None: scalescope_runs/…"""
    no_probe: bool = False
    hang_after: float | None = None
    """Seconds without progress on any rank before a hang is reported; None: 10 typical
    steps, at least 30."""
    hang_action: str = "report"
    """On a hang: report, or kill (then stop the ranks)."""
    no_report: bool = False
    """No report printed at the end."""
    html: Path | None = None
    """The run's HTML dashboard, written at the end."""
    live: bool = False
    """The live view drawn here while it trains; the ranks' output to RUN_DIR/logs."""
    label_output: bool = False
    ranks_output: str | None = None
    """Ranks whose output reaches the terminal, as given: 0,3."""


@dataclass(frozen=True, kw_only=True)
class RunCommand:
    """The options of ``scalescope run``."""

    script: str
    """A training script, or a module name with ``module``."""
    module: bool = False
    args: tuple[str, ...] = ()
    """The script's own arguments."""
    nproc_per_node: int | None = None
    """-n; None: one rank, or each task of srun, mpirun or torchrun is a rank."""
    warmup_steps: int = 1
    """Steps left out of the statistics."""
    launch: LaunchFlags = field(default_factory=LaunchFlags)


@dataclass(frozen=True, kw_only=True)
class BenchCommand:
    """The options of ``scalescope bench``."""

    workload: BenchOptions
    """The built-in workload's model, batch, data and steps."""
    nproc_per_node: int | None = None
    launch: LaunchFlags = field(default_factory=LaunchFlags)


def run(command: RunCommand) -> int:
    """Start the script's ranks (or print their plan); the run's exit code."""
    if command.script.startswith("-"):
        raise CommandError(f"No such option: {command.script} (see scalescope run --help)")
    spec = launch_spec(
        command.launch, command.nproc_per_node, target=command.script,
        is_module=command.module, args=list(command.args), warmup_steps=command.warmup_steps,
    )  # fmt: skip
    return start_or_plan(spec, command.launch, command.nproc_per_node)


def bench(command: BenchCommand) -> int:
    """Start the built-in workload's ranks (or print their plan); the run's exit code."""
    options, nproc = command.workload, command.nproc_per_node
    if nproc is not None:
        try:
            options.check_world(nproc * command.launch.nnodes)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    spec = launch_spec(
        command.launch, nproc, target="scalescope.bench.workload", is_module=True,
        args=options.workload_args(), warmup_steps=options.warmup_steps, workload=options.model,
        options=options.as_dict(),
    )  # fmt: skip
    return start_or_plan(spec, command.launch, nproc)


def hang_options(flags: LaunchFlags) -> HangOptions:
    """--hang-after and --hang-action for the launcher's hang watch, with report/hang_view's
    words for what it finds."""
    from scalescope.launch.hang_watch import ACTIONS, HangOptions
    from scalescope.report.views.hang import render_hang

    if flags.hang_after is not None and flags.hang_after <= 0:
        raise ValueError(f"--hang-after must be > 0 seconds, got {flags.hang_after}")
    if flags.hang_action not in ACTIONS:
        raise ValueError(f"--hang-action must be report or kill, got {flags.hang_action!r}")
    if flags.no_probe and (flags.hang_after is not None or flags.hang_action != "report"):
        raise ValueError(
            "--hang-after and --hang-action need the probe (the hang watch reads the ranks' "
            "live states): drop --no-probe, or them"
        )
    return HangOptions(after_s=flags.hang_after, action=flags.hang_action, render=render_hang)


def output_options(flags: LaunchFlags) -> OutputOptions:
    from scalescope.launch.local import OutputOptions

    shown = flags.ranks_output
    wrong = ValueError(f"--ranks-output takes ranks like 0 or 0,3, got {shown!r}")
    try:
        ranks = tuple(int(r) for r in shown.split(",") if r.strip()) if shown else None
    except ValueError as exc:
        raise wrong from exc
    if ranks == ():
        raise wrong
    return OutputOptions(label=flags.label_output, ranks=ranks, quiet=flags.live)


def launch_options(flags: LaunchFlags, nproc_per_node: int | None) -> LaunchOptions:
    from scalescope.launch.local import LaunchOptions

    return LaunchOptions(
        output=output_options(flags),
        nproc_per_node=nproc_per_node or 1,
        master_addr=flags.master_addr or "127.0.0.1",
        master_port=flags.master_port,
        nnodes=flags.nnodes,
        node_rank=flags.node_rank,
        rdzv_endpoint=flags.rdzv_endpoint,
        rdzv_backend=flags.rdzv_backend,
        rdzv_id=flags.rdzv_id,
        local_addr=flags.local_addr,
    )


def mapping_options(flags: LaunchFlags) -> MappingOptions:
    from scalescope.launch.plan import MappingOptions

    numa = flags.numa_nodes
    try:
        numa_nodes = tuple(int(n) for n in numa.split(",")) if numa else None
    except ValueError as exc:
        raise ValueError(f"--numa-nodes takes numbers like 0,1, got {numa!r}") from exc
    return MappingOptions(
        bind=not flags.no_bind,
        bind_to=flags.bind_to,
        map_by=flags.map_by,
        threads_per_rank=flags.threads_per_rank,
        numa_nodes=numa_nodes,
        cpu_lists=tuple(flags.cpu_list) if flags.cpu_list else None,
        oversubscribe=flags.oversubscribe,
        allocator=flags.allocator,
    )


def launch_spec(flags: LaunchFlags, nproc_per_node: int | None, **spec: Any) -> RunSpec:
    """The launcher's RunSpec from the launch flags and ``spec`` (what runs); a bad value is
    a CommandError naming its flag."""
    from scalescope.launch.runner import RunSpec

    try:
        return RunSpec(
            hang=hang_options(flags),
            launch=launch_options(flags, nproc_per_node),
            mapping=mapping_options(flags),
            run_dir=flags.run_dir,
            probe=not flags.no_probe,
            report_bindings=flags.report_bindings,
            command=["scalescope", *sys.argv[1:]],
            **spec,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def start_or_plan(spec: RunSpec, flags: LaunchFlags, nproc_per_node: int | None) -> int:
    """Print the plan (--dry-run), or start the ranks and report; the exit code."""
    from scalescope.launch.runner import RunEndNotWritten
    from scalescope.launch.session import dry_run, start

    given = nproc_per_node is not None
    try:
        if flags.dry_run:
            from scalescope.report.views.plan import render_plan

            render_plan(dry_run(spec, given, flags.master_addr), plain_console())
            return 0
        if flags.live:
            outcome = start_live(spec, given, flags.master_addr)
        else:
            outcome = start(spec, given, flags.master_addr)
    except ValueError as exc:
        raise CommandError(str(exc), 1 if isinstance(exc, RunEndNotWritten) else 2) from None
    return finish(outcome, not flags.no_report, spec.probe, flags.html)


def finish(outcome: Outcome, show_report: bool, probe: bool, html: Path | None) -> int:
    """The report where this process reports (rank 0's node), and where the run is kept."""
    if probe and outcome.report_here and (show_report or html):
        from scalescope.api.reporting import ReportFiles, report_run

        for path in report_run(outcome.run_dir, ReportFiles(html=html), terminal=show_report):
            err.print(f"wrote {path}")
    if outcome.report_here:
        err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    return outcome.exit_code


def start_live(spec: RunSpec, given: bool, master_addr: str | None) -> Outcome:
    """Start the run with the live view drawn here (the ranks' output in RUN_DIR/logs)."""
    import os

    from scalescope.launch.runner import default_run_dir
    from scalescope.launch.session import find_world, start
    from scalescope.live.terminal import LiveThread

    world = find_world(spec, given, master_addr, os.environ)
    if world is not None and not given:
        raise ValueError(
            f"--live draws in the terminal that launches the ranks; under {world.source} each "
            "task is a rank: watch with `scalescope top RUN_DIR` from another terminal"
        )
    spec = replace(spec, run_dir=spec.run_dir or default_run_dir(spec))
    with LiveThread(spec.run_dir, err):
        outcome = start(spec, given, master_addr)
    err.print(f"the ranks' output: {outcome.run_dir / 'logs'}")
    return outcome
