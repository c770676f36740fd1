"""`scalescope project`: step time, throughput and epoch time of a measured run projected
to other node counts, batches and hardware (``model.py`` for the equations)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from scalescope.analyze.comm.comm_bench import load_fits
from scalescope.bench.extras import installed
from scalescope.bench.flops import TORCH_NEEDED
from scalescope.events.files import RUN_FILE, SCALE_STUDY_FILE
from scalescope.events.study import load_study
from scalescope.predict.allreduce import ALGORITHMS, HopCost, hop_from_fit, pick_fit
from scalescope.predict.catalogue import Hardware, load_hardware
from scalescope.predict.cores import CoreScaling
from scalescope.predict.costs import ModelCost, model_cost
from scalescope.predict.inputs import Placement, RunInputs, run_inputs
from scalescope.predict.model import StepTerms, Target, step_terms, transfer_slowdown
from scalescope.predict.roofline import RooflineCompute, check_memory, run_gpu, target_compute

IMAGENET_TRAIN = 1_281_167


@dataclass(frozen=True, kw_only=True)
class ProjectOptions:
    nodes: tuple[int, ...]
    ranks_per_node: int | None = None
    hardware: str | None = None
    comm: Path | None = None
    global_batch: int | None = None
    """Strong scaling: the same global batch at every size."""
    per_rank_batch: int | None = None
    """Weak scaling with this per-rank batch (default: the run's)."""
    algorithm: str = "ring"
    epoch_samples: int = IMAGENET_TRAIN
    efficiency: float | None = None
    """η on the target (fraction of its roofline) instead of the one measured here."""
    model: str | None = None
    """Another bench model of the same input, projected with the η this run reached."""

    def __post_init__(self) -> None:
        if not self.nodes or any(n < 1 for n in self.nodes):
            raise ValueError(f"--nodes needs positive node counts, got {list(self.nodes)}")
        if self.global_batch is not None and self.per_rank_batch is not None:
            raise ValueError("give --global-batch (strong scaling) or --per-rank-batch, not both")
        for name in ("ranks_per_node", "global_batch", "per_rank_batch", "epoch_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if self.efficiency is not None and not 0 < self.efficiency <= 1:
            raise ValueError(f"--efficiency must be in (0, 1], got {self.efficiency}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"--algorithm must be ring or tree, got {self.algorithm!r}")


@dataclass(frozen=True, kw_only=True)
class ProjectedPoint:
    nodes: int
    ranks: int
    per_rank_batch: float
    global_batch: float
    terms: StepTerms
    band_ms: float
    """One standard deviation of the step time from the inputs' spread (compute's
    step-to-step variation, the α-β fit's relative error)."""
    samples_per_s: float
    samples_per_s_range: tuple[float, float | None]
    """Throughput at step + band and at step − band (None: the band reaches a zero step)."""
    epoch_s: float
    """Whole steps: ceil(epoch samples / global batch) × step (the last batch is padded,
    as DistributedSampler does)."""
    epoch_s_range: tuple[float, float]
    """Epoch time at step − band (at least 0) and at step + band."""
    speedup: float
    efficiency: float
    dominant: str
    bound: str | None
    """Roofline bound on other hardware; None on the measured machine."""


@dataclass(frozen=True, kw_only=True)
class Projection:
    run_dir: str
    mode: str
    """weak or strong."""
    hardware: str
    """Catalogue key or file, or ``measured`` (the run's own machine)."""
    ranks_per_node: int
    algorithm: str
    hop: HopCost
    epoch_samples: int
    reference: RunInputs
    roofline: RooflineCompute | None
    points: tuple[ProjectedPoint, ...]
    notes: tuple[str, ...]


def choose_hop(ref: RunInputs, comm: Path | None, hw: Hardware | None, nodes: int) -> HopCost:
    """α-β of a hop: ``comm`` fits, else the catalogue's links, else the run's own transfers."""
    if comm is not None:
        return hop_from_fit(pick_fit(load_fits(comm)))
    if hw is not None:
        link = hw.interconnect if nodes > 1 else hw.intra_node
        return HopCost(
            alpha_s=link.alpha_s, beta_s_per_byte=link.beta_s_per_byte, source=f"{link.name}"
        )
    if ref.transfer_fit is None:
        raise ValueError(
            f"{ref.run_dir}: a {ref.world_size}-rank run measured no gradient transfers to "
            "fit: give --comm COMM_JSON (scalescope comm --json) or --hardware"
        )
    hop = hop_from_fit(ref.transfer_fit)
    return replace(hop, source=f"the run's own gradient transfers ({ref.world_size} ranks)")


def scaled_hop(hop: HopCost, factor: float) -> HopCost:
    """Transfers of ranks that share cores slow with them (gloo's progress runs on CPU)."""
    if factor == 1.0:
        return hop
    return replace(hop, alpha_s=hop.alpha_s * factor, beta_s_per_byte=hop.beta_s_per_byte * factor)


def band_ms(terms: StepTerms, ref: RunInputs, hop: HopCost) -> float:
    return math.hypot(ref.compute_cv * terms.compute_ms, hop.rel_err * terms.exposed_ms)


def target_of(
    ref: RunInputs, opts: ProjectOptions, nodes: int, per_node: int, hw: Hardware | None
) -> Target:
    ranks = nodes * per_node
    if opts.global_batch is not None:
        if opts.global_batch < ranks:
            raise ValueError(f"--global-batch {opts.global_batch} is smaller than {ranks} ranks")
        batch = opts.global_batch / ranks
    else:
        batch = float(opts.per_rank_batch or ref.per_rank_batch)
    if hw is None:
        placement = replace(ref.placement, ranks_per_node=per_node)
    else:
        cores = hw.cores * hw.devices_per_node
        placement = Placement(
            ranks_per_node=per_node, threads_per_rank=max(cores // per_node, 1), node_cores=cores
        )
    return Target(nodes=nodes, ranks_per_node=per_node, per_rank_batch=batch, placement=placement)


def predict_point(
    ref: RunInputs,
    target: Target,
    hop: HopCost,
    algorithm: str,
    roof: RooflineCompute | None,
    scaling: CoreScaling | None = None,
) -> tuple[StepTerms, float]:
    """The step terms at ``target`` and their band (ms); ``scaling``: compute against
    threads and cores fitted on a study (default: inversely proportional to the cores)."""
    if roof is None:
        shared = scaled_hop(hop, transfer_slowdown(ref.placement, target.placement))
        terms = step_terms(ref, target, shared, algorithm, ref_hop=hop, scaling=scaling)
        hop = shared
    else:
        terms = step_terms(ref, target, hop, algorithm, roof.per_sample_ms)
    return terms, band_ms(terms, ref, hop)


def _notes(ref: RunInputs, opts: ProjectOptions, hw: Hardware | None) -> list[str]:
    notes = []
    if ref.world_size == 1:
        notes.append("the run has one rank: no waiting for late ranks was measured (taken as 0)")
    other = ref.placement.other_threads
    if hw is None and other > 0:
        notes.append(
            f"other processes kept about {other:.1f} threads runnable on the run's node "
            f"(a rank got {ref.placement.cores_per_rank:.2f} cores): projected with the same load"
        )
    if hw is None and opts.comm is None and max(opts.nodes) > 1:
        notes.append(
            "links between nodes are priced as the run's own (one node) transfers: "
            "give --comm from a multi-node `scalescope comm` for real ones"
        )
    if hw is not None and ref.peak_memory_bytes is None:
        notes.append(
            f"the run recorded no peak memory: the batch was not checked against {hw.key}'s"
        )
    if hw is not None and opts.efficiency is not None:
        notes.append(f"η = {opts.efficiency:g} given (--efficiency), not measured here")
    if opts.model is not None:
        notes.append(
            f"{opts.model} projected with the η this run's {ref.cost.model if ref.cost else '?'} "
            "reached (its FLOPs and bytes per sample), and the run's data, copies and other "
            "time per sample; its memory was not checked"
        )
    if hw is not None and opts.comm is not None:
        notes.append("the α-β of --comm prices every link of the target (not its catalogue's)")
    return notes


def other_model(ref: RunInputs, name: str | None) -> ModelCost | None:
    """The cost of bench model ``name`` at the run's input size (``--model``)."""
    if name is None:
        return None
    if ref.cost is None:
        raise ValueError(f"--model needs the run's own model's FLOPs: {ref.no_cost}")
    cost = model_cost(name, {"model": name, "image_size": ref.cost.image_size})
    if cost is None and not installed("torch"):
        raise ValueError(f"--model {name!r}: {TORCH_NEEDED}")
    if cost is None:
        raise ValueError(
            f"--model {name!r}: not a torchvision classifier whose FLOPs can be counted"
        )
    return cost


def _point(
    ref: RunInputs,
    opts: ProjectOptions,
    nodes: int,
    per_node: int,
    hw: Hardware | None,
    model: ModelCost | None = None,
) -> tuple[ProjectedPoint, HopCost, RooflineCompute | None]:
    """``model``: the other model of ``--model`` (``other_model``), else the run's."""
    target = target_of(ref, opts, nodes, per_node, hw)
    hop = choose_hop(ref, opts.comm, hw, nodes)
    roof = None
    if hw is not None:
        roof = target_compute(ref, hw, per_node, target.per_rank_batch, opts.efficiency, model)
        if model is None:
            check_memory(ref, target.per_rank_batch, roof.share, hw)
    terms, band = predict_point(ref, target, hop, opts.algorithm, roof)
    global_batch = target.ranks * target.per_rank_batch
    low_ms, high_ms = terms.step_ms - band, terms.step_ms + band
    steps = math.ceil(opts.epoch_samples / global_batch)
    point = ProjectedPoint(
        nodes=nodes,
        ranks=target.ranks,
        per_rank_batch=target.per_rank_batch,
        global_batch=global_batch,
        terms=terms,
        band_ms=band,
        samples_per_s=global_batch / (terms.step_ms / 1e3),
        samples_per_s_range=(
            global_batch / (high_ms / 1e3),
            global_batch / (low_ms / 1e3) if low_ms > 0 else None,
        ),
        epoch_s=steps * terms.step_ms / 1e3,
        epoch_s_range=(steps * max(low_ms, 0.0) / 1e3, steps * high_ms / 1e3),
        speedup=1.0,
        efficiency=1.0,
        dominant=terms.dominant,
        bound=roof.bound if roof is not None else None,
    )
    return point, hop, roof


def with_speedup(points: list[ProjectedPoint]) -> tuple[ProjectedPoint, ...]:
    """Speedup and efficiency against the first size (throughput ratio per rank ratio)."""
    first = points[0]
    return tuple(
        replace(
            p,
            speedup=p.samples_per_s / first.samples_per_s,
            efficiency=p.samples_per_s / first.samples_per_s * first.ranks / p.ranks,
        )
        for p in points
    )


def reference_run(path: Path) -> tuple[Path, str | None]:
    """The run to project from: PATH, or the largest completed size of the `scale` study in
    PATH (the most ranks measured, so the least extrapolation), with a note saying so."""
    if (path / RUN_FILE).is_file() or not (path / SCALE_STUDY_FILE).is_file():
        return path, None
    done = [p for p in load_study(path).points if p.status == "ok" and p.run_dir]
    if not done:
        raise ValueError(f"{path}: the scale study has no completed size to project from")
    largest = max(done, key=lambda p: p.ranks)
    note = f"projected from the study's largest completed size: {largest.ranks} ranks"
    return path / largest.run_dir, f"{note} ({largest.run_dir})"


def project_run(path: Path, opts: ProjectOptions) -> Projection:
    """Project a recorded run (or a scale study's largest size); bad inputs are ValueErrors
    with a one-line reason."""
    run_dir, note = reference_run(path)
    projection = project_inputs(run_inputs(run_dir), opts)
    return replace(projection, notes=(note, *projection.notes)) if note else projection


def project_inputs(ref: RunInputs, opts: ProjectOptions) -> Projection:
    """Project measured inputs (pure)."""
    hw = load_hardware(opts.hardware) if opts.hardware else None
    if hw is None and opts.model is not None:
        hw = run_gpu(ref)
        if hw is None:
            raise ValueError("--model on a CPU run needs --hardware (the CPU's peak per rank)")
    if hw is None and opts.efficiency is not None:
        raise ValueError("--efficiency sets η on other hardware: give --hardware too")
    own = hw is None or not opts.hardware  # the run's machine (its GPU for --model)
    default = ref.placement.ranks_per_node if own else hw.default_ranks_per_node
    per_node = opts.ranks_per_node or default
    model = other_model(ref, opts.model)  # counts its FLOPs: once, not per node count
    results = [_point(ref, opts, n, per_node, hw, model) for n in sorted(set(opts.nodes))]
    hops = [hop for _, hop, _ in results]
    return Projection(
        run_dir=ref.run_dir,
        mode="strong" if opts.global_batch is not None else "weak",
        hardware=hw.key if hw is not None else "measured",
        ranks_per_node=per_node,
        algorithm=opts.algorithm,
        hop=hops[-1],
        epoch_samples=opts.epoch_samples,
        reference=ref,
        roofline=results[-1][2],
        points=with_speedup([p for p, _, _ in results]),
        notes=tuple(_notes(ref, opts, hw)),
    )
