"""What the commands share: the app, the error console, launch options and their parsing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from scalescope.launch.plan import MappingOptions

if TYPE_CHECKING:
    from scalescope.diagnose.thresholds import Thresholds
    from scalescope.launch.local import LaunchOptions, OutputOptions
    from scalescope.launch.runner import RunSpec
    from scalescope.launch.session import Outcome

app = typer.Typer(
    help="Launch, profile and report on distributed PyTorch training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
"""Markup off: paths, script arguments and error messages may hold ``[`` ``]``; they print
verbatim."""

PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}

NPROC = typer.Option(
    None, "--nproc-per-node", "-n", help="Ranks to start on this node (default: 1).", min=1
)
THRESHOLD = typer.Option(
    None,
    "--threshold",
    "-t",
    help="Set a diagnosis threshold, NAME=VALUE (repeat), e.g. data_share_pct=20; "
    "names in docs/diagnosis.md.",
)
BASELINE = typer.Option(
    None,
    "--baseline",
    help="A good bench run on this machine: its FLOP/s become the expected ones.",
)


def diagnosis_thresholds(items: list[str] | None, baseline: Path | None) -> Thresholds:
    """The thresholds from --threshold and --baseline (a bad one fails with its reason)."""
    from scalescope.diagnose.calibrate import calibrate, parse_overrides
    from scalescope.events.run import RunDirError

    try:
        thresholds = parse_overrides(items or [])
        if baseline is None:
            return thresholds
        calibration = calibrate(baseline, thresholds)
    except (ValueError, RunDirError) as exc:
        fail(str(exc))
        raise
    err.print(calibration.note)
    return calibration.thresholds


def plain_console() -> Console:
    """Standard output with markup off, so recorded strings print verbatim."""
    return Console(highlight=False, markup=False)


def fail(message: str, code: int = 2) -> None:
    err.print(Text.assemble(("error:", "bold red"), " ", message))
    raise typer.Exit(code)


def finish(outcome: Outcome, show_report: bool, probe: bool, html: Path | None) -> None:
    if probe and outcome.report_here and (show_report or html):
        from scalescope.commands.report import ReportFiles, report_run

        for path in report_run(outcome.run_dir, ReportFiles(html=html), terminal=show_report):
            err.print(f"wrote {path}")
    if outcome.report_here:
        err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    raise typer.Exit(outcome.exit_code)


def output_options(p: dict[str, Any]) -> OutputOptions:
    from scalescope.launch.local import OutputOptions

    shown = p["ranks_output"]
    wrong = ValueError(f"--ranks-output takes ranks like 0 or 0,3, got {shown!r}")
    try:
        ranks = tuple(int(r) for r in shown.split(",") if r.strip()) if shown else None
    except ValueError as exc:
        raise wrong from exc
    if ranks == ():
        raise wrong
    return OutputOptions(label=p["label_output"], ranks=ranks, quiet=p["live"])


def launch_options(p: dict[str, Any]) -> LaunchOptions:
    from scalescope.launch.local import LaunchOptions

    return LaunchOptions(
        output=output_options(p),
        nproc_per_node=p["nproc_per_node"] or 1,
        master_addr=p["master_addr"] or "127.0.0.1",
        master_port=p["master_port"],
        nnodes=p["nnodes"],
        node_rank=p["node_rank"],
        rdzv_endpoint=p["rdzv_endpoint"],
        rdzv_backend=p["rdzv_backend"],
        rdzv_id=p["rdzv_id"],
        local_addr=p["local_addr"],
    )


def mapping_options(p: dict[str, Any]) -> MappingOptions:
    numa = p["numa_nodes"]
    try:
        numa_nodes = tuple(int(n) for n in numa.split(",")) if numa else None
    except ValueError as exc:
        raise ValueError(f"--numa-nodes takes numbers like 0,1, got {numa!r}") from exc
    return MappingOptions(
        bind=not p["no_bind"],
        bind_to=p["bind_to"],
        map_by=p["map_by"],
        threads_per_rank=p["threads_per_rank"],
        numa_nodes=numa_nodes,
        cpu_lists=tuple(p["cpu_list"]) if p["cpu_list"] else None,
        oversubscribe=p["oversubscribe"],
        allocator=p["allocator"],
    )


def launch_spec(p: dict[str, Any], **spec: Any) -> RunSpec:
    """A RunSpec from the shared launch options of run and bench; bad values exit with 2."""
    from scalescope.launch.hang_watch import HangOptions
    from scalescope.launch.runner import RunSpec
    from scalescope.report.hang_view import render_hang

    try:
        hang = HangOptions(after_s=p["hang_after"], action=p["hang_action"], render=render_hang)
        if p["no_probe"] and (p["hang_after"] is not None or p["hang_action"] != "report"):
            raise ValueError(
                "--hang-after and --hang-action need the probe (the hang watch reads the ranks' "
                "live states): drop --no-probe, or them"
            )
        return RunSpec(
            hang=hang,
            launch=launch_options(p),
            mapping=mapping_options(p),
            run_dir=p["run_dir"],
            probe=not p["no_probe"],
            report_bindings=p["report_bindings"],
            command=["scalescope", *sys.argv[1:]],
            **spec,
        )
    except ValueError as exc:
        fail(str(exc))
        raise


def start_or_plan(spec: RunSpec, p: dict[str, Any]) -> None:
    from scalescope.launch.session import dry_run, start

    given = p["nproc_per_node"] is not None
    try:
        if p["dry_run"]:
            from scalescope.report.plan_view import render_plan

            render_plan(dry_run(spec, given, p["master_addr"]), plain_console())
            raise typer.Exit(0)
        if p["live"]:
            outcome = start_live(spec, given, p["master_addr"])
        else:
            outcome = start(spec, given, p["master_addr"])
    except ValueError as exc:
        from scalescope.launch.runner import RunEndNotWritten

        fail(str(exc), code=1 if isinstance(exc, RunEndNotWritten) else 2)
    finish(outcome, not p["no_report"], spec.probe, p["html"])


def start_live(spec: RunSpec, given: bool, master_addr: str | None) -> Outcome:
    """Start the run with the live view drawn here (the ranks' output in RUN_DIR/logs)."""
    import os
    from dataclasses import replace

    from scalescope.launch.runner import default_run_dir
    from scalescope.launch.session import find_world, start
    from scalescope.report.live_top import LiveThread

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


def int_list(text: str | None, flag: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        fail(f"{flag} takes numbers like 1,2,4, got {text!r}")
        raise


def time_stamp() -> str:
    import time

    return time.strftime("%Y%m%d-%H%M%S")
