"""Which what-if cause (analyze/model/causes.py) each finding's fix is: its saving, where the
replay has that fix, is the replay's gain (``engine.replayed_savings``), and the verdict's
range comes from the steps that fix leaves (``verdict``)."""

from __future__ import annotations

from scalescope.analyze.model.causes import (
    FUSED,
    TP_FASTER,
    TP_HIDDEN,
    ZERO_EXCHANGE_HIDDEN,
    ZERO_GATHERS_HIDDEN,
)
from scalescope.analyze.summary import RunAnalysis
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.rules_extra_work import CODES as RANK_ONLY_CODES

COMM_CODES = ("COMM_LATENCY", "COMM_BANDWIDTH")
"""Findings of exposed communication: time-slicing when an oversubscribed host's ranks
waited for a cpu as long as it lasts."""

SCOPED_CAUSES = {
    "TP_COMM_EXPOSED": TP_HIDDEN,
    "TP_COMM": TP_FASTER,
    "TP_ACROSS_NODES": TP_FASTER,
    "ZERO3_PARAM_GATHER": ZERO_GATHERS_HIDDEN,
    "ZERO_EXCHANGE": ZERO_EXCHANGE_HIDDEN,
    "FSDP_SMALL_UNITS": FUSED,
}
"""Findings whose rules put no figure on their fix: tensor parallelism's collectives hidden
on streams, or over a faster link where the backend blocks the host (gloo: nothing overlaps
them; a tp group inside a node rather than across them), ZeRO's gathers and exchange hidden
(prefetch, ``overlap_comm``), FSDP's units merged into fewer (its calls' host cost and
latency, which hiding their transfers leaves: fsdp-small-units gained 34-51 ms a step from one
unit against 24-37 for its transfers hidden). The replay of that fix is their saving, info
findings' too."""
ASSUMED = {"TP_ACROSS_NODES": "the links inside a node 2x faster than across them: assumed"}
"""What a finding's replayed fix assumes that the run did not measure."""


def replayed_cause(f: Finding, analysis: RunAnalysis) -> str | None:
    """The what-if cause whose fix is this finding's remedy (analyze/model/whatif.py)."""
    if f.code == "STRAGGLER" and f.rank is not None:
        return f"rank:{f.rank}"
    if f.code == "NODE_STRAGGLER":
        listed = next((e.value for e in f.evidence if e.name == "its ranks"), "")
        ranks = {int(r) for r in str(listed).split(",") if r.strip().isdigit()}
        hosts = {s.hostname for s in analysis.ranks if s.rank in ranks}
        return f"node:{hosts.pop()}" if len(hosts) == 1 else None
    if f.code == "SLOW_LINK":
        hosts = next((str(e.value) for e in f.evidence if e.name == "hosts"), "")
        return f"link:{hosts.replace(' ', '')}" if hosts else None
    if f.code == "LOAD_IMBALANCE" and f.rank is None:
        return _the_slow_rank(analysis)
    if f.code == "INPUT_BOUND":
        return "phase:data"
    if f.code == "PAGEABLE_COPY":
        return "phase:to_device"
    if f.code in SCOPED_CAUSES:
        return SCOPED_CAUSES[f.code]
    kind = next((k for k, code in RANK_ONLY_CODES.items() if code == f.code), None)
    if kind is not None:
        return f"phase:{kind}"
    return "comm:hidden" if f.code in COMM_CODES else None


def _the_slow_rank(analysis: RunAnalysis) -> str | None:
    """The one rank slower than its peers beyond the steps' spread (the what-if's peer
    test), when there is exactly one: a load imbalance is then that rank's."""
    beyond = analysis.whatif.beyond_spread if analysis.whatif is not None else ()
    ranks = [c for c in beyond if c.startswith("rank:")]
    return ranks[0] if len(ranks) == 1 else None
