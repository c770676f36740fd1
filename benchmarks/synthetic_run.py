"""A synthetic data-parallel run of many ranks that behaves as a real job does.

Each rank runs DDP's steps: data, forward with the buffer broadcast, backward with three
asynchronous gradient buckets, comm_wait, optimizer (11 rows a step, as the probe records
them). What makes it physical:

- **Collectives synchronise.** An instance (group "0", one sequence number) cannot end on
  any rank before the last rank has arrived: every rank leaves at ``max(arrival over ranks)
  + transfer``, the same transfer for all (a ring or a tree is as fast as its slowest link),
  plus a few µs of exit jitter. A rank arrives at ``max(issue, end of its previous
  collective on the group)`` (the backend runs a group's collectives in order, so a bucket
  queues behind the one ahead). A rank that arrives early waits, and the ranks stay in step
  over any number of steps.
- **Clocks.** Every rank writes times on its host's ``perf_counter_ns`` clock: the ranks of
  one host share it (CLOCK_MONOTONIC is per host), hosts differ by up to a minute of uptime
  and drift by up to ``drift_ppm`` against node 0. Each rank's meta holds the offsets a
  ping-pong with rank 0 would measure at the start and the end (``RankMeta.clock``, within
  their stated uncertainty), so the analysis' alignment (analyze/ranks/clocks.py) puts them back
  on rank 0's clock; the drift is what is left after the start offset is applied.
- **Hosts.** Ranks are grouped in nodes of 8 (``node000``, ...), named in RankMeta and
  RunMeta, so node-aware analysis can see them.
- **Layouts.** ``ddp`` (the default): every collective is on the world group "0" (11 rows a
  rank-step). ``3d``: pipeline x data x tensor parallelism on a DeviceMesh with a 1F1B
  schedule (``--pp``, ``--tp``, ``--micro``; dp = ranks / (pp x tp)), described in
  synthetic_3d.py. ``pipeline``: besides, halfway through forward each rank sends
  ``ACTIVATION_BYTES`` to the same local rank on the next node and receives as much from the
  previous node (nodes in a ring), both asynchronous as ``batch_isend_irecv`` issues them,
  forward going on when both are done. Each (sender, receiver) pair is its own 2-rank group
  (labelled ``1 + sender``; its sequence number is the step), so the pair's ``send`` and
  ``recv`` rows match across ranks (13 rows a rank-step).

It can plant one problem (``Plant``): a slow node (all ranks of one host ~30 % slower
compute), a slow rank, a slow link or a hang (one rank stops before a step; the others wait
in that step's broadcast, left unfinished with dur -1, and the launcher stops the job); in
the 3d layout only a heavy stage (1.5x the blocks of the others).
``write_run`` returns the ``Truth``.

A **slow link** is the network path between node ``target`` and the next node (4x less
bandwidth, both ways), as a bad cable, a degraded NIC port or a congested switch port would
be. Whatever crosses it moves its bytes 4x slower, for every rank of the collective at once:
the world group's ring crosses every pair of consecutive nodes, so its all-reduces and
broadcasts take longer on every rank (none is late: that alone looks like a slower network,
not a slow link), and in the pipeline layout the 8 pair groups between the two nodes take
4x longer to transfer than the other pairs. Nothing else changes: the ranks at its ends
compute as fast as the others.

The timeline is computed step by step for all ranks at once (numpy over ranks), then each
rank's file is written with the probe's ``EventWriter`` in record batches of 20 steps.
4,096 ranks x 1,000 steps take about a minute on a 2-core machine (mostly the writing).

    .venv/bin/python benchmarks/synthetic_run.py /tmp/run --ranks 64 --steps 200 --plant slow_node
    .venv/bin/python benchmarks/synthetic_run.py /tmp/run --ranks 64 --layout pipeline \
        --plant slow_link
    .venv/bin/python benchmarks/synthetic_run.py /tmp/run --ranks 1024 --steps 100 \
        --layout 3d --pp 4 --tp 8 --micro 8 --plant heavy_stage
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from scalescope.events import EventWriter, Kind, RankMeta, RunMeta
from scalescope.events.run import ClockSync, events_path, rank_meta_path, write_json_atomic
from scalescope.events.schema import ARROW_SCHEMA
from synthetic_3d import HEAVY_FACTOR, Mesh, StageColumns, pipeline_meta, stage_blocks
from synthetic_3d import simulate as simulate_3d

MS = 1_000_000
US = 1_000
RANKS_PER_NODE = 8
STEPS_PER_BATCH = 20
"""Steps per record batch, as the probe flushes."""
WARMUP_STEPS = 5
SAMPLES_PER_STEP = 32
CLOCK_BASE_NS = 10**12
"""Rank 0's perf_counter_ns at the start of the run (a host up for about 17 minutes)."""
WALL_START_S = 1.8e9
"""The run's start on the wall clock (time.time())."""

