"""The mesh dimension each finding is about (issue 39: every finding carries the dimension).

Only where some group is not the world's: a data-parallel job's findings name none, so its
report is unchanged. A finding about collectives takes the dimension (analyze/ranks/groups.py: a
``DeviceMesh``'s name, else ``stride N`` or ``other``) of the calls it is about that took
the most time, none when that is the world's group (the whole job): a ZeRO gather on its
``dp`` groups, a pipeline's bubble on the groups its stages send over. The other findings
leave tensor parallelism out where other dimensions issued their ops too: the tp
collectives have findings of their own, and the exposed wait the communication findings
measure is the gradient exchange's.
"""

from __future__ import annotations

from dataclasses import replace

from scalescope.analyze.comm.collectives import OpTotals
from scalescope.analyze.summary import RunAnalysis
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.rules_comm import PAYLOAD_OPS
from scalescope.diagnose.rules_tp import TP_DIMS

P2P_OPS = ("send", "recv")
GATHERS = ("all_gather",)
EXCHANGES = ("reduce_scatter", "all_reduce")
OPS_OF: dict[str, tuple[str, ...]] = {
    "COMM_LATENCY": PAYLOAD_OPS,
    "COMM_BANDWIDTH": PAYLOAD_OPS,
    "FSDP_EXPOSED_GATHER": GATHERS,
    "FSDP_SMALL_UNITS": GATHERS + EXCHANGES,
    "ZERO3_PARAM_GATHER": GATHERS,
    "ZERO_EXCHANGE": EXCHANGES,
    "PIPELINE_BUBBLE": P2P_OPS,
    "STAGE_IMBALANCE": P2P_OPS,
}
"""Finding code -> the ops of the collectives it is about."""
TP_CODES = ("TP_COMM", "TP_COMM_EXPOSED", "TP_ACROSS_NODES")


def finding_dim(code: str, ops: tuple[OpTotals, ...]) -> str:
    """The dimension of the calls finding ``code`` is about; "" when it is not about calls
    or none were recorded."""
    if code in TP_CODES:
        rows = [o for o in ops if o.dim in TP_DIMS]
    elif code in OPS_OF:
        rows = [o for o in ops if o.op in OPS_OF[code] and o.dim]
        if any(o.dim not in TP_DIMS for o in rows):
            rows = [o for o in rows if o.dim not in TP_DIMS]
    else:
        return ""
    time: dict[str, float] = {}
    for o in rows:
        time[o.dim] = time.get(o.dim, 0.0) + o.total_ms_per_rank * o.num_ranks
    top = max(sorted(time), key=time.__getitem__, default="")
    return "" if top == "world" else top


def with_dims(findings: tuple[Finding, ...], analysis: RunAnalysis) -> tuple[Finding, ...]:
    """``findings`` with their dimension, where the job has more than the world's."""
    coll = analysis.collectives
    if coll is None or all(d.dim == "world" for d in analysis.dims):
        return findings
    return tuple(replace(f, dim=finding_dim(f.code, coll.ops)) for f in findings)
