"""`report`, `analyze`, `compare`, `env`: render what was recorded or found."""

from __future__ import annotations

from scalescope.cli.common import app, drive, needs_run_extra
from scalescope.cli.params import options_command
from scalescope.commands.options.reading import (
    AnalyzeCommand,
    CompareCommand,
    EnvCommand,
    ReportCommand,
    WhatIfCommand,
)


@app.command()
@options_command(ReportCommand)
def report(options: ReportCommand) -> None:
    """Print where the time went in a recorded run; optionally write JSON, HTML, timeline.
    A scale study or a suite prints its table again."""
    from scalescope.commands import report as journey

    drive(journey.report, options)


@app.command()
@options_command(AnalyzeCommand)
def analyze(options: AnalyzeCommand) -> None:
    """The same report for traces from other tools (torch.profiler/Kineto, Horovod)."""
    from scalescope.commands import report as journey

    drive(journey.analyze, options)


@app.command()
@options_command(CompareCommand)
def compare(options: CompareCommand) -> None:
    """The same tables for two runs side by side, with ratios B / A."""
    from scalescope.commands import report as journey

    drive(journey.compare, options)


@app.command()
@options_command(EnvCommand)
def env(options: EnvCommand) -> None:
    """Software build and hardware facts that decide speed, with a warning for each trap."""
    needs_run_extra("env")
    from scalescope.commands import env as journey

    drive(journey.env, options)


@app.command()
@options_command(WhatIfCommand)
def whatif(options: WhatIfCommand) -> None:
    """What fixing each cause would buy: the recorded steps replayed with a rank, a node,
    the network or the compute fixed."""
    from scalescope.commands import whatif as journey

    drive(journey.whatif, options)