BROADCAST_BYTES = 1024
BUCKETS = (1024 * 1024, 25 * 1024 * 1024, 20 * 1024 * 1024)
"""Gradient buckets in the order backward issues them."""
LATENCY_NS = 30 * US
"""Per hop; a collective over R ranks takes log2(R) hops (tree / recursive halving)."""
BANDWIDTH_BYTES_PER_NS = 12.5
"""Bus bandwidth (100 Gb/s); an all-reduce moves twice its bytes."""
EXIT_JITTER_NS = 10 * US
"""Ranks leave an instance within this much of each other (notification order)."""

COMPUTE_MS = {"data": 2.0, "forward": 30.0, "backward": 52.0, "optimizer": 5.0}
JITTER = 0.03
"""Relative standard deviation of each phase's time, independent per rank and step."""
GAP_NS = (20 * US, 200 * US)
"""Host time between one step's end and the next's start (uniform)."""
BROADCAST_AFTER_NS = 50 * US
"""The buffer broadcast is issued this long into forward (DDP's pre-forward hook)."""
ACTIVATION_BYTES = 16 * 1024 * 1024
"""pipeline layout: the activations each rank sends to the next node, per step."""
LAYOUTS = ("ddp", "pipeline", "3d")

SLOW_COMPUTE = 1.3
SLOW_LINK = 4.0
PLANTS = ("slow_node", "slow_rank", "slow_link", "hang", "heavy_stage")
PLANTS_3D = ("heavy_stage",)
ONSET_PLANTS = ("slow_node", "slow_rank", "slow_link")
"""The plants that can begin mid-run (``Plant.from_step``)."""
HANG_ERROR = "stopped by scalescope after a hang (--hang-action kill); stopped by SIGTERM"

