"""Compute-bound (with achieved FLOP/s against the estimated peak) and memory size."""

from __future__ import annotations

from collections.abc import Mapping

from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_flops import Efficiency, efficiency, shortfall_ms
from scalescope.diagnose.rules_input import (
    LOCAL_HOST,
    DiagnosisInput,
    bench_option,
    mean_compute,
    mean_step,
    rank_times,
    share_pct,
)
from scalescope.events.run import RankMeta
from scalescope.events.tags import UNSHARD, tag_kind

BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16", "svebf16")
SMALL_BATCH = 32
"""A batch per rank below this leaves room for a larger one in the compute remedies."""
LAYER_NAMES = {
    "convolution": "convolutions",
    "attention": "attention",
    "recurrent": "recurrent layers",
    "linear": "linear layers",
}
"""The layer kinds (probe/model_layers.py) whose arithmetic the compute remedies speed up."""
MATMUL_KINDS = tuple(LAYER_NAMES)


def _efficiency_evidence(ctx: DiagnosisInput, eff: Efficiency) -> list[Evidence]:
    p = eff.peak
    out = [
        Evidence(
            "compute FLOP/s of estimated peak",
            round(100 * eff.fraction, 1),
            "%",
            100 * ctx.thresholds.flops_low_fraction,
            "<" if eff.fraction < ctx.thresholds.flops_low_fraction else ">=",
        ),
        Evidence("FLOP/s while computing", round(eff.compute_flops_per_s / 1e9, 1), "GFLOP/s"),
        Evidence(
            f"estimated fp32 peak ({p.cores} cores x {p.flops_per_cycle} FLOP/cycle "
            f"{p.isa} x {p.ghz:.2f} GHz)",
            round(p.flops_per_s / 1e9, 1),
            "GFLOP/s",
        ),
        Evidence(
            "model FLOPs per sample (forward + backward = 3 x forward)",
            round(eff.flops_per_sample / 1e9, 3),
            "GFLOP",
        ),
    ]
    if eff.achieved_flops_per_s is not None:
        out.insert(
            1,
            Evidence(
                "achieved FLOP/s over the run", round(eff.achieved_flops_per_s / 1e9, 1), "GFLOP/s"
            ),
        )
    return out


def model_layers(ranks: Mapping[int, RankMeta]) -> dict[str, float] | None:
    """The model's layer shares as the lowest rank that recorded them; None when none did
    (an older run, an ingested trace, no model found)."""
    for rank in sorted(ranks):
        if ranks[rank].layer_shares is not None:
            return ranks[rank].layer_shares
    return None


def has_convolution(ranks: Mapping[int, RankMeta]) -> bool | None:
    """Whether the model has convolutions; None when its layers are unknown."""
    shares = model_layers(ranks)
    return None if shares is None else shares.get("convolution", 0.0) > 0


def _pct(value: float) -> str:
    return f"{value:.0f} %" if value >= 1 else f"{value:.1g} %"


def _applies_to(text: str, shares: dict[str, float] | None, kinds: tuple[str, ...]) -> str:
    """``text`` with the layers it applies to and their share of the parameters."""
    if shares is None:
        return text
    parts = [f"{LAYER_NAMES[k]} {_pct(shares[k])}" for k in kinds if shares.get(k, 0) > 0]
    if not parts:
        return text
    return f"{text} (applies to {', '.join(parts)} of the parameters)"


def _compute_remedies(ctx: DiagnosisInput) -> tuple[str, ...]:
    """Remedies that fit the model: convolution advice only for a model with convolutions,
    attention advice for one with attention; today's list when its layers are unknown."""
    shares = model_layers(ctx.ranks)
    conv = has_convolution(ctx.ranks) is not False
    out = []
    if shares is not None and shares.get("attention", 0) > 0:
        out.append(_applies_to(remedy("sdpa"), shares, ("attention",)))
    if conv and not bench_option(ctx, "channels_last"):
        out.append(_applies_to(remedy("channels_last"), shares, ("convolution",)))
    flags = [f for f in BF16_FLAGS if f in (ctx.meta.hardware.get("isa_flags") or ())]
    if flags and not bench_option(ctx, "bf16"):
        out.append(_applies_to(remedy("bf16", isa=", ".join(flags)), shares, MATMUL_KINDS))
    batch = bench_option(ctx, "batch_size")
    if isinstance(batch, int) and batch < SMALL_BATCH:
        out.append(remedy("batch", n=2 * batch))
    compile_ = remedy("compile" if conv else "compile_matmul")
    out.extend((_applies_to(compile_, shares, MATMUL_KINDS), remedy("build")))
    return tuple(out)


