"""The ``3d`` layout of synthetic_run.py: pipeline x data x tensor parallelism, as a
``DeviceMesh(("pp", "dp", "tp"))`` with a ``torch.distributed.pipelining`` 1F1B schedule.

Rank ``(s * dp + d) * tp + t`` holds stage ``s`` of data-parallel replica ``d``, tensor shard
``t``: the tp groups are consecutive ranks (inside a node of 8), the dp groups ranks ``tp``
apart within a stage, the pp groups ranks ``dp * tp`` apart. Each rank's meta names its three
groups with their dimension, as the probe records a DeviceMesh's (probe/mesh.py), and its
stage, the schedule (``Schedule1F1B``), the microbatches and its blocks' times per step
(``PipelineMeta``, as probe/pipeline.py records them).

A step of stage ``s`` (p stages, m microbatches): 1F1B's ``min(p - s - 1, m)`` warm-up
forwards, then one forward and one backward in turn, then the cool-down backwards. Each is a
``forward`` or ``backward`` phase row with the microbatch in ``seq``. What makes it physical:

- **A stage waits for its input.** Before a forward (not on stage 0) the stage posts its
  ``recv`` of the activations from the stage before and blocks on it (a WAIT row, as
  probe/p2p.py records ``Work.wait``); the transfer starts when both the recv is posted and
  the sender's ``send`` issued, and takes the bytes at the network's bandwidth (stages are
  on different nodes). Backward likewise receives the gradients from the stage after. A
  stage's sends are asynchronous; it waits on them at the end of its step (short WAIT rows).
  Send and recv rows carry their peer's global rank and the pp group's per-rank sequence
  number, as the group hooks record them.
- **Tensor parallelism synchronises.** Each forward and backward computes in
  ``TP_PER_CHUNK`` pieces, each ended by an all-reduce on the tp group: every rank of the
  group leaves at the last arrival plus the transfer (NVLink bandwidth), so a tp group
  computes in step.
- **Data parallelism at the step's end.** After its last backward (and its sends' waits) a
  stage all-reduces its gradients on its dp group (``GRAD_BUCKETS``), then steps the
  optimizer.
- Clocks per host and the nodes of 8 ranks as in the other layouts.

Stage 0 loads the batch (a ``data`` phase) and counts its samples (``MICRO_SAMPLES`` per
microbatch): torch.distributed.pipelining's later stages count none. A plant ``heavy_stage``
gives one stage ``factor`` times the blocks (6 instead of 4), each block costing the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from scalescope.events import Kind
from scalescope.events.run import BlockMeta, GroupMeta, PipelineMeta
from scalescope.events.schema import ARROW_SCHEMA

MS = 1_000_000
US = 1_000
RANKS_PER_NODE = 8
BLOCKS_PER_STAGE = 4
BLOCK_MS = {"forward": 2.5, "backward": 5.0}
"""One block's compute per microbatch."""
TP_PER_CHUNK = 2
"""All-reduces on the tp group in each forward and backward (the blocks' coalesced)."""
MICRO_SAMPLES = 4
ACT_BYTES = 8 * 1024 * 1024
"""Activations (and their gradients) a tp shard sends to the next stage per microbatch."""
TP_BYTES = 16 * 1024 * 1024
"""Each tp all-reduce's bytes."""
GRAD_BUCKETS = (8 * 1024 * 1024, 4 * 1024 * 1024)
"""The gradient all-reduces on the dp group at the step's end."""
NET_LATENCY_NS, NET_BYTES_PER_NS = 30 * US, 12.5
"""Between nodes (100 Gb/s) per hop."""
NVLINK_LATENCY_NS, NVLINK_BYTES_PER_NS = 8 * US, 200.0
"""Inside a node."""
HOST_NS = 5 * US
"""The host's time between two calls (posting a recv, issuing a send)."""
EXIT_JITTER_NS = 10 * US
JITTER = 0.03
DATA_MS, OPTIMIZER_MS = 2.0, 4.0
GAP_NS = (20 * US, 200 * US)
RSS_BYTES = 6 * 1024**3
SCHEDULE = "Schedule1F1B"
HEAVY_FACTOR = 1.5

_PHASE, _COLL, _WAIT = int(Kind.PHASE), int(Kind.COLLECTIVE), int(Kind.WAIT)
NO_GROUP, TP, DP, PP = range(4)
NO_PEER, PREV, NEXT = range(3)