# The rows of one step (the ddp layout appends them in this order).
DATA, BCAST, FWD, AR0, AR1, AR2, BWD, WAIT, OPT, STEP, MEM, SEND, RECV = range(13)
ROWS_PER_STEP = 11
ROW_ORDER = {
    "ddp": tuple(range(ROWS_PER_STEP)),
    "pipeline": (DATA, BCAST, SEND, RECV, FWD, AR0, AR1, AR2, BWD, WAIT, OPT, STEP, MEM),
}
"""The rows of one step of each layout, in the order the probe appends them (a collective
at its issue, a phase at its end)."""
PAIR_SEQ = -2
"""TEMPLATE's seq offset of the pair groups' rows: their sequence number is the step."""
_PHASE, _COLL = int(Kind.PHASE), int(Kind.COLLECTIVE)
TEMPLATE = (  # name, kind, nbytes, count, dtype, group, seq offset (-1: none), tag
    ("data", _PHASE, 0, 0, "", "", -1, ""),
    ("broadcast", _COLL, BROADCAST_BYTES, BROADCAST_BYTES // 4, "float32", "0", 0, "buffers"),
    ("forward", _PHASE, 0, 0, "", "", -1, ""),
    *(("all_reduce", _COLL, b, b // 4, "float32", "0", 1 + i, "gradients")
      for i, b in enumerate(BUCKETS)),
    ("backward", _PHASE, 0, 0, "", "", -1, ""),
    ("comm_wait", _PHASE, 0, 0, "", "", -1, ""),
    ("optimizer", _PHASE, 0, 0, "", "", -1, ""),
    ("step", int(Kind.STEP), 0, SAMPLES_PER_STEP, "", "", -1, ""),
    ("rss_peak", int(Kind.MEMORY), 2 * 1024**3, 0, "", "", -1, ""),
    ("send", _COLL, ACTIVATION_BYTES, ACTIVATION_BYTES // 2, "bfloat16", "", PAIR_SEQ,
     "activations"),
    ("recv", _COLL, ACTIVATION_BYTES, ACTIVATION_BYTES // 2, "bfloat16", "", PAIR_SEQ,
     "activations"),
)  # fmt: skip
"""The send / recv rows' group is the rank's pair group to the next / from the previous
node (``pair_groups``)."""
SEQ_PER_STEP = 4
HANG_ROWS = (DATA, BCAST)
"""What a waiting rank records of the step it hangs in: data ended, the broadcast never did."""


@dataclass(frozen=True)
class Plant:
    """One problem to plant; ``target`` None: chosen by the seed (never node 0 or rank 0)."""

    kind: str
    """slow_node, slow_rank, slow_link, hang or heavy_stage (3d layout)."""
    target: int | None = None
    """The node (slow_node; slow_link: the link from it to the next node), the stage
    (heavy_stage) or the rank (the others)."""
    factor: float | None = None
    """Compute time factor (slow node, slow rank: 1.3), the link's bandwidth divisor
    (slow link: 4) or the heavy stage's blocks against the others' (1.5)."""
    at_step: int | None = None
    """hang: the step the rank never starts (default: the middle of the run)."""
    from_step: int = 0
    """A slow node, rank or link from this step on (the steps before run as without it), as
    a fault that begins mid-run does; 0: from the start."""


@dataclass(frozen=True)
class Truth:
    """What the run holds, to check an analysis against."""

    ranks: int
    steps: int
    """Steps every rank completed (a hang: the steps before it)."""
    hostnames: tuple[str, ...]
    plant: str | None = None
    slow_node: str | None = None
    slow_ranks: tuple[int, ...] = ()
    """Ranks with slower compute (a slow node: its ranks)."""
    slow_link: tuple[str, str] | None = None
    """The two hosts at the ends of the slow link."""
    hang_rank: int | None = None
    hang_step: int | None = None
    factor: float | None = None
    step_ms: float = 0.0
    """Mean step time over the measured steps (all ranks, true time)."""
    wait_ms_per_step: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per rank: waiting in collectives (last arrival - own arrival) per measured step."""
    clock_offset_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Per rank: the true offset to rank 0's clock at the start (add to the rank's times)."""
    drift_ppm: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rows: int = 0
    generate_s: float = 0.0
    layout: str = "ddp"
    mesh: Mesh | None = None
    """The 3d layout's (pp, dp, tp) and microbatches."""
    heavy_stage: int | None = None
    from_step: int = 0
    """The step the plant begins at (0: from the start)."""
    blocks: tuple[int, ...] = ()
    """The 3d layout: blocks per stage."""

    def host_of(self, rank: int) -> str:
        return self.hostnames[rank // RANKS_PER_NODE]


# --- the timeline, in true time (rank 0's clock less its base) ------------------------------


@dataclass
class Timeline:
    """Start and duration (ns, true time) of every row: arrays (steps, 11, ranks), so the
    step loop writes contiguous rows of all ranks."""

    start: np.ndarray
    dur: np.ndarray
    wait_ns: np.ndarray
    """Per rank: waiting in collectives summed over the measured steps."""
    hang_start: np.ndarray | None = None
    """(2, ranks): data and broadcast issue of the step the hang stops in."""
    end_ns: float = 0.0


@dataclass(frozen=True)
class Factors:
    compute: np.ndarray
    """Per rank, multiplies every phase's compute time."""
    pair_link: np.ndarray
    """Per rank, divides the bandwidth of its pair group to the next node (pipeline)."""
    world_link: float = 1.0
    """Divides the world group's bandwidth: its ring crosses every link."""
    layout: str = "ddp"
    from_step: int = 0
    """The steps before this one run with ``clean``'s factors (a plant's onset)."""

    def at(self, step: int) -> Factors:
        """The factors of ``step``: before the onset, those without the plant."""
        return self if step >= self.from_step else self.clean()

    def clean(self) -> Factors:
        ones = np.ones(len(self.compute))
        return Factors(ones, ones, 1.0, self.layout)


def hostnames(ranks: int) -> tuple[str, ...]:
    return tuple(f"node{n:03d}" for n in range(-(-ranks // RANKS_PER_NODE)))


def transfer_ns(nbytes: int, ranks: int, all_reduce: bool, slow: float = 1.0) -> float:
    """Latency per hop plus the bytes at the bandwidth divided by ``slow``."""
    hops = max(1.0, np.ceil(np.log2(max(ranks, 2))))
    moved = 2 * nbytes if all_reduce else nbytes
    return LATENCY_NS * hops + slow * moved / BANDWIDTH_BYTES_PER_NS


def next_node(ranks: int) -> np.ndarray:
    """Per rank, the same local rank on the next node (the last node's: node 0's)."""
    return (np.arange(ranks) + RANKS_PER_NODE) % ranks


def pair_groups(rank: int, ranks: int) -> tuple[str, str]:
    """The labels of the rank's pair groups: to the next node, from the previous one."""
    return str(1 + rank), str(1 + (rank - RANKS_PER_NODE) % ranks)


def _draw(rng: np.random.Generator, mean_ms: float, factor: np.ndarray) -> np.ndarray:
    jitter = np.clip(1.0 + JITTER * rng.standard_normal(len(factor)), 0.5, 1.5)
    return mean_ms * MS * jitter * factor


def _collective(
    rng: np.random.Generator, arrival: np.ndarray, transfer: float
) -> tuple[np.ndarray, np.ndarray]:
    """End of one instance on every rank, and each rank's wait (last arrival - its own)."""
    last = arrival.max()
    noise = transfer * max(0.5, 1.0 + 0.05 * rng.standard_normal())  # the same for all ranks
    end = last + noise + rng.uniform(0, EXIT_JITTER_NS, len(arrival))
    return end, last - arrival


def _pairs(
    rng: np.random.Generator, issue: np.ndarray, f: Factors
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pipeline's exchange: every rank r sends to ``next_node[r]`` and receives from the
    previous node, both issued at ``issue``. Each pair's instance ends on both of its ranks
    at its last arrival plus its transfer (its own noise, its link's bandwidth). Per rank:
    the end of its send, of its recv, and its wait in both."""
    ranks = len(issue)
    peer = next_node(ranks)
    last = np.maximum(issue, issue[peer])  # pair r: sender r, receiver peer[r]
    noise = np.maximum(0.5, 1.0 + 0.05 * rng.standard_normal(ranks))
    transfer = LATENCY_NS + f.pair_link * ACTIVATION_BYTES / BANDWIDTH_BYTES_PER_NS
    done = last + transfer * noise
    send_end = done + rng.uniform(0, EXIT_JITTER_NS, ranks)
    recv_end, wait_recv = np.empty(ranks), np.empty(ranks)
    recv_end[peer] = done + rng.uniform(0, EXIT_JITTER_NS, ranks)
    wait_recv[peer] = last - issue[peer]
    return send_end, recv_end, (last - issue) + wait_recv


def _step(
    rng: np.random.Generator, t: np.ndarray, prev_end: np.ndarray, f: Factors, ranks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of all ranks from their start ``t``: (start, dur) as (rows, ranks) (11, or
    13 in the pipeline layout), and the ranks' waits in its collectives."""
    rows = len(ROW_ORDER[f.layout])
    start, dur = np.zeros((rows, ranks)), np.zeros((rows, ranks))
    data = _draw(rng, COMPUTE_MS["data"], f.compute)
    fwd = _draw(rng, COMPUTE_MS["forward"], f.compute)
    bwd = _draw(rng, COMPUTE_MS["backward"], f.compute)
    opt = _draw(rng, COMPUTE_MS["optimizer"], f.compute)
    issue = t + data + BROADCAST_AFTER_NS
    world = f.world_link
    end, wait = _collective(
        rng, np.maximum(issue, prev_end), transfer_ns(BROADCAST_BYTES, ranks, False, world)
    )
    start[DATA], dur[DATA] = t, data
    start[BCAST], dur[BCAST] = issue, end - issue
    fwd_end = end + fwd
    if f.layout == "pipeline":  # the activations' exchange halfway through forward
        issue = end + fwd / 2
        send_end, recv_end, w = _pairs(rng, issue, f)
        start[SEND], dur[SEND] = issue, send_end - issue
        start[RECV], dur[RECV] = issue, recv_end - issue
        fwd_end = np.maximum(send_end, recv_end) + fwd / 2
        wait += w
    start[FWD], dur[FWD] = t + data, fwd_end - (t + data)
    for i, nbytes in enumerate(BUCKETS):
        issue = fwd_end + bwd * (i + 1) / len(BUCKETS)
        transfer = transfer_ns(nbytes, ranks, True, world)
        end, w = _collective(rng, np.maximum(issue, end), transfer)
        start[AR0 + i], dur[AR0 + i] = issue, end - issue
        wait += w
    bwd_end = fwd_end + bwd
    start[BWD], dur[BWD] = fwd_end, bwd
    start[WAIT], dur[WAIT] = bwd_end, end - bwd_end
    start[OPT], dur[OPT] = end, opt
    start[STEP], dur[STEP] = t, end + opt - t
    start[MEM] = t
    return start, dur, wait


def simulate(
    rng: np.random.Generator, ranks: int, steps: int, f: Factors, hang: tuple[int, int] | None
) -> Timeline:
    """All ranks' steps; with ``hang`` (rank, step) the run stops before that step."""
    run_steps = hang[1] if hang else steps
    start = np.zeros((run_steps, len(ROW_ORDER[f.layout]), ranks))
    dur = np.zeros_like(start)
    wait_ns = np.zeros(ranks)
    t = 500 * MS + rng.uniform(0, 20 * MS, ranks)  # the ranks reach their first step apart
    prev_end = np.zeros(ranks)
    for s in range(run_steps):
        start[s], dur[s], wait = _step(rng, t, prev_end, f.at(s), ranks)
        if s >= WARMUP_STEPS:
            wait_ns += wait
        prev_end = start[s, AR2] + dur[s, AR2]
        t = start[s, STEP] + dur[s, STEP] + rng.uniform(*GAP_NS, ranks)
    timeline = Timeline(start, dur, wait_ns)
    if hang:
        data = _draw(rng, COMPUTE_MS["data"], f.compute)
        timeline.hang_start = np.stack([t, t + data + BROADCAST_AFTER_NS])
        timeline.end_ns = float(t.max()) + 60e9  # the watchdog's wait, then the kill
    else:
        timeline.end_ns = float(t.max()) + 200 * MS
    return timeline


# --- the plant -------------------------------------------------------------------------------


def plan(
    plant: Plant | str | None, ranks: int, steps: int, seed: int, layout: str = "ddp"
) -> tuple[Factors, Truth]:
    """Per-rank factors and the truth (without the timeline's figures) of a plant."""
    names = hostnames(ranks)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")
    if layout == "pipeline" and (ranks % RANKS_PER_NODE or ranks < 2 * RANKS_PER_NODE):
        raise ValueError(f"the pipeline layout needs whole nodes of {RANKS_PER_NODE} ranks, "
                         "at least two")  # fmt: skip
    f = Factors(np.ones(ranks), np.ones(ranks), layout=layout)
    if plant is None:
        return f, Truth(ranks, steps, names, layout=layout)
    p = Plant(plant) if isinstance(plant, str) else plant
    if p.kind not in PLANTS:
        raise ValueError(f"unknown plant {p.kind!r}; one of {', '.join(PLANTS)}")
    if p.kind in PLANTS_3D:
        raise ValueError(f"a {p.kind} plant needs the 3d layout")
    if p.from_step and p.kind not in ONSET_PLANTS:
        raise ValueError(f"only {', '.join(ONSET_PLANTS)} can begin mid-run (from_step)")
    if not 0 <= p.from_step < max(steps, 1):
        raise ValueError(f"from_step {p.from_step} is not within the run's {steps} steps")
    f, truth = _planted(p, ranks, steps, seed, layout)
    return replace(f, from_step=p.from_step), replace(truth, from_step=p.from_step)


def _planted(p: Plant, ranks: int, steps: int, seed: int, layout: str) -> tuple[Factors, Truth]:
    """``plan``'s factors and truth of a known plant, from the start."""
    names = hostnames(ranks)
    f = Factors(np.ones(ranks), np.ones(ranks), layout=layout)
    pick = np.random.default_rng(seed + 1_000_003)
    if p.kind == "slow_link":
        if len(names) < 2:
            raise ValueError("a slow link needs at least two nodes (9 ranks)")
        node = p.target if p.target is not None else int(pick.integers(0, len(names)))
        other = (node + 1) % len(names)
        factor = p.factor or SLOW_LINK
        node_of = np.arange(ranks) // RANKS_PER_NODE
        ends = (node, other)
        crosses = np.isin(node_of, ends) & np.isin(node_of[next_node(ranks)], ends)
        f = Factors(f.compute, np.where(crosses, factor, 1.0), factor, layout)
        return f, Truth(ranks, steps, names, p.kind, slow_link=(names[node], names[other]),
                        factor=factor, layout=layout)  # fmt: skip
    if p.kind == "slow_node":
        if len(names) < 2 and p.target is None:
            raise ValueError("a slow node needs at least two nodes (9 ranks)")
        node = p.target if p.target is not None else int(pick.integers(1, len(names)))
        slow = np.arange(node * RANKS_PER_NODE, min((node + 1) * RANKS_PER_NODE, ranks))
        factor = p.factor or SLOW_COMPUTE
        f.compute[slow] = factor
        return f, Truth(ranks, steps, names, p.kind, names[node], tuple(map(int, slow)),
                        factor=factor, layout=layout)  # fmt: skip
    rank = p.target if p.target is not None else int(pick.integers(1, ranks))
    if p.kind == "slow_rank":
        factor = p.factor or SLOW_COMPUTE
        f.compute[rank] = factor
        return f, Truth(ranks, steps, names, p.kind, slow_ranks=(rank,), factor=factor,
                        layout=layout)  # fmt: skip
    at = p.at_step if p.at_step is not None else steps // 2
    if not 0 < at < steps:
        raise ValueError(f"hang step {at} is not within the run's {steps} steps")
    return f, Truth(ranks, at, names, p.kind, hang_rank=rank, hang_step=at, layout=layout)


def plan_3d(plant: Plant | str | None, ranks: int, steps: int, seed: int, mesh: Mesh) -> Truth:
    """The 3d layout's truth (without the timeline's figures): its blocks per stage."""
    names = hostnames(ranks)
    p = Plant(plant) if isinstance(plant, str) else plant
    if p is None:
        return Truth(ranks, steps, names, layout="3d", mesh=mesh, blocks=tuple(stage_blocks(
            mesh, None, 1.0)))  # fmt: skip
    if p.kind not in PLANTS_3D:
        raise ValueError(f"the 3d layout plants only {', '.join(PLANTS_3D)} (got {p.kind!r})")
    if p.from_step:
        raise ValueError("a heavy stage is heavy from the start (no from_step)")
    pick = np.random.default_rng(seed + 1_000_003)
    stage = p.target if p.target is not None else int(pick.integers(0, mesh.pp))
    if not 0 <= stage < mesh.pp:
        raise ValueError(f"stage {stage} is not one of the pipeline's {mesh.pp}")
    factor = p.factor or HEAVY_FACTOR
    blocks = tuple(stage_blocks(mesh, stage, factor))
    return Truth(ranks, steps, names, p.kind, factor=factor, layout="3d", mesh=mesh,
                 heavy_stage=stage, blocks=blocks)  # fmt: skip


# --- clocks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clocks:
    """Per rank: local = base + true + drift x true (ns); node 0 is the reference."""

    base: np.ndarray
    drift: np.ndarray
    """Fractional (ppm x 1e-6)."""
    uncertainty: np.ndarray
    """The ping-pong's stated ± bound of each measured offset."""

    def local(self, rank: int, true_ns: np.ndarray) -> np.ndarray:
        return (self.base[rank] + true_ns * (1.0 + self.drift[rank])).round().astype(np.int64)

    def offset(self, rank: int, true_ns: float) -> float:
        """Add to the rank's clock at ``true_ns`` to get rank 0's."""
        return float(self.base[0] - self.base[rank] - self.drift[rank] * true_ns)


def make_clocks(rng: np.random.Generator, ranks: int, drift_ppm: float) -> Clocks:
    nodes = -(-ranks // RANKS_PER_NODE)
    base = CLOCK_BASE_NS + rng.uniform(-60e9, 60e9, nodes).round()
    drift = rng.uniform(-drift_ppm, drift_ppm, nodes) * 1e-6
    base[0], drift[0] = CLOCK_BASE_NS, 0.0
    node = np.arange(ranks) // RANKS_PER_NODE
    uncertainty = np.where(node == 0, 5 * US, rng.uniform(15 * US, 30 * US, ranks)).round()
    return Clocks(base[node], drift[node], uncertainty.astype(np.int64))


def clock_samples(rng: np.random.Generator, clocks: Clocks, rank: int, end_ns: float) -> list:
    """The start and end offsets as the probe measures them: the true one, off by at most a
    quarter of the stated uncertainty."""
    if rank == 0:
        return []
    out = []
    for when, at in (("start", 0.0), ("end", end_ns)):
        error = rng.uniform(-0.25, 0.25) * clocks.uncertainty[rank]
        out.append(ClockSync(when=when, offset_ns=round(clocks.offset(rank, at) + error),
                             uncertainty_ns=int(clocks.uncertainty[rank]), rounds=8))  # fmt: skip
    return out


# --- writing ---------------------------------------------------------------------------------


class BatchWriter(EventWriter):
    """The probe's writer, fed a record batch built from numpy columns: building tuples for
    tens of millions of rows, as ``EventWriter.write`` takes them, would take minutes."""

    def write_batch(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            return
        self._writer.write_batch(batch)
        self._sink.flush()
        self.rows_written += batch.num_rows

    def close(self) -> None:
        """Without the probe's fsync: a generated run needs no durability, and 4,096 fsyncs
        take longer than writing the rows."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        try:
            writer.close()
        finally:
            self._sink.close()


@dataclass(frozen=True)
class Columns:
    """The columns every rank shares (all but rank, start_ns and dur_ns) for ``steps`` full
    steps, built once."""

    steps: int
    arrays: dict[str, pa.Array]
    group_of: np.ndarray | None = None
    """With send / recv rows: per row, the index of its group among ("", "0", the rank's
    group to the next node, the one from the previous node)."""

    @classmethod
    def of(cls, steps: int, rows: tuple[int, ...] = tuple(range(ROWS_PER_STEP)),
           first: int = 0) -> Columns:  # fmt: skip
        """``rows`` of each step (indices of TEMPLATE), steps ``first`` to ``first + steps``."""
        per_step = [TEMPLATE[i] for i in rows]
        step = np.repeat(np.arange(first, first + steps, dtype=np.int32), len(rows))
        cols = list(zip(*per_step, strict=True))
        seq_off = np.tile(np.array(cols[6], dtype=np.int64), steps)
        seq = np.where(seq_off >= 0, step.astype(np.int64) * SEQ_PER_STEP + seq_off, -1)
        seq = np.where(seq_off == PAIR_SEQ, step, seq)
        group_of = np.array([{SEND: 2, RECV: 3}.get(i, int(TEMPLATE[i][5] == "0")) for i in rows])

        def tiled(values: tuple, kind: pa.DataType) -> pa.Array:
            return pa.array(np.tile(np.array(values, dtype=object), steps).tolist(), kind)

        arrays = {
            "step": pa.array(step, pa.int32()),
            "kind": pa.array(np.tile(np.array(cols[1], np.int8), steps), pa.int8()),
            "name": tiled(cols[0], pa.string()),
            "nbytes": pa.array(np.tile(np.array(cols[2], np.int64), steps)),
            "count": pa.array(np.tile(np.array(cols[3], np.int64), steps)),
            "dtype": tiled(cols[4], pa.string()),
            "group": tiled(cols[5], pa.string()),
            "seq": pa.array(seq),
            "tag": tiled(cols[7], pa.string()),
        }
        pairs = np.tile(group_of, steps) if (group_of >= 2).any() else None
        return cls(steps, arrays, pairs)

    def batch(
        self, rank: int, start: np.ndarray, dur: np.ndarray, ranks: int = 0
    ) -> pa.RecordBatch:
        """One rank's rows; ``ranks`` (the world size) names its pair groups."""
        n = len(start)
        arrays = dict(self.arrays, rank=pa.array(np.full(n, rank, np.int32)),
                      start_ns=pa.array(start), dur_ns=pa.array(dur))  # fmt: skip
        peer = np.full(n, -1, np.int32)
        if self.group_of is not None:
            labels = pa.array(["", "0", *pair_groups(rank, ranks)], pa.string())
            arrays["group"] = labels.take(pa.array(self.group_of))
            peer[self.group_of == 2] = (rank + RANKS_PER_NODE) % ranks
            peer[self.group_of == 3] = (rank - RANKS_PER_NODE) % ranks
        arrays["peer"] = pa.array(peer)
        return pa.RecordBatch.from_arrays(
            [arrays[f.name] for f in ARROW_SCHEMA], schema=ARROW_SCHEMA
        )


def _local_rows(
    clocks: Clocks, rank: int, start: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """True (start, dur) to the rank's clock: both ends converted, so durations drift too."""
    local_start = clocks.local(rank, start)
    return local_start, clocks.local(rank, start + dur) - local_start


def write_events(
    run_dir: Path,
    rank: int,
    tl: Timeline,
    clocks: Clocks,
    full: Columns,
    tail: Columns | None,
    order: tuple[int, ...] = ROW_ORDER["ddp"],
) -> int:
    """One rank's event file, 20 steps a batch; ``tail``: the rows of the step it hangs in;
    ``order``: the step's rows as the probe appends them."""
    start, dur = tl.start[:, :, rank], tl.dur[:, :, rank]
    if order != ROW_ORDER["ddp"]:
        start, dur = start[:, order], dur[:, order]
    start, dur = _local_rows(clocks, rank, start.ravel(), dur.ravel())
    ranks = tl.start.shape[2]
    batch = full.batch(rank, start, dur, ranks)
    writer = BatchWriter(events_path(run_dir, rank), rank)
    per = STEPS_PER_BATCH * len(order)
    for at in range(0, batch.num_rows, per):
        writer.write_batch(batch.slice(at, per))
    if tail is not None:
        local = clocks.local(rank, tl.hang_start[:, rank])
        end = clocks.local(rank, tl.hang_start[1:2, rank])  # data ends as the broadcast starts
        writer.write_batch(tail.batch(rank, local, np.array([end[0] - local[0], -1])))
    writer.close()
    return writer.rows_written


# --- the run ---------------------------------------------------------------------------------


def rank_meta(
    rank: int, truth: Truth, clocks: Clocks, end_ns: float, rng: np.random.Generator, **more
) -> RankMeta:
    """``more``: further fields (the 3d layout's groups and pipeline)."""
    hang = truth.hang_rank is not None
    wall = WALL_START_S * 1e9 + rng.uniform(-1 * MS, 1 * MS)  # NTP: within a millisecond
    return RankMeta(
        rank=rank, local_rank=rank % RANKS_PER_NODE, world_size=truth.ranks,
        hostname=truth.host_of(rank), pid=10_000 + rank, num_threads=4,
        wall_minus_perf_ns=round(wall - clocks.local(rank, np.zeros(1))[0]),
        start_time=WALL_START_S, end_time=WALL_START_S + end_ns / 1e9,
        status="interrupted" if hang else "completed", exit_code=None if hang else 0,
        error=HANG_ERROR if hang else None, steps=truth.steps,
        clock=clock_samples(rng, clocks, rank, end_ns), **more,
    )  # fmt: skip


def run_meta(truth: Truth, ranks: dict[str, RankMeta], end_s: float) -> RunMeta:
    nodes = len(truth.hostnames)
    return RunMeta(
        run_id="synthetic", command=["scalescope", "run", "train.py"], script="train.py",
        world_size=truth.ranks, nproc_per_node=min(RANKS_PER_NODE, truth.ranks), nnodes=nodes,
        launcher="elastic" if nodes > 1 else "local", warmup_steps=WARMUP_STEPS,
        hostnames=list(truth.hostnames), start_time=WALL_START_S, end_time=end_s,
        status="interrupted" if truth.hang_rank is not None else "completed", ranks=ranks,
    )  # fmt: skip


def write_run(
    path: Path,
    ranks: int,
    steps: int,
    plant: Plant | str | None = None,
    seed: int = 0,
    drift_ppm: float = 1.0,
    layout: str = "ddp",
    pp: int = 4,
    tp: int = 8,
    micro: int = 8,
) -> Truth:
    """Write a run directory at ``path`` of ``ranks`` x ``steps``; returns what it holds.
    ``pp``, ``tp``, ``micro``: the 3d layout's mesh and microbatches."""
    t0 = time.perf_counter()
    run_dir = Path(path)
    rng = np.random.default_rng(seed)
    if layout == "3d":
        truth = plan_3d(plant, ranks, steps, seed, Mesh.of(ranks, pp, tp, micro))
        return write_3d(run_dir, truth, rng, drift_ppm, t0)
    factors, truth = plan(plant, ranks, steps, seed, layout)
    hang = (truth.hang_rank, truth.hang_step) if truth.hang_rank is not None else None
    tl = simulate(rng, ranks, steps, factors, hang)
    clocks = make_clocks(rng, ranks, drift_ppm)
    order = ROW_ORDER[layout]
    full = Columns.of(truth.steps, order)
    tail = Columns.of(1, HANG_ROWS, first=truth.steps) if hang else None
    rows, metas = 0, {}
    for rank in range(ranks):
        waiting = tail if hang and rank != truth.hang_rank else None
        rows += write_events(run_dir, rank, tl, clocks, full, waiting, order)
        meta = rank_meta(rank, truth, clocks, tl.end_ns, rng)
        write_json_atomic(rank_meta_path(run_dir, rank), meta)
        metas[str(rank)] = meta
    write_json_atomic(run_dir / "run.json", run_meta(truth, metas, WALL_START_S + tl.end_ns / 1e9))
    measured = tl.start[WARMUP_STEPS:]
    step_ms = float(tl.dur[WARMUP_STEPS:, STEP].mean()) / MS if len(measured) else 0.0
    waits = tl.wait_ns / max(len(measured), 1) / MS
    return _with_figures(truth, clocks, step_ms, waits, rows, time.perf_counter() - t0)


def write_3d(
    run_dir: Path, truth: Truth, rng: np.random.Generator, drift_ppm: float, t0: float
) -> Truth:
    """The 3d layout's run: each stage's rows simulated for all its ranks, then each rank's
    file and meta (its mesh groups, its stage)."""
    mesh, blocks = truth.mesh, list(truth.blocks)
    times, end_ns = simulate_3d(rng, mesh, truth.steps, blocks)
    clocks = make_clocks(rng, truth.ranks, drift_ppm)
    columns = [StageColumns.of(t.rows, truth.steps) for t in times]
    rows, metas = 0, {}
    for rank in range(truth.ranks):
        stage, lane = divmod(rank, mesh.lanes)
        st = times[stage]
        start, dur = st.start[:, :, lane].ravel(), st.dur[:, :, lane].ravel()
        batch = columns[stage].batch(rank, mesh, *_local_rows(clocks, rank, start, dur))
        writer = BatchWriter(events_path(run_dir, rank), rank)
        per = STEPS_PER_BATCH * len(st.rows)
        for at in range(0, batch.num_rows, per):
            writer.write_batch(batch.slice(at, per))
        writer.close()
        rows += writer.rows_written
        meta = rank_meta(rank, truth, clocks, end_ns, rng, groups=mesh.groups(rank),
                         pipeline=pipeline_meta(mesh, stage, blocks, st, lane))  # fmt: skip
        write_json_atomic(rank_meta_path(run_dir, rank), meta)
        metas[str(rank)] = meta
    write_json_atomic(run_dir / "run.json", run_meta(truth, metas, WALL_START_S + end_ns / 1e9))
    step = [t.dur[WARMUP_STEPS:, t.at[("step",)]] for t in times]
    step_ms = float(np.mean([s.mean() for s in step])) / MS if truth.steps > WARMUP_STEPS else 0.0
    return _with_figures(truth, clocks, step_ms, np.zeros(0), rows, time.perf_counter() - t0)


def _with_figures(
    truth: Truth, clocks: Clocks, step_ms: float, waits: np.ndarray, rows: int, seconds: float
) -> Truth:
    offsets = np.array([clocks.offset(r, 0.0) for r in range(truth.ranks)]).round()
    return replace(
        truth, step_ms=step_ms, wait_ms_per_step=waits,
        clock_offset_ns=offsets.astype(np.int64), drift_ppm=clocks.drift * 1e6, rows=rows,
        generate_s=seconds,
    )  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--plant", choices=PLANTS)
    p.add_argument("--target", type=int, help="the plant's node, rank or stage (Plant.target)")
    p.add_argument("--factor", type=float, help="the plant's size (Plant.factor)")
    p.add_argument("--from-step", type=int, default=0, help="the plant begins at this step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", choices=LAYOUTS, default="ddp")
    p.add_argument("--pp", type=int, default=4, help="3d layout: pipeline stages")
    p.add_argument("--tp", type=int, default=8, help="3d layout: tensor-parallel ranks")
    p.add_argument("--micro", type=int, default=8, help="3d layout: microbatches a step")
    p.add_argument("--node-files", action="store_true",
                   help="node files of every node, rank files of sampled ranks only "
                        "(synthetic_nodes.py)")  # fmt: skip
    p.add_argument("--sample-every", type=int, default=64,
                   help="--node-files: rank files of local rank 0 of every Nth node and the "
                        "planted ranks; 0: every rank")  # fmt: skip
    args = p.parse_args()
    plant = Plant(args.plant, args.target, args.factor, from_step=args.from_step)
    try:
        if args.node_files:
            from synthetic_nodes import write_scale_run

            truth = write_scale_run(args.path, args.ranks, args.steps,
                                    plant if args.plant else None, args.seed, args.layout,
                                    args.sample_every)  # fmt: skip
        else:
            truth = write_run(args.path, args.ranks, args.steps,
                              plant if args.plant else None, args.seed, layout=args.layout,
                              pp=args.pp, tp=args.tp, micro=args.micro)  # fmt: skip
    except ValueError as exc:
        p.error(str(exc))
    where = truth.slow_node or truth.slow_ranks or truth.slow_link or truth.hang_rank
    where = truth.heavy_stage if where is None else where
    print(f"{args.path}: {truth.ranks} ranks x {truth.steps} steps, {truth.rows:,} rows in "
          f"{truth.generate_s:.1f} s; step {truth.step_ms:.1f} ms")  # fmt: skip
    print(f"plant: {truth.plant or 'none'} {where if where is not None else ''}")


if __name__ == "__main__":
    main()
