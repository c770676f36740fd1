"""What the diagnosis says: findings with their evidence, and the words for them.

``Evidence``, ``Finding`` and ``Diagnosis`` are frozen, JSON-able results (msgspec encodes
them; docs/report-schema.md, "findings"). The rest of this module is the only prose of the
diagnosis: bottleneck names, summary templates and remedy templates, filled in by the rules
with the numbers they measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.remedies import REMEDIES
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds

LEVELS = ("warning", "info")
NO_CLEAR_BOTTLENECK = "no clear bottleneck"


@dataclass(frozen=True)
class Evidence:
    """One measured value, with the threshold it was compared with (if any)."""

    name: str
    value: float | str
    unit: str = ""
    """Appended to value and threshold: ``%`` of step time, ``ms/step``, ``GB/s``, ..."""
    threshold: float | None = None
    comparison: str = ""
    """How value relates to threshold for the finding to hold: ``>=``, ``<``, ... or ``""``."""


@dataclass(frozen=True)
class Finding:
    """One bottleneck: what it costs, the numbers that show it, what to change."""

    code: str
    bottleneck: str
    summary: str
    share_pct: float | None
    """Share of step time it costs; None when it cannot be put in time (memory, build)."""
    saved_ms_per_step: float | None
    """Estimated time per step the remedies would save; None when not estimated."""
    evidence: tuple[Evidence, ...]
    remedies: tuple[str, ...]
    rank: int | None = None
    """The rank it concerns (straggler, NUMA span), None for the whole job."""
    level: str = "warning"
    """``warning``: a threshold crossed, worth changing. ``info``: the state a healthy run
    is in (compute-bound) with the next levers; never a false alarm."""
    basis: str = ""
    """How share and saving were estimated (``estimate: ...``), when not measured directly."""
    dim: str = ""
    """The mesh dimension whose collectives it is about (``dp``, ``tp``, ``pp``, ``stride 2``,
    ...; diagnose/dimensions.py); "" in a data-parallel job or when it is not about them."""
    since_step: int | None = None
    """The step its cause began at, where it began mid-run: the saving is per step since."""

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]
    """Warnings first, then information; each group by estimated saving, largest first."""
    not_judged: tuple[str, ...]
    """What could not be judged, and why (inputs never measured)."""
    verdict: Verdict
    """The run's one verdict (diagnose/verdict.py): what every surface shows."""
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    """The thresholds the rules compared with (defaults, ``--threshold``, ``--baseline``)."""


BOTTLENECKS: dict[str, str] = {
    "INPUT_BOUND": "input pipeline",
    "PAGEABLE_COPY": "input pipeline (copies to the device)",
    "COMM_LATENCY": "communication latency",
    "COMM_BANDWIDTH": "communication bandwidth",
    "STRAGGLER": "straggler",
    "NODE_STRAGGLER": "straggler node",
    "LOAD_IMBALANCE": "load imbalance",
    "COMPUTE": "compute",
    "MEMORY_SIZE": "memory size",
    "OVERSUBSCRIBED": "CPU placement",
    "UNBOUND": "CPU placement",
    "IDLE_CORES": "CPU placement",
    "NUMA_SPAN": "CPU placement",
    "HANG": "hang",
    "PAUSE": "pause (checkpoint or evaluation)",
    "TIMELINE_INCONSISTENT": "inconsistent timelines",
    "RANK_ONLY_EVAL": "work only some ranks do (evaluation)",
    "RANK_ONLY_CHECKPOINT": "work only some ranks do (checkpoint)",
    "INDEPENDENT_REPLICAS": "no data parallelism",
    "FSDP_EXPOSED_GATHER": "communication (FSDP all-gather)",
    "FSDP_SMALL_UNITS": "communication latency (FSDP units too small)",
    "ZERO3_PARAM_GATHER": "communication (ZeRO 3 parameter all-gather)",
    "ZERO_EXCHANGE": "communication (ZeRO gradient and parameter exchange)",
    "SLOW_LINK": "slow link",
    "TP_COMM_EXPOSED": "communication (tensor parallel)",
    "TP_COMM": "communication (tensor parallel)",
    "TP_ACROSS_NODES": "placement (tensor parallel across nodes)",
    "PIPELINE_BUBBLE": "pipeline bubble",
    "STAGE_IMBALANCE": "pipeline stage imbalance",
}
"""Bottleneck of each finding code; ``BUILD_*`` codes are ``build``."""

