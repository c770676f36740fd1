"""`scalescope scale`: the same workload at each size, one profiled run directory per size.

Weak scaling keeps the per-rank batch; strong scaling keeps the global batch and divides
it by the ranks. Each size is an ordinary run (``STUDY_DIR/ranks-N/``) started through the
same launcher as `run`; its figures come from its own report (analyze), so the table and
``scalescope report STUDY_DIR/ranks-N`` agree by construction. A size that cannot start or
fails is recorded with its error; the other sizes still run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from msgspec.structs import replace as replace_point

from scalescope.api.launching import launch_spec
from scalescope.commands.common import CommandError, err, int_list, launch_error
from scalescope.commands.options.launching import ScaleCommand
from scalescope.events.files import SCALE_STUDY_FILE
from scalescope.events.run import RunDirError
from scalescope.events.study import ScalePoint, ScaleStudy, save_study
from scalescope.launch.options.groups import LaunchConfig
from scalescope.launch.run.runner import RunSpec

BATCH_PLACEHOLDER = "{batch}"
"""In a script's arguments, replaced by the per-rank batch of each size."""


@dataclass(frozen=True, kw_only=True)
class ScalePlan:
    """The sizes to run and how the batch changes with them."""

    ranks: tuple[int, ...]
    nodes: tuple[int, ...]
    """Nodes of each size (1 everywhere unless --nodes)."""
    strong: bool = False
    batch_size: int | None = None
    """Per-rank batch (weak) or global batch (strong); None when the script sets its own."""
    batch_arg: str | None = None
    """The bench option that takes the per-rank batch (``--batch-size``), or None for a script."""

    def __post_init__(self) -> None:
        if not self.ranks or min(self.ranks) < 1:
            raise ValueError("--ranks needs positive rank counts, e.g. 1,2,4")
        if len(self.nodes) != len(self.ranks):
            raise ValueError(f"--nodes gives {len(self.nodes)} sizes for {len(self.ranks)} --ranks")
        for n, k in zip(self.ranks, self.nodes, strict=True):
            if k < 1 or n % k:
                raise ValueError(f"{n} ranks do not spread evenly over {k} nodes")
        if self.strong and self.batch_size is None:
            raise ValueError("--strong needs --batch-size (the global batch to keep)")
        if self.strong:
            bad = [n for n in self.ranks if self.batch_size % n]
            if bad:
                raise ValueError(f"global batch {self.batch_size} does not divide by {bad} ranks")

    def per_rank_batch(self, ranks: int) -> int | None:
        if self.batch_size is None:
            return None
        return self.batch_size // ranks if self.strong else self.batch_size

    def args_for(self, args: list[str], ranks: int) -> list[str]:
        """The workload's arguments at this size: the per-rank batch filled in."""
        batch = self.per_rank_batch(ranks)
        if batch is None:
            return list(args)
        if self.batch_arg is not None:
            return [*args, f"{self.batch_arg}={batch}"]
        return [a.replace(BATCH_PLACEHOLDER, str(batch)) for a in args]


