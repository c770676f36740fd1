"""The first configurations to try, from the remedies of the baseline's diagnosis.

Each finding code maps to the knob changes its remedies propose (docs/diagnosis.md):
larger buckets for latency-bound communication, compression for bandwidth, workers and
pinned memory for a starving input pipeline, threads and binding for CPU placement,
channels_last (for a model with convolutions) and bf16 for compute. Only knobs of the
space take part, and a change needs the space's value in that direction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from scalescope.diagnose.findings import Diagnosis
from scalescope.diagnose.rules_compute import has_convolution
from scalescope.events.run import RankMeta
from scalescope.events.tags import GRADIENTS, REDUCE_GRADS, UNSHARD, tag_kind
from scalescope.tune.space import DDP_LAYOUT, FSDP2_LAYOUT, Config, Space, Value, misfits

MAX_SEEDS = 3

CHANGES: dict[str, tuple[tuple[str, str], ...]] = {
    "COMM_LATENCY": (("bucket_cap_mb", "max"), ("gradient_as_bucket_view", "true")),
    "COMM_BANDWIDTH": (("comm_hook", "bf16"), ("bucket_cap_mb", "max")),
    "INPUT_BOUND": (("workers", "max"), ("pin_memory", "true"), ("prefetch_factor", "max")),
    "COMPUTE": (("channels_last", "true"), ("bf16", "true")),
    "OVERSUBSCRIBED": (("threads_per_rank", "min"),),
    "IDLE_CORES": (("threads_per_rank", "max"),),
    "UNBOUND": (("bind_to", "domain"),),
    "NUMA_SPAN": (("map_by", "numa"), ("bind_to", "domain")),
    "STRAGGLER": (("bind_to", "core"),),
    "LOAD_IMBALANCE": (("bind_to", "core"),),
}
"""Finding code -> (knob, value) its remedies propose; ``min``/``max`` of the space's values."""


@dataclass(frozen=True)
class Seed:
    code: str
    """The finding code it comes from."""
    config: Config


def recorded_layout(tags: Iterable[str]) -> str | None:
    """The layout a recorded run's collective tags show: FSDP2 (its units' gathers and
    reductions), DDP (its gradient buckets), or None (neither, or both)."""
    kinds = {tag_kind(t) for t in tags}
    fsdp, ddp = bool(kinds & {UNSHARD, REDUCE_GRADS}), GRADIENTS in kinds
    if fsdp == ddp:
        return None
    return FSDP2_LAYOUT if fsdp else DDP_LAYOUT


def skipped_knobs(ranks: Mapping[int, RankMeta], layout: str | None = None) -> tuple[str, ...]:
    """Knobs no seed should change for this model and layout: channels_last when the
    recorded layers hold no convolution (unknown layers skip nothing), and every knob the
    layout cannot take (``space.misfits``)."""
    skip = ["channels_last"] if has_convolution(ranks) is False else []
    return (*skip, *(n for n in misfits(layout) if n not in skip))


def _pick(values: tuple[Value, ...], want: str) -> Value | None:
    if want == "max":
        return values[-1]
    if want == "min":
        return values[0]
    wanted = want == "true" if want in ("true", "false") else want
    return next((v for v in values if v == wanted and type(v) is type(wanted)), None)


def seeds(
    diagnosis: Diagnosis, space: Space, start: Config | None, skip: Collection[str] = ()
) -> list[Seed]:
    """Up to MAX_SEEDS configurations: ``start`` (or the first values) changed as each
    warning finding proposes, best finding first; knobs in ``skip`` (that do not fit the
    model: ``skipped_knobs``) are left as they are."""
    knobs = {k.name: k for k in space if k.name not in skip}
    base: Config = dict(start) if start else {k.name: k.values[0] for k in space}
    out: list[Seed] = []
    for finding in diagnosis.findings:
        config = dict(base)
        for name, want in CHANGES.get(finding.code, ()):
            if name in knobs:
                value = _pick(knobs[name].values, want)
                if value is not None:
                    config[name] = value
        if config != base and all(config != s.config for s in out):
            out.append(Seed(finding.code, config))
    return out[:MAX_SEEDS]