SUMMARIES: dict[str, str] = {
    "INPUT_BOUND": "ranks wait {share:.0f}% of each step for the DataLoader",
    "TP_COMM_EXPOSED": "tensor-parallel collectives take {share:.0f}% of the step ({ms:.1f} ms) "
    "inside every layer, where the next op waits for them",
    "TP_COMM": "tensor-parallel collectives take {share:.0f}% of the step ({ms:.1f} ms); {why}",
    "TP_ACROSS_NODES": "{n} of {total} tensor-parallel groups span hosts (ranks {ranks} on "
    "{hosts}): every layer's collectives cross the network",
    "PAGEABLE_COPY": "batches are copied to the device from pageable memory: {ms:.1f} ms per "
    "step ({share:.0f}% of the step) for {size}, at {rate}",
    "COMM_LATENCY": "exposed communication takes {share:.0f}% of the step, mostly in small "
    "messages ({calls:.0f} collectives per step)",
    "COMM_BANDWIDTH": "exposed communication takes {share:.0f}% of the step moving "
    "{mbytes:.1f} MB per step",
    "PIPELINE_BUBBLE": "{stage} idles {share:.0f}% of each step in the pipeline's "
    "bubble ({schedule}, {stages}, {m} microbatches: theory {theory:.0f}%)",
    "PIPELINE_BUBBLE_BOUND": "{bound} bounds the pipeline: the others idle up to {share:.0f}% "
    "of each step waiting for it ({schedule}, {stages}, {m} microbatches: theory {theory:.0f}%)",
    "STAGE_IMBALANCE": "the pipeline's stages are imbalanced: stage {stage} computes {ms:.1f} "
    "ms per microbatch, stage {light} {light_ms:.1f} ms; stage {stage} bounds the step",
    "STRAGGLER": "rank {rank} is late{where}: it is busy {share:.0f}% of a step longer than "
    "the others, who wait for it",
    "STRAGGLER_OUTSIDE": "time outside the recorded phases of rank {rank}: {ms:.0f} ms per "
    "step{between}; the others wait for it ({share:.0f}% of a step)",
    "NODE_STRAGGLER": "node {host} is late: its {n} ranks are busy {share:.0f}% of a step "
    "longer than the other nodes' ranks, who wait for them",
    "LOAD_IMBALANCE": "busy time per step differs across ranks by {imbalance:.0f}%: the "
    "fastest wait for the slowest",
    "COMPUTE": "compute takes {share:.0f}% of the step{efficiency}",
    "MEMORY_SIZE": "peak memory of {where} is {pct:.0f}% of its {capacity}",
    "OVERSUBSCRIBED": "{threads} compute threads on {cores} physical cores of {host}: threads "
    "of the ranks share cores",
    "OVERSUBSCRIBED_WAIT": "{threads} compute threads on {cores} physical cores of {host}: "
    "the ranks wait {share:.0f}% of each step for a cpu, and in collectives for peers the "
    "OS took it from",
    "UNBOUND": "{ranks} ranks on {host} are not bound to cores: the OS moves their threads "
    "and their memory",
    "IDLE_CORES": "{threads} compute threads on {cores} physical cores of {host}: most cores idle",
    "NUMA_SPAN": "rank {rank}'s cpus span NUMA nodes {nodes}: half its memory accesses are remote",
    "HANG": "the run stopped progressing: {verdict}",
    "PAUSE": "{who} paused {count}{every}, {longest:.1f} s at the longest, while the "
    "others waited in the next collective: a checkpoint or an evaluation, not a hang",
    "TIMELINE_INCONSISTENT": "the ranks' timelines do not fit together: rank {rank} waits "
    "{wait:,.0f} ms per step in collectives in {step:,.0f} ms steps ({n} rank(s) so), which "
    "one job cannot do; no share of waiting is given",
    "RANK_ONLY_EVAL": "{who} evaluates the model {when}: {ms:.0f} ms each time, while the "
    "others wait {wait:.0f} ms in their next collective ({per_step:.1f} ms per step)",
    "RANK_ONLY_CHECKPOINT": "{who} saves a checkpoint {when}: {ms:.0f} ms each time{size}, "
    "while the others wait {wait:.0f} ms in their next collective ({per_step:.1f} ms per step)",
    "STRAGGLER_BURSTS": "rank {rank} is late only {when}: {ms:.0f} ms each time, while at "
    "its other steps it is as fast as the others (median {median:+.1f} ms); the others wait "
    "for it ({share:.0f}% of a step)",
    "INDEPENDENT_REPLICAS": "the ranks never synchronise gradients: they train independent "
    "replicas ({ranks} ranks, {steps} optimizer steps each, {nbytes} of collectives per step "
    "for {params} of parameters)",
    "FSDP_EXPOSED_GATHER": "FSDP's parameter all-gathers take {share:.0f}% of the step "
    "({ms:.1f} ms) and compute does not hide them",
    "FSDP_SMALL_UNITS": "{units} FSDP units of {size} on average: {calls:.0f} all-gathers and "
    "reduce-scatters per step, each too small to use the network ({share:.0f}% of the step)",
    "ZERO3_PARAM_GATHER": "ZeRO 3's parameter all-gathers take {share:.0f}% of the step "
    "({ms:.1f} ms per step, {size} gathered) and compute does not hide them",
    "ZERO_EXCHANGE": "ZeRO {stage}'s gradient reductions and parameter all-gathers take "
    "{share:.0f}% of the step ({ms:.1f} ms per step, {size} moved) and compute does not hide "
    "them",
    "UNEXPLAINED": "{name} is {value:.0f}{unit} (the {section} section), and no rule "
    "accounts for it",
    "SLOW_LINK": "the link {where} is slow: its {n} group(s) take {ms:.2f} ms per {op} of "
    "{size} once all their ranks are there, {ratio:.1f}x the median of the {peers} other "
    "groups of that shape ({peer_ms:.2f} ms); {cost:.1f} ms per step",
    "SLOW_LINK_HOST": "the links of {host} are slow: all {links} slow links touch it; the "
    "worst one's {n} group(s) take {ms:.2f} ms per {op} of {size} once all their ranks are "
    "there, {ratio:.1f}x the median of the {peers} other groups of that shape ({peer_ms:.2f} "
    "ms); {cost:.1f} ms per step",
}


def remedy(key: str, **values: Any) -> str:
    """The remedy ``key`` with its numbers filled in."""
    return REMEDIES[key].format(**values)


def summary(code: str, **values: Any) -> str:
    return SUMMARIES[code].format(**values)


def bottleneck(code: str) -> str:
    return "build" if code.startswith("BUILD_") else BOTTLENECKS[code]


def listed(values: Sequence[int], limit: int) -> str:
    """``5, 10, 15 ...``: the first ``limit`` values, and `` ...`` when there are more."""
    return ", ".join(map(str, values[:limit])) + (" ..." if len(values) > limit else "")


def who(ranks: Sequence[int]) -> str:
    """``rank 0``, or ``ranks 0, 3``."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