def point_spec(base: RunSpec, plan: ScalePlan, study_dir: Path, i: int) -> RunSpec:
    ranks, nodes = plan.ranks[i], plan.nodes[i]
    launch = replace(base.launch, nproc_per_node=ranks // nodes, nnodes=nodes)
    run_dir = study_dir / f"ranks-{ranks}"
    options = dict(base.options)
    if "batch_size" in options and plan.per_rank_batch(ranks) is not None:
        options["batch_size"] = plan.per_rank_batch(ranks)
    args = plan.args_for(base.args, ranks)
    return replace(base, launch=launch, run_dir=run_dir, args=args, options=options)


def recorded_point(point: ScalePoint, run_dir: Path) -> ScalePoint:
    """The point with its run's own figures: status, samples/s, step time, oversubscription."""
    from scalescope.diagnose.recording import Recording

    rec = Recording.load(run_dir)
    run, analysis = rec.run, rec.analysis
    steps = analysis.steps
    threads = max((m.num_threads for m in run.ranks.values()), default=0)
    cores = run.meta.hardware.get("usable_cores") or run.meta.hardware.get("logical_cores")
    failed = analysis.first_failure
    return replace_point(
        point,
        status="ok" if analysis.status == "completed" else "failed",
        error=None if failed is None else (failed.error or failed.status).splitlines()[-1],
        threads_per_rank=threads,
        samples_per_s=steps.samples_per_s if steps else None,
        step_ms=steps.mean_step_ms if steps else None,
        oversubscribed=bool(cores) and point.ranks_per_node * threads > cores,
    )


def run_point(
    base: RunSpec, plan: ScalePlan, study_dir: Path, i: int, start: Callable[[RunSpec], object]
) -> ScalePoint:
    ranks, nodes = plan.ranks[i], plan.nodes[i]
    point = ScalePoint(
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=ranks // nodes,
        per_rank_batch=plan.per_rank_batch(ranks),
        run_dir=f"ranks-{ranks}",
    )
    if base.launch.node_rank >= nodes:
        return replace_point(point, status="failed", error="this node is not in this size")
    try:
        start(point_spec(base, plan, study_dir, i))
        return recorded_point(point, study_dir / point.run_dir)
    except (ValueError, RunDirError, OSError) as exc:
        return replace_point(point, status="failed", error=str(exc))


def run_study(
    base: RunSpec,
    plan: ScalePlan,
    study_dir: Path,
    start: Callable[[RunSpec], object],
    on_point: Callable[[ScalePoint], None] = lambda p: None,
) -> ScaleStudy:
    """Run every size in order, saving scale.json after each (a crash keeps the sizes done).

    On several nodes every node runs the same study with its --node-rank; a node beyond a
    size's node count sits that size out, and only node 0 writes scale.json.
    """
    study = ScaleStudy(
        mode="strong" if plan.strong else "weak",
        command=base.command,
        workload=base.workload if base.workload != "script" else base.target,
    )
    for i in range(len(plan.ranks)):
        study.points.append(run_point(base, plan, study_dir, i, start))
        if base.launch.node_rank == 0:
            save_study(study, study_dir)
        on_point(study.points[-1])
    return study


def scale(command: ScaleCommand) -> int:
    """Run every size, print the scaling table, write its page; 1 when a size failed."""
    from scalescope.api.reporting import report_study
    from scalescope.launch.run.session import start
    from scalescope.report.formatting import report_console
    from scalescope.report.renderers import progress

    c = command
    sizes = int_list(c.ranks, "--ranks") or ()
    if (c.script is None) == (c.bench_model is None):
        raise CommandError("give a training script or --bench MODEL (one of them)")
    try:
        plan = ScalePlan(
            ranks=sizes, nodes=int_list(c.nodes, "--nodes") or (1,) * len(sizes), strong=c.strong,
            batch_size=c.batch_size if c.script or c.batch_size else 32,
            batch_arg="--batch-size" if c.bench_model else None,
        )  # fmt: skip
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    name = c.bench_model or Path(c.script or "").stem
    where = (
        c.study_dir or Path("scalescope_runs") / f"scale-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if (where / SCALE_STUDY_FILE).exists():
        raise CommandError(f"{str(where)} already holds a study; choose another --run-dir")
    try:  # the base run's node count; each size sets its own
        nodes = replace(c.launch.rendezvous, nnodes=max(plan.nodes))
        spec = scale_spec(c, replace(c.launch, rendezvous=nodes))
    except ValueError as exc:
        raise launch_error(exc) from None
    eta = progress("eta")(len(plan.ranks), "scale")

    def start_size(size_spec: RunSpec) -> object:
        ranks = size_spec.launch.world_size
        err.print(eta.line(f"{ranks} rank{'s' if ranks > 1 else ''}"))
        return start(size_spec, True, c.launch.rendezvous.master_addr)

    study = run_study(spec, plan, where, start_size, scale_progress)
    for path in report_study(where, c.html, report_console()):
        err.print(f"wrote {path}")
    err.print(f"study: {where / SCALE_STUDY_FILE}  (scalescope report {where})")
    return 0 if all(p.status == "ok" for p in study.points) else 1


def scale_spec(command: ScaleCommand, config: LaunchConfig) -> RunSpec:
    """The run of one size before its ranks and batch are set."""
    c, args = command, list(command.args)
    if c.bench_model is None:
        if c.batch_size is not None and not any(BATCH_PLACEHOLDER in a for a in args):
            raise CommandError("--batch-size with a script needs {batch} in the script's arguments")
        return launch_spec(config, 1, target=c.script, args=args, warmup_steps=c.warmup_steps)
    from scalescope.bench.options import BenchOptions

    if c.warmup_steps >= c.steps:
        raise CommandError(
            f"--warmup-steps ({c.warmup_steps}) must be less than --steps ({c.steps})"
        )
    try:
        options = BenchOptions(
            model=c.bench_model, steps=c.steps, image_size=c.image_size,
            warmup_steps=c.warmup_steps,
        )  # fmt: skip
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return launch_spec(
        config, 1, target="scalescope.bench.workload", is_module=True,
        args=[*options.workload_args(), *args], warmup_steps=c.warmup_steps,
        workload=c.bench_model, options=options.as_dict(),
    )  # fmt: skip


def scale_progress(point: ScalePoint) -> None:
    figures = f"{point.samples_per_s:,.1f} samples/s" if point.samples_per_s else point.error
    err.print(f"{point.ranks} ranks: {point.status}, {figures}")
