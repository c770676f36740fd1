"""The launch journey that run, bench, comm, scale and tune share: the launch options read into
the launcher's ``RunSpec``, the ranks started (or their plan printed, --dry-run), the report
printed at the end, or the live view drawn while they train.

A bad value or a launch that cannot go on is a ``ValueError`` naming its flag (a
``RunEndNotWritten`` when the run went but its end was not recorded); each command turns it
into its one error line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from scalescope.launch.options.groups import LaunchConfig
from scalescope.launch.process.local import LaunchOptions, OutputOptions

if TYPE_CHECKING:
    from scalescope.launch.run.runner import RunSpec
    from scalescope.launch.run.session import Outcome


def launch_options(config: LaunchConfig, nproc_per_node: int | None) -> LaunchOptions:
    """The launcher's options on this node: the rendezvous as given, -n, the terminal's share."""
    terminal, rendezvous = config.terminal, config.rendezvous
    output = OutputOptions(label=terminal.label_output, ranks=terminal.ranks, quiet=terminal.live)
    given = {name: getattr(rendezvous, name) for name in rendezvous.__dataclass_fields__}
    return LaunchOptions(**given, nproc_per_node=nproc_per_node or 1, output=output)


def launch_spec(config: LaunchConfig, nproc_per_node: int | None, **spec: Any) -> RunSpec:
    """The launcher's RunSpec from the launch options and ``spec`` (what runs)."""
    from scalescope.launch.run.runner import RunSpec
    from scalescope.report.renderers import render

    return RunSpec(
        hang=replace(config.hang, render=partial(render, output="text")),
        launch=launch_options(config, nproc_per_node),
        mapping=config.mapping,
        run_dir=config.recording.run_dir,
        probe=not config.recording.no_probe,
        report_bindings=config.recording.report_bindings,
        ring_rows=config.recording.ring_rows,
        record=config.recording.record,
        node_files=not config.recording.no_node_files,
        command=["scalescope", *sys.argv[1:]],
        **spec,
    )


def start_or_plan(
    spec: RunSpec, config: LaunchConfig, nproc_per_node: int | None, log: Console
) -> int:
    """Print the plan (--dry-run), or start the ranks and report on ``log``; the exit code."""
    from scalescope.launch.run.session import dry_run, start

    given, addr = nproc_per_node is not None, config.rendezvous.master_addr
    if config.recording.dry_run:
        from scalescope.report.media.terminal import render_document
        from scalescope.report.renderers import document

        plan = document(dry_run(spec, given, addr))
        render_document(plan, Console(highlight=False, markup=False))
        return 0
    if config.terminal.live:
        outcome = start_live(spec, given, addr, log)
    else:
        outcome = start(spec, given, addr)
    at_end = config.at_end
    return finish(outcome, not at_end.no_report, spec.probe, at_end.html, log)


def finish(
    outcome: Outcome, show_report: bool, probe: bool, html: Path | None, log: Console
) -> int:
    """The report where this process reports (rank 0's node), and where the run is kept."""
    if probe and outcome.report_here and (show_report or html):
        from scalescope.api.reporting import ReportFiles, report_run

        for path in report_run(outcome.run_dir, ReportFiles(html=html), terminal=show_report):
            log.print(f"wrote {path}")
    if outcome.report_here:
        log.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    return outcome.exit_code


def start_live(spec: RunSpec, given: bool, master_addr: str | None, log: Console) -> Outcome:
    """Start the run with the live view drawn on ``log`` (the ranks' output in RUN_DIR/logs)."""
    from scalescope.launch.run.runner import default_run_dir
    from scalescope.launch.run.session import find_world, start
    from scalescope.live.terminal import LiveThread

    world = find_world(spec, given, master_addr, os.environ)
    if world is not None and not given:
        raise ValueError(
            f"--live draws in the terminal that launches the ranks; under {world.source} each "
            "task is a rank: watch with `scalescope top RUN_DIR` from another terminal"
        )
    spec = replace(spec, run_dir=spec.run_dir or default_run_dir(spec))
    with LiveThread(spec.run_dir, log):
        outcome = start(spec, given, master_addr)
    log.print(f"the ranks' output: {outcome.run_dir / 'logs'}")
    return outcome
