"""`tune`: search the knobs of a workload by short real trials."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import NPROC, PASSTHROUGH, app, drive
from scalescope.cli.launch_options import with_launch_options
from scalescope.cli.option_check import CheckedCommand
from scalescope.commands.run import LaunchFlags


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@with_launch_options("rendezvous", "placement")
def tune(
    ctx: typer.Context,
    script: str | None = typer.Argument(None, help="Training script (or module with -m)."),
    bench_model: str | None = typer.Option(
        None, "--bench", help="Tune the built-in bench workload of this model instead."
    ),
    nproc_per_node: int | None = NPROC,
    module: bool = typer.Option(False, "--module", "-m", help="SCRIPT is a module name."),
    space: list[str] | None = typer.Option(
        None, "--space", help="A knob and its values, NAME=V1,V2 (repeat); see docs/tune.md."
    ),
    trials: int = typer.Option(20, "--trials", help="Trials in the study, baseline included."),
    trial_seconds: float = typer.Option(
        60.0, "--trial-seconds", help="Time budget of one trial; then it is stopped."
    ),
    budget: float | None = typer.Option(
        None, "--budget", help="Minutes after which no new trial starts."
    ),
    sampler: str = typer.Option("tpe", "--sampler", help="tpe, gp, random or grid (exhaustive)."),
    no_prune: bool = typer.Option(False, "--no-prune", help="Never stop a slow trial early."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampler."),
    resume: bool = typer.Option(False, "--resume", help="Continue the study in --run-dir."),
    confirm: int = typer.Option(
        3, "--confirm", help="Run the baseline and the top K again after the search; 0: off."
    ),
    confirm_rounds: int = typer.Option(
        2, "--confirm-rounds", help="Interleaved rounds of the confirmation runs."
    ),
    warmup_steps: int = typer.Option(5, help="Steps of each trial left out of samples/s.", min=0),
    batch_size: int = typer.Option(32, help="--bench: images per rank per step.", min=1),
    image_size: int = typer.Option(224, help="--bench: height and width of the images.", min=8),
    trial_steps: int = typer.Option(200, help="--bench: steps of one trial.", min=2),
    fsdp: bool = typer.Option(
        False, "--fsdp", help="--bench: FSDP2 (fully_shard on each block) instead of DDP."
    ),
    run_dir: Path | None = typer.Option(
        None, "--run-dir", help="The study's directory (default: scalescope_runs/tune-…)."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write every trial as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the study's HTML page."),
    *,
    launch: LaunchFlags,
) -> None:
    """Search the knobs of SCRIPT [ARGS] (or --bench MODEL) by short real trials.

    The workload as given runs first (the baseline); the diagnosis of it proposes the next
    trials; then the sampler. Then the baseline and the top --confirm configurations run
    again, interleaved, and the best is named by its median samples/s. Ctrl-C ends the study
    and still prints the table.
    """
    from scalescope.commands import tune as journey

    drive(journey.tune, journey.TuneCommand(
        script=script, bench_model=bench_model, module=module, args=tuple(ctx.args),
        nproc_per_node=nproc_per_node, space=space, trials=trials, trial_seconds=trial_seconds,
        budget=budget, sampler=sampler, no_prune=no_prune, seed=seed, resume=resume,
        confirm=confirm, confirm_rounds=confirm_rounds, warmup_steps=warmup_steps,
        batch_size=batch_size, image_size=image_size, trial_steps=trial_steps, fsdp=fsdp,
        run_dir=run_dir, json_file=json_file, html=html, launch=launch,
    ))  # fmt: skip
