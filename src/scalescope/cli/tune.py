"""`tune`: search the knobs of a workload by short real trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scalescope.cli.common import (
    NPROC,
    PASSTHROUGH,
    app,
    err,
    fail,
    launch_spec,
)
from scalescope.cli.launch_options import with_launch_options
from scalescope.cli.option_check import CheckedCommand


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
    launch: dict[str, Any],
) -> None:
    """Search the knobs of SCRIPT [ARGS] (or --bench MODEL) by short real trials.

    The workload as given runs first (the baseline); the diagnosis of it proposes the next
    trials; then the sampler. Then the baseline and the top --confirm configurations run
    again, interleaved, and the best is named by its median samples/s. Ctrl-C ends the study
    and still prints the table.
    """
    from scalescope.report.tune_view import TuneProgress, render_tune, tune_json
    from scalescope.tune.apply import default_study_dir, target_space
    from scalescope.tune.search import tune as run_study
    from scalescope.tune.study import TuneOptions

    params = locals() | launch
    target = tune_target(params, list(ctx.args))
    try:
        knobs = target_space(target, space)
        options = TuneOptions(
            trials=trials, budget_min=budget, trial_seconds=trial_seconds, sampler=sampler,
            prune=not no_prune, seed=seed, resume=resume, confirm=confirm,
            confirm_rounds=confirm_rounds,
        )  # fmt: skip
        study_dir = run_dir or default_study_dir(target)
        with TuneProgress(err, trial_seconds) as progress:
            result = run_study(target, knobs, options, study_dir, progress)
    except ValueError as exc:
        fail(str(exc))
    from scalescope.report.formatting import report_console

    render_tune(result, report_console())
    if json_file is not None:
        json_file.write_bytes(tune_json(result))
        err.print(f"wrote {json_file}")
    if html is not None:
        from scalescope.report.tune_view import render_tune_html

        html.write_text(render_tune_html(result), encoding="utf-8")
        err.print(f"wrote {html}")
    err.print(f"study: {study_dir}  (scalescope tune --resume --run-dir {study_dir} ...)")
    raise typer.Exit(130 if result.stopped == "interrupted" else 0)


def tune_target(p: dict[str, Any], args: list[str]):  # noqa: ANN201
    """The workload tune starts from: a script or module, or --bench MODEL."""
    from scalescope.bench.options import BenchOptions
    from scalescope.tune.apply import TuneTarget

    script, model = p["script"], p["bench_model"]
    if script is not None and model is not None:
        fail(f"--bench takes no script or script arguments, got {' '.join([script, *args])}")
    if script is None and model is None:
        fail("give a training script or --bench MODEL (one of them)")
    if model is None and p["fsdp"]:
        fail("--fsdp is an option of --bench: a script shards its own model")
    if script is not None and script.startswith("-"):
        fail(f"No such option: {script} (see scalescope tune --help)")
    if model is None:
        spec = launch_spec(
            p, target=script, is_module=p["module"], args=args, warmup_steps=p["warmup_steps"]
        )
        return TuneTarget(spec)
    try:
        options = BenchOptions(
            model=model, batch_size=p["batch_size"], image_size=p["image_size"],
            steps=p["trial_steps"], warmup_steps=p["warmup_steps"], fsdp=p["fsdp"],
        )  # fmt: skip
    except ValueError as exc:
        fail(str(exc))
    spec = launch_spec(
        p, target="scalescope.bench.workload", is_module=True, args=options.workload_args(),
        warmup_steps=p["warmup_steps"], workload=model, options=options.as_dict(),
    )  # fmt: skip
    return TuneTarget(spec, options)
