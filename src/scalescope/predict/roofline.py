"""Compute time and memory of a rank on other hardware, from the run measured here.

Roofline: one sample takes ``max(F / P, B / W) / η`` on a rank with peak P FLOP/s and
memory bandwidth W, for the model's F FLOPs and B bytes per sample at the rank's batch
(``costs.py``). η is the fraction of the roofline the run reached here: its measured
compute time per sample against ``F / P_here`` (P_here: on a CPU, the cores it ran on × the
per-core peak estimated from the CPU's ISA and clock, ``diagnose.rules_flops``; on a GPU,
the catalogue's peak of the device's model). The same η is assumed on the target: the
framework's kernels are taken to be as good there as here. Another model of the same input
(``project --model``) is projected with the η this run reached: calibrated on one model,
its FLOPs and bytes give the other's compute.

Memory: the run's peak (RSS or CUDA max allocated) at its batch, plus the activations of
each extra sample (the forward outputs autograd keeps); a batch whose need exceeds the
rank's share of the target's memory is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.analyze.peak import clock_ghz, isa_rate
from scalescope.predict.catalogue import Hardware, match_gpu
from scalescope.predict.costs import ModelCost
from scalescope.predict.inputs import RunInputs

COMPUTE_BOUND, MEMORY_BOUND = "compute", "memory bandwidth"


@dataclass(frozen=True, kw_only=True)
class RankShare:
    """What one rank of a target node gets."""

    peak_flops: float
    precision: str
    memory_bw_bytes_per_s: float
    memory_bytes: float
    cores: float


@dataclass(frozen=True, kw_only=True)
class RooflineCompute:
    per_sample_ms: float
    bound: str
    """compute or memory bandwidth: which roof applies on the target."""
    efficiency: float
    """η: fraction of the roofline reached here."""
    here_peak_flops: float
    """Peak of what one rank used here: its GPU, or its cores."""
    share: RankShare


def rank_share(hw: Hardware, ranks_per_node: int, precision: str) -> RankShare:
    """A rank's part of a node: GPUs one device each, CPUs an equal share of the cores."""
    if hw.kind == "gpu" and ranks_per_node > hw.devices_per_node:
        raise ValueError(
            f"{hw.key} has {hw.devices_per_node} GPUs per node: "
            f"{ranks_per_node} ranks per node would share them"
        )
    share = hw.devices_per_node / ranks_per_node
    if hw.kind == "gpu":
        share = min(share, 1.0)
    peak, used = hw.peak(precision)
    return RankShare(
        peak_flops=peak * share,
        precision=used,
        memory_bw_bytes_per_s=hw.memory_bw_bytes_per_s * share,
        memory_bytes=hw.memory_bytes * share,
        cores=hw.cores * share,
    )


def here_peak_per_core(ref: RunInputs) -> float:
    """fp32 FLOP/s of one core of the machine the run was recorded on."""
    rate, ghz = isa_rate(ref.hardware), clock_ghz(ref.hardware)
    if rate is None or ghz is None:
        raise ValueError(
            "the run's hardware facts lack the CPU's vector ISA or clock: "
            "its FLOP/s cannot be carried to other hardware"
        )
    return rate[0] * ghz * 1e9


def run_gpu(ref: RunInputs) -> Hardware | None:
    """The catalogue entry of the GPU the run used, None for a CPU run; a GPU that is not
    in the catalogue is a ValueError (its peak is unknown)."""
    gpus = ref.hardware.get("gpus") or []
    if not gpus:
        return None
    name = str(gpus[0].get("name", "")) if isinstance(gpus[0], dict) else str(gpus[0])
    hw = match_gpu(name)
    if hw is None:
        raise ValueError(f"the run's GPU {name!r} is not in the catalogue: its peak is unknown")
    return hw


def here_peak(ref: RunInputs) -> float:
    """Peak FLOP/s of what one rank computed on here: its GPU, else its cores."""
    gpu = run_gpu(ref)
    if gpu is not None:
        return gpu.peak(ref.precision)[0]
    return here_peak_per_core(ref) * ref.placement.cores_per_rank


def target_compute(
    ref: RunInputs,
    hw: Hardware,
    ranks_per_node: int,
    per_rank_batch: float,
    efficiency: float | None = None,
    model: ModelCost | None = None,
) -> RooflineCompute:
    """Compute time per sample of one rank on ``hw`` (module docstring); ``efficiency``
    replaces the η measured here (e.g. one known from the target); ``model``: another
    model's cost, projected with this run's η (default: the run's own model)."""
    if ref.cost is None:
        raise ValueError(f"--hardware needs the model's FLOPs: {ref.no_cost}")
    cost = model or ref.cost
    peak = here_peak(ref)
    measured_s = ref.compute_ms / 1e3 / ref.per_rank_batch
    if efficiency is None:
        efficiency = ref.cost.flops_per_sample / peak / measured_s
    share = rank_share(hw, ranks_per_node, ref.precision)
    flops_s = cost.flops_per_sample / share.peak_flops
    bytes_s = cost.bytes_per_sample(per_rank_batch) / share.memory_bw_bytes_per_s
    bound = COMPUTE_BOUND if flops_s >= bytes_s else MEMORY_BOUND
    return RooflineCompute(
        per_sample_ms=1e3 * max(flops_s, bytes_s) / efficiency,
        bound=bound,
        efficiency=efficiency,
        here_peak_flops=peak,
        share=share,
    )


def memory_need_bytes(ref: RunInputs, per_rank_batch: float) -> float | None:
    """Peak memory of a rank at ``per_rank_batch``; None when the run recorded no peak."""
    if ref.peak_memory_bytes is None:
        return None
    per_sample = ref.cost.activation_bytes_per_sample if ref.cost is not None else 0.0
    return ref.peak_memory_bytes + (per_rank_batch - ref.per_rank_batch) * per_sample


def check_memory(ref: RunInputs, per_rank_batch: float, share: RankShare, hw: Hardware) -> None:
    """Refuse a batch that does not fit the rank's share of the target's memory."""
    need = memory_need_bytes(ref, per_rank_batch)
    if need is not None and need > share.memory_bytes:
        raise ValueError(
            f"a per-rank batch of {per_rank_batch:g} needs about {need / 1e9:.1f} GB per rank; "
            f"{hw.key} gives a rank {share.memory_bytes / 1e9:.1f} GB: use a smaller batch "
            "or more ranks"
        )
