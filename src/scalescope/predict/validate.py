"""`project --validate STUDY_DIR`: fit on the smaller sizes of a scale study, predict the
held-out larger ones, and compare with what they measured.

The reference of a held-out size is the largest fitted size with the same threads per rank
(else the largest): its compute, data, other, waiting and gradient buckets; the α-β of its
own gradient transfers (or ``--comm``). The held-out run gives only what is known before
running it: its ranks per node, threads, cores and per-rank batch. Other processes' load
measured at the reference (``inputs.other_threads``) is taken to be the same. A rank's
compute against its threads and cores is fitted on all the fitted sizes (``cores.py``):
the serial part that more threads do not shorten.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from scalescope.events.study import ScalePoint, load_study
from scalescope.predict.cores import CoreScaling, study_core_scaling
from scalescope.predict.inputs import RunInputs, run_inputs
from scalescope.predict.model import StepTerms, Target
from scalescope.predict.project import choose_hop, predict_point


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    ranks: int
    reference_ranks: int
    other_threads: float
    """Other processes' runnable threads measured at the reference."""
    terms: StepTerms
    band_ms: float
    predicted_step_ms: float
    measured_step_ms: float
    predicted_samples_per_s: float
    measured_samples_per_s: float

    @property
    def error_pct(self) -> float:
        """(predicted − measured) / measured throughput, %."""
        return 100.0 * (self.predicted_samples_per_s / self.measured_samples_per_s - 1.0)


@dataclass(frozen=True, kw_only=True)
class Validation:
    study_dir: str
    fitted_ranks: tuple[int, ...]
    held_out: tuple[HeldOut, ...]
    hop_source: str
    core_scaling: CoreScaling
    """Compute per sample against threads and cores, fitted on the fitted sizes."""

    @property
    def max_abs_error_pct(self) -> float:
        return max(abs(h.error_pct) for h in self.held_out)


def _usable(study_dir: Path, points: list[ScalePoint]) -> list[tuple[ScalePoint, RunInputs]]:
    ok = sorted((p for p in points if p.status == "ok"), key=lambda p: p.ranks)
    return [(p, run_inputs(study_dir / p.run_dir)) for p in ok]


def _reference(fitted: list[RunInputs], held: RunInputs) -> RunInputs:
    same = [f for f in fitted if f.placement.threads_per_rank == held.placement.threads_per_rank]
    return max(same or fitted, key=lambda f: f.world_size)


def predict_held_out(
    fitted: list[RunInputs],
    held: RunInputs,
    comm: Path | None,
    algorithm: str,
    scaling: CoreScaling | None = None,
) -> HeldOut:
    """``scaling``: default, fitted on ``fitted``."""
    ref = _reference(fitted, held)
    scaling = scaling or study_core_scaling(fitted)
    with_comm = [f for f in fitted if f.transfer_fit is not None]
    hop_ref = ref if ref.transfer_fit is not None or not with_comm else with_comm[-1]
    hop = choose_hop(hop_ref, comm, None, held.nodes)
    target = Target(
        nodes=held.nodes,
        ranks_per_node=held.placement.ranks_per_node,
        per_rank_batch=held.per_rank_batch,
        placement=replace(held.placement, other_threads=ref.placement.other_threads),
    )
    terms, band = predict_point(ref, target, hop, algorithm, None, scaling)
    rate = target.ranks * target.per_rank_batch / (terms.step_ms / 1e3)
    return HeldOut(
        ranks=held.world_size,
        reference_ranks=ref.world_size,
        other_threads=ref.placement.other_threads,
        terms=terms,
        band_ms=band,
        predicted_step_ms=terms.step_ms,
        measured_step_ms=held.step_ms,
        predicted_samples_per_s=rate,
        measured_samples_per_s=held.samples_per_s,
    )


def validate_study(
    study_dir: Path, holdout: int = 1, comm: Path | None = None, algorithm: str = "ring"
) -> Validation:
    """Fit on all but the ``holdout`` largest completed sizes; predict those."""
    usable = _usable(study_dir, load_study(study_dir).points)
    if holdout < 1 or len(usable) < holdout + 1:
        raise ValueError(
            f"{study_dir}: {len(usable)} completed sizes; validating {holdout} held-out "
            "size(s) needs at least one more to fit on"
        )
    fitted = [inputs for _, inputs in usable[:-holdout]]
    if comm is None and not any(f.transfer_fit is not None for f in fitted):
        raise ValueError(
            f"{study_dir}: no fitted size has 2 or more ranks to measure transfers: "
            "give --comm COMM_JSON or fit on more sizes"
        )
    scaling = study_core_scaling(fitted)
    held = [predict_held_out(fitted, h, comm, algorithm, scaling) for _, h in usable[-holdout:]]
    return Validation(
        study_dir=str(study_dir),
        fitted_ranks=tuple(f.world_size for f in fitted),
        held_out=tuple(held),
        hop_source=str(comm) if comm is not None else "the fitted runs' gradient transfers",
        core_scaling=scaling,
    )