@dataclass(frozen=True)
class Mesh:
    """The ranks as (pp, dp, tp), tp innermost."""

    pp: int
    dp: int
    tp: int
    micro: int

    @classmethod
    def of(cls, ranks: int, pp: int, tp: int, micro: int) -> Mesh:
        """The mesh of ``ranks``; a ValueError that says why where it cannot be laid out."""
        if pp < 2:
            raise ValueError(f"the 3d layout needs --pp 2 or more (got {pp})")
        if tp < 1 or RANKS_PER_NODE % tp:
            raise ValueError(f"--tp {tp} must divide the {RANKS_PER_NODE} ranks of a node")
        if micro < 1:
            raise ValueError(f"--micro must be 1 or more (got {micro})")
        if ranks % (pp * tp):
            raise ValueError(f"{ranks} ranks are not a whole number of pp x tp = {pp * tp}")
        return cls(pp, ranks // (pp * tp), tp, micro)

    @property
    def ranks(self) -> int:
        return self.pp * self.lanes

    @property
    def lanes(self) -> int:
        """Ranks per stage (dp x tp): one pipeline per lane."""
        return self.dp * self.tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        lane = rank % self.lanes
        return rank // self.lanes, lane // self.tp, lane % self.tp

    def labels(self, rank: int) -> tuple[str, str, str]:
        """(tp, dp, pp) group labels, numbered as a DeviceMesh creates them: the pp groups,
        then the dp groups, then the tp groups, from "1" (the world group is "0")."""
        s, d, t = self.coords(rank)
        pp = 1 + d * self.tp + t
        dp = 1 + self.lanes + s * self.tp + t
        tp = 1 + self.lanes + self.pp * self.tp + s * self.dp + d
        return str(tp), str(dp), str(pp)

    def members(self, rank: int) -> tuple[list[int], list[int], list[int]]:
        s, d, t = self.coords(rank)
        base = s * self.lanes
        tp = list(range(base + d * self.tp, base + (d + 1) * self.tp))
        dp = list(range(base + t, base + self.lanes, self.tp))
        pp = list(range(d * self.tp + t, self.ranks, self.lanes))
        return tp, dp, pp

    def groups(self, rank: int) -> dict[str, GroupMeta]:
        return {
            label: GroupMeta(ranks=ranks, dim=dim, backend="nccl")
            for label, ranks, dim in zip(
                self.labels(rank), self.members(rank), ("tp", "dp", "pp"), strict=True
            )
        }


def schedule(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    """1F1B's order of a stage's microbatches: ("F" | "B", microbatch)."""
    warm = min(stages - stage - 1, micro)
    ops = [("F", j) for j in range(warm)]
    for i in range(micro - warm):
        ops += [("F", warm + i), ("B", i)]
    return ops + [("B", j) for j in range(micro - warm, micro)]


@dataclass(frozen=True)
class Row:
    """One row of a stage's step: its columns but the times, rank, group label and peer."""

    key: tuple
    name: str
    kind: int
    nbytes: int = 0
    count: int = 0
    dtype: str = ""
    group: int = NO_GROUP
    peer: int = NO_PEER
    seq: int = -1
    seq_per_step: int = 0
    """``seq`` of step ``k``: ``seq + k * seq_per_step`` (-1: none)."""
    tag: str = ""


def _p2p(key: tuple, op: str, peer: int, tag: str) -> Row:
    return Row(key, op, _COLL, ACT_BYTES, ACT_BYTES // 2, "bfloat16", PP, peer, tag=tag)


def template(stage: int, mesh: Mesh) -> list[Row]:
    """The rows of one step of ``stage`` in the order the probe appends them (a collective
    at its issue, a phase or wait at its end); collectives' ``seq`` numbered per group."""
    p, m, last = mesh.pp, mesh.micro, mesh.pp - 1
    rows = [Row(("data",), "data", _PHASE)] if stage == 0 else []
    sends: list[Row] = []
    for op, j in schedule(stage, p, m):
        fwd = op == "F"
        src = PREV if fwd else NEXT
        tag = "activations" if fwd else "gradients"
        if (fwd and stage > 0) or (not fwd and stage < last):
            rows.append(_p2p((op, j, "recv"), "recv", src, tag))
            rows.append(replace(rows[-1], key=(op, j, "wait"), kind=_WAIT, seq=j,
                                seq_per_step=m))  # fmt: skip
        rows += [
            Row((op, j, "tp", k), "all_reduce", _COLL, TP_BYTES, TP_BYTES // 2, "bfloat16", TP,
                tag="tensor_parallel")
            for k in range(TP_PER_CHUNK)
        ]  # fmt: skip
        rows.append(Row((op, j, "phase"), "forward" if fwd else "backward", _PHASE, seq=j))
        if (fwd and stage < last) or (not fwd and stage > 0):
            sends.append(_p2p((op, j, "send"), "send", NEXT if fwd else PREV, tag))
            rows.append(sends[-1])
    rows += [replace(r, key=(*r.key[:2], "send_wait"), kind=_WAIT, seq=r.key[1], seq_per_step=m)
             for r in sends]  # fmt: skip
    rows += [
        Row(("dp", k), "all_reduce", _COLL, b, b // 2, "bfloat16", DP, tag="gradients")
        for k, b in enumerate(GRAD_BUCKETS)
    ]
    samples = m * MICRO_SAMPLES if stage == 0 else 0
    rows += [Row(("optimizer",), "optimizer", _PHASE), Row(("step",), "step", int(Kind.STEP),
             count=samples), Row(("memory",), "rss_peak", int(Kind.MEMORY), RSS_BYTES)]  # fmt: skip
    return _numbered(rows)


def _numbered(rows: list[Row]) -> list[Row]:
    """Each collective's ``seq``: its place among the step's collectives on its group."""
    per_group = {g: sum(r.kind == _COLL and r.group == g for r in rows) for g in (TP, DP, PP)}
    seen = dict.fromkeys(per_group, 0)
    out = []
    for r in rows:
        if r.kind == _COLL:
            r = replace(r, seq=seen[r.group], seq_per_step=per_group[r.group])
            seen[r.group] += 1
        out.append(r)
    return out


# --- the timeline ----------------------------------------------------------------------------


@dataclass
class StageTimes:
    """Start and duration (ns, true time) of a stage's rows: (steps, rows, lanes)."""

    rows: list[Row]
    start: np.ndarray
    dur: np.ndarray
    sent: dict[tuple, np.ndarray] = field(default_factory=dict)
    """The current step's sends, by (op, microbatch): their issue, then their end."""

    def __post_init__(self) -> None:
        self.at = {r.key: i for i, r in enumerate(self.rows)}

    def put(self, step: int, key: tuple, start: np.ndarray, end: np.ndarray) -> None:
        i = self.at[key]
        self.start[step, i], self.dur[step, i] = start, end - start


class Simulator:
    """All stages' steps, each op computed for all lanes of its stage at once."""

    def __init__(self, rng: np.random.Generator, mesh: Mesh, blocks: list[int], steps: int):
        self.rng, self.mesh, self.blocks = rng, mesh, blocks
        self.times = []
        for s in range(mesh.pp):
            rows = template(s, mesh)
            shape = (steps, len(rows), mesh.lanes)
            self.times.append(StageTimes(rows, np.zeros(shape), np.zeros(shape)))
        self.free = np.zeros((mesh.pp, mesh.lanes))

    def _draw(self, ms: float) -> np.ndarray:
        n = self.mesh.lanes
        return ms * MS * np.clip(1.0 + JITTER * self.rng.standard_normal(n), 0.5, 1.5)

    def _noise(self, n: int) -> np.ndarray:
        return np.maximum(0.5, 1.0 + 0.05 * self.rng.standard_normal(n))

    def _synchronised(self, arrival: np.ndarray, axis: int, transfer: float) -> np.ndarray:
        """Every lane's end of one collective per group: the lanes as (dp, tp), the groups
        along ``axis`` (1: tp groups, 0: dp groups)."""
        shaped = arrival.reshape(self.mesh.dp, self.mesh.tp)
        last = shaped.max(axis=axis, keepdims=True)
        end = last + transfer * self._noise(last.size).reshape(last.shape)
        jitter = self.rng.uniform(0, EXIT_JITTER_NS, shaped.shape)
        return (end + jitter).reshape(-1)

    def step(self, k: int, start: np.ndarray) -> np.ndarray:
        """Step ``k`` of every stage from ``start`` (stages, lanes); returns its ends."""
        mesh = self.mesh
        self.free = start.copy()
        first = self.times[0]
        data_end = start[0] + self._draw(DATA_MS)
        first.put(k, ("data",), start[0], data_end)
        self.free[0] = data_end
        todo = [schedule(s, mesh.pp, mesh.micro) for s in range(mesh.pp)]
        done: set[tuple] = set()
        while any(todo):
            moved = False
            for s in range(mesh.pp):
                while todo[s] and self._ready(s, *todo[s][0], done):
                    op, j = todo[s].pop(0)
                    self._chunk(k, s, op, j)
                    done.add((op, s, j))
                    moved = True
            if not moved:
                raise RuntimeError("the schedule waits on itself")
        return np.stack([self._finish(k, s) for s in range(mesh.pp)])

    def _ready(self, s: int, op: str, j: int, done: set[tuple]) -> bool:
        if op == "F":
            return s == 0 or ("F", s - 1, j) in done
        return s == self.mesh.pp - 1 or ("B", s + 1, j) in done

    def _chunk(self, k: int, s: int, op: str, j: int) -> None:
        """One forward or backward: receive its input, compute with the tp all-reduces,
        issue its send."""
        times, begin = self.times[s], self.free[s]
        source = s - 1 if op == "F" else s + 1
        if (op, j, "recv") in times.at:
            begin = self._receive(k, s, source, op, j, begin)
        compute = self._draw(self.blocks[s] * BLOCK_MS["forward" if op == "F" else "backward"])
        at = begin
        tp_transfer = NVLINK_LATENCY_NS * np.ceil(np.log2(max(self.mesh.tp, 2)))
        tp_transfer += 2 * TP_BYTES / NVLINK_BYTES_PER_NS
        for piece in range(TP_PER_CHUNK):
            issue = at + compute / TP_PER_CHUNK
            at = self._synchronised(issue, 1, tp_transfer) if self.mesh.tp > 1 else issue
            times.put(k, (op, j, "tp", piece), issue, at)
        times.put(k, (op, j, "phase"), begin, at)
        self.free[s] = at + HOST_NS
        if (op, j, "send") in times.at:
            times.put(k, (op, j, "send"), self.free[s], self.free[s])  # its end: at the recv
            times.sent[(op, j)] = self.free[s].copy()
            self.free[s] += HOST_NS

    def _receive(self, k: int, s: int, source: int, op: str, j: int, ready: np.ndarray):
        """Post the recv at ``ready`` and block until the sender's bytes are in; the
        sender's send row ends with it. Returns when the stage can compute."""
        post = ready + HOST_NS
        issued = self.times[source].sent[(op, j)]
        transfer = NET_LATENCY_NS + ACT_BYTES / NET_BYTES_PER_NS
        arrived = np.maximum(post, issued) + transfer * self._noise(len(post))
        n = len(post)
        recv_end = arrived + self.rng.uniform(0, EXIT_JITTER_NS, n)
        send_end = arrived + self.rng.uniform(0, EXIT_JITTER_NS, n)
        times = self.times[s]
        times.put(k, (op, j, "recv"), post, recv_end)
        times.put(k, (op, j, "wait"), post + HOST_NS / 5, recv_end + HOST_NS / 5)
        sender = self.times[source]
        sender.put(k, (op, j, "send"), issued, send_end)
        sender.sent[(op, j)] = send_end
        return recv_end + HOST_NS

    def _finish(self, k: int, s: int) -> np.ndarray:
        """Wait on the sends, all-reduce the gradients on the dp group, step the optimizer."""
        times, at = self.times[s], self.free[s]
        for r in times.rows:
            if r.key[2:] == ("send_wait",):
                end = np.maximum(at, times.sent[r.key[:2]]) + HOST_NS / 5
                times.put(k, r.key, at, end)
                at = end + HOST_NS / 5
        hops = np.ceil(np.log2(max(self.mesh.dp, 2)))
        for b, nbytes in enumerate(GRAD_BUCKETS):
            issue = at + HOST_NS
            transfer = NET_LATENCY_NS * hops + 2 * nbytes / NET_BYTES_PER_NS
            at = self._synchronised(issue, 0, transfer) if self.mesh.dp > 1 else issue
            times.put(k, ("dp", b), issue, at)
        end = at + self._draw(OPTIMIZER_MS)
        times.put(k, ("optimizer",), at, end)
        return end


def simulate(
    rng: np.random.Generator, mesh: Mesh, steps: int, blocks: list[int]
) -> tuple[list[StageTimes], float]:
    """Every stage's rows over ``steps``, and the run's end (ns, true time)."""
    sim = Simulator(rng, mesh, blocks, steps)
    start = np.zeros((mesh.pp, mesh.lanes))
    for k in range(steps):
        end = sim.step(k, start)
        for s, times in enumerate(sim.times):
            times.put(k, ("step",), start[s], end[s])
            times.put(k, ("memory",), start[s], start[s])
        start = end + rng.uniform(*GAP_NS, end.shape)
    return sim.times, float(start.max()) + 200 * MS


def stage_blocks(mesh: Mesh, heavy: int | None, factor: float) -> list[int]:
    """Blocks per stage: ``BLOCKS_PER_STAGE``, the heavy stage ``factor`` times as many."""
    blocks = [BLOCKS_PER_STAGE] * mesh.pp
    if heavy is not None:
        blocks[heavy] = round(BLOCKS_PER_STAGE * factor)
    return blocks


def pipeline_meta(mesh: Mesh, stage: int, blocks: list[int], times: StageTimes,
                  lane: int) -> PipelineMeta:  # fmt: skip
    """As probe/pipeline.py records it: each block's forward and backward per step (the
    lane's phases summed over the microbatches, shared by the stage's blocks: all cost the
    same), the blocks named by their index in the model."""
    first, n = sum(blocks[:stage]), blocks[stage]
    fwd, bwd = (_phase_sum(times, name, lane) // n for name in ("forward", "backward"))
    return PipelineMeta(
        stage=stage, stages=mesh.pp, stages_held=[stage], schedule=SCHEDULE,
        microbatches=mesh.micro,
        blocks=[BlockMeta(name=str(first + b), forward_ns=fwd.tolist(), backward_ns=bwd.tolist())
                for b in range(n)],
    )  # fmt: skip


def _phase_sum(times: StageTimes, name: str, lane: int) -> np.ndarray:
    rows = [i for i, r in enumerate(times.rows) if r.name == name and r.kind == _PHASE]
    return times.dur[:, rows, lane].sum(axis=1).round().astype(np.int64)


# --- the columns -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageColumns:
    """The columns a stage's ranks share for ``steps`` steps, built once."""

    arrays: dict[str, pa.Array]
    group_of: np.ndarray
    peer_of: np.ndarray

    @classmethod
    def of(cls, rows: list[Row], steps: int) -> StageColumns:
        n = len(rows)
        step = np.repeat(np.arange(steps, dtype=np.int64), n)
        seq0 = np.tile(np.array([r.seq for r in rows], np.int64), steps)
        per = np.tile(np.array([r.seq_per_step for r in rows], np.int64), steps)
        seq = np.where(seq0 >= 0, seq0 + step * per, -1)

        def tiled(field: str, kind: pa.DataType) -> pa.Array:
            values = np.array([getattr(r, field) for r in rows], dtype=object)
            return pa.array(np.tile(values, steps).tolist(), kind)

        def ints(field: str, dtype: type) -> np.ndarray:
            return np.tile(np.array([getattr(r, field) for r in rows], dtype), steps)

        arrays = {
            "step": pa.array(step.astype(np.int32)),
            "kind": pa.array(ints("kind", np.int8)),
            "name": tiled("name", pa.string()),
            "nbytes": pa.array(ints("nbytes", np.int64)),
            "count": pa.array(ints("count", np.int64)),
            "dtype": tiled("dtype", pa.string()),
            "seq": pa.array(seq),
            "tag": tiled("tag", pa.string()),
        }
        return cls(arrays, ints("group", np.int64), ints("peer", np.int64))

    def batch(self, rank: int, mesh: Mesh, start: np.ndarray, dur: np.ndarray) -> pa.RecordBatch:
        n = len(start)
        labels = pa.array(["", *mesh.labels(rank)], pa.string())
        peers = np.array([-1, rank - mesh.lanes, rank + mesh.lanes], np.int32)
        arrays = dict(self.arrays, rank=pa.array(np.full(n, rank, np.int32)),
                      start_ns=pa.array(start), dur_ns=pa.array(dur),
                      group=labels.take(pa.array(self.group_of)),
                      peer=pa.array(peers[self.peer_of]))  # fmt: skip
        return pa.RecordBatch.from_arrays(
            [arrays[f.name] for f in ARROW_SCHEMA], schema=ARROW_SCHEMA
        )