class ComputeRule:
    """Compute-bound: forward + backward + optimizer take ``compute_share_pct`` or more.

    ``info`` when the FLOP/s reach ``flops_low_fraction`` of the estimated peak (or cannot
    be judged): the state a healthy data-parallel run is in. A ``warning`` below it, with
    the saving estimated as the compute time above ``flops_expected_fraction`` of peak."""

    name = "compute"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        times = rank_times(ctx.analysis)
        if not times:
            return (f"{self.name}: no step timing was recorded",)
        if mean_compute(times) is None:
            return (f"{self.name}: the forward and backward phases were not recorded",)
        eff = efficiency(ctx)
        return (f"achieved FLOP/s: {eff}",) if isinstance(eff, str) else ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        times = rank_times(ctx.analysis)
        compute_ms, step_ms = mean_compute(times), mean_step(times)
        if compute_ms is None or not step_ms:
            return None
        share = share_pct(compute_ms, step_ms)
        t = ctx.thresholds
        if share < t.compute_share_pct:
            return None
        evidence = [
            Evidence(
                "compute (forward + backward + optimizer)",
                round(share, 1),
                "% of step time",
                t.compute_share_pct,
                ">=",
            )
        ]
        eff = efficiency(ctx)
        text, level, saved, basis = "", "info", None, ""
        if isinstance(eff, Efficiency):
            evidence.extend(_efficiency_evidence(ctx, eff))
            text = f" at {100 * eff.fraction:.0f}% of the estimated peak FLOP/s"
            saved = shortfall_ms(ctx, eff)
            level = "warning" if eff.fraction < t.flops_low_fraction else "info"
            basis = (
                f"estimate: compute time above the time of the same FLOPs at "
                f"{100 * t.flops_expected_fraction:.0f}% of the estimated fp32 peak"
            )
        return Finding(
            code="COMPUTE",
            bottleneck=bottleneck("COMPUTE"),
            summary=summary("COMPUTE", share=share, efficiency=text),
            share_pct=share,
            saved_ms_per_step=saved,
            evidence=tuple(evidence),
            remedies=_compute_remedies(ctx),
            level=level,
            basis=basis,
        )


def _host_of(ctx: DiagnosisInput, rank: int) -> str:
    meta = ctx.ranks.get(rank)
    return (meta.hostname if meta else "") or LOCAL_HOST


def _peaks(ctx: DiagnosisInput) -> tuple[dict[str, int], dict[int, int]]:
    """Peak resident memory summed per host, and CUDA peak per rank (bytes)."""
    per_host: dict[str, int] = {}
    per_gpu: dict[int, int] = {}
    for rs in ctx.analysis.steps.ranks if ctx.analysis.steps else ():
        for peak in rs.memory:
            if peak.name == "rss_peak":
                host = _host_of(ctx, rs.rank)
                per_host[host] = per_host.get(host, 0) + peak.peak_bytes
            elif peak.name == "cuda_max_allocated":
                per_gpu[rs.rank] = peak.peak_bytes
    return per_host, per_gpu


def _gpu_capacity(ctx: DiagnosisInput, rank: int) -> int | None:
    gpus = ctx.meta.hardware.get("gpus") or []
    meta = ctx.ranks.get(rank)
    index = meta.local_rank if meta else rank
    return gpus[index].get("memory_bytes") if index < len(gpus) else None


def _memory_use(ctx: DiagnosisInput) -> list[tuple[str, int, int]]:
    """(where, peak bytes, capacity bytes) for every host and GPU with both known."""
    per_host, per_gpu = _peaks(ctx)
    out = []
    capacity = ctx.meta.hardware.get("memory_bytes")
    if isinstance(capacity, int) and capacity > 0:
        out += [(f"host {h}", b, capacity) for h, b in per_host.items()]
    for rank, used in per_gpu.items():
        gpu = _gpu_capacity(ctx, rank)
        if gpu:
            out.append((f"rank {rank}'s GPU", used, gpu))
    return out


def _memory_remedies(ctx: DiagnosisInput) -> tuple[str, ...]:
    """Sharding first for a data-parallel job that does not shard yet; offload for one that
    does (FSDP's unit tags)."""
    usual = tuple(remedy(k) for k in ("smaller_batch", "checkpoint", "bf16_memory", "fewer_ranks"))
    coll = ctx.analysis.collectives
    if coll is not None and any(tag_kind(p.tag) == UNSHARD for p in coll.per_step):
        return (*usual, remedy("fsdp_offload"))
    if ctx.analysis.world_size > 1:
        return (remedy("fully_shard"), *usual)
    return usual


class MemoryRule:
    """Peak memory at ``memory_fraction`` or more of a host's RAM or a GPU's memory."""

    name = "memory size"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        per_host, per_gpu = _peaks(ctx)
        if not per_host and not per_gpu:
            return (f"{self.name}: no memory peak was recorded",)
        if not _memory_use(ctx):
            return (f"{self.name}: the memory capacity is not in the hardware facts",)
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        limit = ctx.thresholds.memory_fraction
        over = [(w, b, c) for w, b, c in _memory_use(ctx) if b >= limit * c]
        if not over:
            return None
        where, used, capacity = max(over, key=lambda u: u[1] / u[2])
        pct = 100.0 * used / capacity
        return Finding(
            code="MEMORY_SIZE",
            bottleneck=bottleneck("MEMORY_SIZE"),
            summary=summary(
                "MEMORY_SIZE", where=where, pct=pct, capacity=f"{capacity / 2**30:.1f} GiB"
            ),
            share_pct=None,
            saved_ms_per_step=None,
            evidence=(
                Evidence(
                    f"peak memory of {where}", round(pct, 1), "% of capacity", 100 * limit, ">="
                ),
                Evidence("peak", round(used / 2**30, 2), "GiB"),
            ),
            remedies=_memory_remedies(ctx),
        )
