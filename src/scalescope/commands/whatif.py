"""`scalescope whatif`: replay a recorded run's steps with causes fixed and print what each
fix buys; optionally write it as JSON."""

from __future__ import annotations

from scalescope.commands.common import CommandError
from scalescope.commands.options.reading import WhatIfCommand


def causes_asked(command: WhatIfCommand) -> list[str] | None:
    """The causes of --fix, --comm-speed and --compute-speed; None: let the engine choose."""
    causes = list(command.fix or ())
    if command.comm_speed is not None:
        causes.append(f"comm:{command.comm_speed:g}")
    if command.compute_speed is not None:
        causes.append(f"compute:{command.compute_speed:g}")
    return causes or None


def whatif(command: WhatIfCommand) -> None:
    """One model of the run (step_grid.py) serves the table, the JSON and the timeline."""
    from scalescope.analyze.model.whatif import (
        every_cause_replayed,
        hosts_of,
        replay_grid,
        replay_timeline,
        what_if_of,
        with_kept,
    )
    from scalescope.diagnose.recording import Recording
    from scalescope.events.run import RunDirError
    from scalescope.report.formatting import report_console
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render, write

    try:
        rec = Recording.load(command.run_dir)
    except RunDirError as exc:
        raise CommandError(str(exc)) from None
    run, causes = rec.run, causes_asked(command)
    hosts, warmup = hosts_of(run), run.meta.warmup_steps
    grid, left = replay_grid(run, warmup, causes, clocks=rec.analysis.clocks)
    if grid is None:
        raise CommandError(f"no step of {command.run_dir} can be replayed: {'; '.join(left)}")
    try:
        result = with_kept(what_if_of(grid, left, hosts, warmup, causes), run)
        if causes is not None:
            every_cause_replayed(result)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    render_document(render(result, "terminal"), report_console())
    if command.json_file is not None:
        write(result, "json", command.json_file)
    if command.timeline is not None and result.fixes:
        trace = replay_timeline(grid, hosts, warmup, result.fixes[0].cause)
        write(trace, "timeline", command.timeline)
