"""Tables of a Horovod timeline: per-activity sums, and wait (negotiation) versus transfer."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from scalescope.ingest.result import HorovodPhase, HorovodWait
from scalescope.ingest.rows import dtype_info, numel


@dataclass(frozen=True)
class Instance:
    """One op instance of one tensor (times in the timeline's microseconds)."""

    tensor: str
    op: str
    index: int
    """0 for the tensor's first instance, 1 for its second, ... (the step, for gradients)."""
    op_start_us: float
    end_us: float | None
    """None when the timeline stops before the op ends."""
    negotiation: tuple[float, float] | None
    ticks: tuple[tuple[int, float], ...]
    """(rank, time it was ready) when the negotiation recorded them."""
    transfer_us: float
    dtype: str
    shape: tuple[int, ...] | None

    @property
    def start_us(self) -> float:
        """The issue: the first rank's request (negotiation start), else the op's start."""
        return self.negotiation[0] if self.negotiation else self.op_start_us


def tag_of(tensor: str, op: str) -> str:
    """gradients for DistributedOptimizer's allreduces, parameters for variable broadcasts."""
    last = tensor.rsplit("/", 1)[-1]
    if op == "all_reduce" and ("grad" in last.lower() or last.startswith("allreduce.")):
        return "gradients"
    if op == "broadcast" and (last.startswith("HorovodBroadcast") or last.startswith("broadcast.")):
        return "parameters"
    return "user"


def message(inst: Instance, world: int) -> tuple[int, int, str]:
    """(nbytes, count, dtype) with the nccl-tests convention."""
    dtype, size = dtype_info(inst.dtype)
    if inst.shape is None or inst.op == "barrier":
        return 0, 0, dtype
    count = numel(list(inst.shape))
    if inst.op == "all_gather":
        count *= world
    return count * size, count, dtype


def phase_table(phases: dict[str, list[float]]) -> tuple[HorovodPhase, ...]:
    """Per activity: wall, self, average wall and occurrences; largest wall first."""
    rows = [
        HorovodPhase(
            phase=name,
            wall_ms=wall / 1e3,
            self_ms=self_us / 1e3,
            avg_wall_ms=wall / 1e3 / count,
            occurrences=int(count),
        )
        for name, (wall, self_us, count) in phases.items()
        if count
    ]
    return tuple(sorted(rows, key=lambda r: (-r.wall_ms, r.phase)))


def _rank_wait_us(ticks: tuple[tuple[int, float], ...]) -> float | None:
    """Mean over ranks of (last arrival - this rank's arrival)."""
    if len(ticks) < 2:
        return None
    last = max(t for _, t in ticks)
    return sum(last - t for _, t in ticks) / len(ticks)


def wait_table(instances: list[Instance], world: int) -> tuple[HorovodWait, ...]:
    groups: dict[tuple[str, str, int], list[Instance]] = defaultdict(list)
    for inst in instances:
        if inst.end_us is not None and inst.negotiation is not None:
            key = (inst.op, tag_of(inst.tensor, inst.op), message(inst, world)[0])
            groups[key].append(inst)
    out = []
    for (op, tag, nbytes), items in groups.items():
        skews = [i.negotiation[1] - i.negotiation[0] for i in items if i.negotiation]
        waits = [w for i in items if (w := _rank_wait_us(i.ticks)) is not None]
        waits = waits if len(waits) == len(items) else []
        skew = sum(skews) / len(skews)
        transfer = sum(i.transfer_us for i in items) / len(items)
        total = skew + transfer
        out.append(
            HorovodWait(
                op=op,
                tag=tag,
                nbytes=nbytes,
                instances=len(items),
                skew_avg_us=skew,
                skew_max_us=max(skews),
                wait_avg_us=sum(waits) / len(waits) if waits else None,
                transfer_avg_us=transfer,
                wait_share_pct=100.0 * skew / total if total > 0 else 0.0,
            )
        )
    return tuple(sorted(out, key=lambda w: (w.op, w.tag, w.nbytes)))
