"""`scalescope project`: project a run or validate on a scale study, print the result, keep the
projection in the run directory (for its dashboard) and write the JSON and HTML asked for."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from scalescope.commands.common import CommandError, err, int_list
from scalescope.commands.options.reading import ProjectCommand
from scalescope.events.files import PROJECTION_FILE
from scalescope.events.run import write_bytes_atomic
from scalescope.predict.project import Projection, ProjectOptions, project_run
from scalescope.predict.validate import validate_study
from scalescope.report.formatting import report_console
from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render, write


def store_projection(run_dir: Path, projection: Projection) -> Path:
    """Keep the projection in the run directory, where the run's dashboard finds it (the
    latest projection replaces an earlier one)."""
    stored = render(projection, "json")
    assert isinstance(stored, bytes)
    return write_bytes_atomic(run_dir / PROJECTION_FILE, stored)


def write_projection(
    run_dir: Path, options: ProjectOptions, json_file: Path | None, html_file: Path | None
) -> list[Path]:
    """Project a run, print it, store it in the run directory (for its dashboard), and write
    the JSON and HTML asked for."""
    projection = project_run(run_dir, options)
    render_document(render(projection, "terminal"), report_console())
    run_dir = Path(projection.run_dir)
    written = []
    try:
        written.append(store_projection(run_dir, projection))
    except OSError as exc:
        Console(stderr=True, markup=False, highlight=False).print(
            f"warning: the projection was not stored in {run_dir} ({exc.strerror or exc}): "
            "its dashboard will not show it"
        )
    if json_file is not None:
        written.append(write(projection, "json", json_file))
    if html_file is not None:
        written.append(write(projection, "html", html_file))
    return written


def write_validation(
    study_dir: Path, holdout: int, comm: Path | None, algorithm: str, json_file: Path | None
) -> None:
    """Validate on a scale study, print predicted vs measured, write the JSON if asked."""
    result = validate_study(study_dir, holdout, comm, algorithm)
    render_document(render(result, "terminal"), report_console())
    if json_file is not None:
        write(result, "json", json_file)


def project(command: ProjectCommand) -> None:
    """Project a run (or validate on a study), print it and write what was asked for."""
    c = command
    if (c.run_dir is None) == (c.validate is None):
        raise CommandError("give a RUN_DIR to project, or --validate STUDY_DIR (not both)")
    try:
        if c.validate is not None:
            write_validation(c.validate, c.holdout, c.comm, c.algorithm, c.json_file)
            return
        options = ProjectOptions(
            nodes=int_list(c.nodes, "--nodes") or (), ranks_per_node=c.ranks_per_node,
            hardware=c.hardware, comm=c.comm, global_batch=c.global_batch,
            per_rank_batch=c.per_rank_batch, algorithm=c.algorithm,
            epoch_samples=c.epoch_samples, efficiency=c.efficiency, model=c.model,
        )  # fmt: skip
        written = write_projection(c.run_dir, options, c.json_file, c.html)  # type: ignore[arg-type]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        err.print(f"wrote {path}")
