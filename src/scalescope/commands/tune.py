"""`scalescope tune`: the workload as given (a script, or --bench MODEL) read into a target,
the study run with its progress drawn, the table printed and the JSON and HTML written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalescope.api.launching import launch_spec
from scalescope.commands.common import CommandError, err, launch_error
from scalescope.commands.options.launching import TuneCommand

if TYPE_CHECKING:
    from scalescope.tune.apply import TuneTarget


def tune(command: TuneCommand) -> int:
    """Run (or resume) the study, print its table, write its files; 130 when interrupted."""
    from scalescope.report.formatting import report_console
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import progress, render, write
    from scalescope.tune.apply import default_study_dir, target_space
    from scalescope.tune.search import tune as run_study
    from scalescope.tune.study import TuneOptions

    target = tune_target(command)
    try:
        knobs, notes = target_space(target, list(command.space) if command.space else None)
        options = TuneOptions(
            trials=command.trials, budget_min=command.budget, trial_seconds=command.trial_seconds,
            sampler=command.sampler, prune=not command.no_prune, seed=command.seed,
            resume=command.resume, confirm=command.confirm, confirm_rounds=command.confirm_rounds,
        )  # fmt: skip
        study_dir = command.run_dir or default_study_dir(target)
        with progress("trials")(err, command.trial_seconds) as trials:
            result = run_study(target, knobs, options, study_dir, trials, notes)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    render_document(render(result, "terminal"), report_console())
    if command.json_file is not None:
        err.print(f"wrote {write(result, 'json', command.json_file)}")
    if command.html is not None:
        err.print(f"wrote {write(result, 'html', command.html)}")
    err.print(f"study: {study_dir}  (scalescope tune --resume --run-dir {study_dir} ...)")
    return 130 if result.stopped == "interrupted" else 0


def tune_target(command: TuneCommand) -> TuneTarget:
    """The workload tune starts from: a script or module, or --bench MODEL."""
    from scalescope.bench.options import BenchOptions
    from scalescope.tune.apply import TuneTarget

    script, model, args = command.script, command.bench_model, list(command.args)
    if script is not None and model is not None:
        raise CommandError(
            f"--bench takes no script or script arguments, got {' '.join([script, *args])}"
        )
    if script is None and model is None:
        raise CommandError("give a training script or --bench MODEL (one of them)")
    if model is None and command.fsdp:
        raise CommandError("--fsdp is an option of --bench: a script shards its own model")
    if script is not None and script.startswith("-"):
        raise CommandError(f"No such option: {script} (see scalescope tune --help)")
    config, nproc, warmup = command.launch, command.nproc_per_node, command.warmup_steps
    try:
        if model is None:
            spec = launch_spec(
                config, nproc, target=script, is_module=command.module, args=args,
                warmup_steps=warmup,
            )  # fmt: skip
            return TuneTarget(spec)
        options = BenchOptions(
            model=model, batch_size=command.batch_size, image_size=command.image_size,
            steps=command.trial_steps, warmup_steps=warmup, fsdp=command.fsdp,
        )  # fmt: skip
        spec = launch_spec(
            config, nproc, target="scalescope.bench.workload", is_module=True,
            args=options.workload_args(), warmup_steps=warmup, workload=model,
            options=options.as_dict(),
        )  # fmt: skip
    except ValueError as exc:
        raise launch_error(exc) from None
    return TuneTarget(spec, options)
