"""`scalescope project`: project a run or validate on a scale study, print the result, keep the
projection in the run directory (for its dashboard) and write the JSON and HTML asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from scalescope.commands.common import CommandError, err, int_list
from scalescope.events.files import PROJECTION_FILE
from scalescope.events.run import write_bytes_atomic
from scalescope.predict.project import Projection, ProjectOptions, project_run
from scalescope.predict.validate import validate_study
from scalescope.report.formatting import report_console
from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render, write
from scalescope.report.views.project import projection_json


def store_projection(run_dir: Path, projection: Projection) -> Path:
    """Keep the projection in the run directory, where the run's dashboard finds it (the
    latest projection replaces an earlier one)."""
    return write_bytes_atomic(run_dir / PROJECTION_FILE, projection_json(projection))


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


@dataclass(frozen=True, kw_only=True)
class ProjectCommand:
    """The options of ``scalescope project``."""

    run_dir: Path | None = None
    """A run directory or a scale study (its largest size); or ``validate``."""
    nodes: str = "1,2,4,8"
    """Node counts to project, as given: 1,2,4,8."""
    ranks_per_node: int | None = None
    hardware: str | None = None
    """A catalogue name or FILE.toml; None: the machine of the run."""
    comm: Path | None = None
    """α-β fits for the allreduce: a `comm --json` file or a comm run directory."""
    global_batch: int | None = None
    """Strong scaling: this global batch at every size."""
    per_rank_batch: int | None = None
    """Weak scaling with this batch per rank; None: the run's."""
    algorithm: str = "ring"
    epoch_samples: int = 1_281_167
    efficiency: float | None = None
    """With ``hardware``: the fraction of its roofline; None: as here."""
    validate: Path | None = None
    """A scale study: fit on the smaller sizes, predict the largest."""
    holdout: int = 1
    """Largest sizes held out by ``validate``."""
    json_file: Path | None = None
    html: Path | None = None


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
            epoch_samples=c.epoch_samples, efficiency=c.efficiency,
        )  # fmt: skip
        written = write_projection(c.run_dir, options, c.json_file, c.html)  # type: ignore[arg-type]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        err.print(f"wrote {path}")
