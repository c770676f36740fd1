"""The synthetic run at scale: node files for every node (events/node_file.py), rank files
only for sampled and planted ranks (issue 50, item 4).

The steps are simulated as ``synthetic_run.simulate`` does (the same ``_step``, the same draws
in the same order), ``CHUNK_STEPS`` at a time so that 65,536 ranks fit in memory; each chunk's
node summaries are reduced for all nodes at once (numpy over (steps, nodes, ranks of a node))
and appended to every node's open window files. ``tests/unit/events/test_node_files.py`` checks
this fast path against ``events.node_stats.build_node_files`` over the same run's rank files.

    .venv/bin/python benchmarks/synthetic_run.py /tmp/scale-runs/a --ranks 16384 \
        --node-files --sample-every 64 --plant slow_node
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from scalescope.events.files import node_file_path, rank_meta_path
from scalescope.events.node_file import (
    COLLS_SCHEMA,
    STEPS_SCHEMA,
    NodeEntry,
    NodeFileWriter,
    NodeManifest,
    write_manifest,
)
from scalescope.events.node_stats import size_class
from scalescope.events.run import events_path, write_json_atomic
from synthetic_run import (
    AR2,
    GAP_NS,
    MS,
    RANKS_PER_NODE,
    RECV,
    ROW_ORDER,
    SEND,
    STEP,
    STEPS_PER_BATCH,
    TEMPLATE,
    WALL_START_S,
    WARMUP_STEPS,
    BatchWriter,
    Clocks,
    Columns,
    Plant,
    Truth,
    _step,
    make_clocks,
    pair_groups,
    plan,
    rank_meta,
    run_meta,
)

CHUNK_STEPS = 50
WINDOW_STEPS = 500
"""Steps of one node file (the relay's window); a multiple of ``CHUNK_STEPS``."""


@dataclass(frozen=True)
class Key:
    """One (group, op, size class) of a node's step: the rows it sums, at which ranks of the
    node (a pair group's rows: one rank's)."""

    group: str
    op: str
    cls: int
    rows: tuple[int, ...]
    local: tuple[int, ...]


def node_keys(node: int, ranks: int, layout: str) -> list[Key]:
    """The node's keys of a step in one order for every node (the world group's, then each
    local rank's send, then its recv); ``key_order`` sorts them as the node file does."""
    by: dict[tuple[str, str, int], list[int]] = {}
    for row in ROW_ORDER[layout]:
        name, kind, nbytes, *_, group, _seq, _tag = TEMPLATE[row]
        if kind == 1 and group == "0":
            by.setdefault(("0", name, int(size_class(np.array([nbytes]))[0])), []).append(row)
    keys = [Key(g, o, c, tuple(rows), tuple(range(RANKS_PER_NODE)))
            for (g, o, c), rows in sorted(by.items())]  # fmt: skip
    if layout == "pipeline":
        cls = int(size_class(np.array([TEMPLATE[SEND][2]]))[0])
        pairs = [pair_groups(node * RANKS_PER_NODE + lr, ranks) for lr in range(RANKS_PER_NODE)]
        keys += [Key(to, "send", cls, (SEND,), (lr,)) for lr, (to, _) in enumerate(pairs)]
        keys += [Key(frm, "recv", cls, (RECV,), (lr,)) for lr, (_, frm) in enumerate(pairs)]
    return keys


def key_order(keys: list[Key]) -> list[int]:
    """The positions of ``keys`` in the node file's order: by group, op and size class."""
    return sorted(range(len(keys)), key=lambda i: (keys[i].group, keys[i].op, keys[i].cls))


def _local(clocks: Clocks, true_ns: np.ndarray) -> np.ndarray:
    """(..., ranks) true times to each rank's clock, as ``Clocks.local`` does one rank's."""
    return (clocks.base + true_ns * (1.0 + clocks.drift)).round().astype(np.int64)


@dataclass
class Chunk:
    """Local-clock times of a chunk of steps, (steps, rows, ranks), and arrivals."""

    first: int
    start: np.ndarray
    end: np.ndarray
    arrive: np.ndarray


def chunk_of(first: int, start: np.ndarray, dur: np.ndarray, clocks: Clocks, last_end: dict):
    """A chunk's local times and each call's arrival (its issue, or its previous call on the
    group's completion; ``last_end``: each group row's last completion, carried over)."""
    local_start = _local(clocks, start)
    local_end = _local(clocks, start + dur)
    arrive = local_start.copy()
    order = [r for r in ROW_ORDER["pipeline"] if r < start.shape[1]]
    for s in range(start.shape[0]):
        for row in order:
            name, kind, *_rest = TEMPLATE[row]
            if kind != 1:
                continue
            chan = "0" if row not in (SEND, RECV) else str(row)
            prev = last_end.get(chan)
            if prev is not None:
                arrive[s, row] = np.maximum(local_start[s, row], prev)
            last_end[chan] = local_end[s, row]
    return Chunk(first, local_start, local_end, arrive)


def _take(a: np.ndarray, pick: tuple, rank: np.ndarray) -> np.ndarray:
    """(steps, rows, ranks) -> (steps, nodes, width x rows), each node's ranks major."""
    v = a[pick][:, :, rank]  # (steps, rows, nodes, width)
    return v.transpose(0, 2, 3, 1).reshape(v.shape[0], v.shape[2], -1)


def _reduce(c: Chunk, keys: list[list[Key]], nodes: int) -> dict[str, np.ndarray]:
    """Every column of the ``colls`` rows, (steps, nodes, keys a node)."""
    n_steps, _, ranks = c.start.shape
    step_start = c.start[:, STEP, :]
    out: dict[str, list[np.ndarray]] = {}
    d_all, t_all = c.end - c.start, c.end - c.arrive
    a_all = c.arrive - step_start[:, None, :]
    for j in range(len(keys[0])):
        rows = keys[0][j].rows
        local = np.array([k[j].local for k in keys])  # (nodes, width)
        rank = np.arange(nodes)[:, None] * RANKS_PER_NODE + local
        pick = (slice(None), list(rows))
        dur, tr, arr = (_take(x, pick, rank) for x in (d_all, t_all, a_all))
        nbytes = np.array([TEMPLATE[r][2] for r in rows], np.int64)
        last = arr.argmax(axis=2)
        cols = {"ranks": np.full((n_steps, nodes), local.shape[1]),
                "calls": np.full((n_steps, nodes), arr.shape[2]),
                "bytes": np.full((n_steps, nodes), int(nbytes.sum()) * local.shape[1]),
                "call_sum_ns": dur.sum(axis=2), "call_max_ns": dur.max(axis=2),
                "transfer_min_ns": tr.min(axis=2), "arrive_min_ns": arr.min(axis=2),
                "arrive_max_ns": arr.max(axis=2), "arrive_sum_ns": arr.sum(axis=2),
                "last_rank": np.take_along_axis(
                    np.broadcast_to(np.repeat(rank, len(rows), axis=1), arr.shape),
                    last[..., None], 2)[..., 0]}  # fmt: skip
        for name, v in cols.items():
            out.setdefault(name, []).append(v)
    return {name: np.stack(v, axis=2) for name, v in out.items()}


class NodeWriters:
    """Every node's two files of the current window, open."""

    def __init__(self, run_dir: Path, nodes: int, layout: str, ranks: int) -> None:
        self.run_dir, self.nodes, self.layout, self.ranks = run_dir, nodes, layout, ranks
        self.keys = [node_keys(n, ranks, layout) for n in range(nodes)]
        self.perm = np.array([key_order(ks) for ks in self.keys], np.int64)  # (nodes, keys)
        labels = sorted({k.group for ks in self.keys for k in ks})
        self.labels = pa.array(labels, pa.string())
        code = {g: i for i, g in enumerate(labels)}
        group = np.array([[code[k.group] for k in ks] for ks in self.keys], np.int32)
        self.group_code = np.take_along_axis(group, self.perm, 1)
        ops = sorted({k.op for k in self.keys[0]})
        self.ops = pa.array(ops, pa.string())
        op = np.array([[ops.index(k.op) for k in ks] for ks in self.keys], np.int32)
        self.op_code = np.take_along_axis(op, self.perm, 1)
        cls = np.array([[k.cls for k in ks] for ks in self.keys], np.int8)
        self.cls = np.take_along_axis(cls, self.perm, 1)
        self.open: list[tuple[NodeFileWriter, NodeFileWriter]] = []
        self.windows: list[int] = []

    def start_window(self, first: int) -> None:
        self.close()
        self.windows.append(first)
        self.open = [(NodeFileWriter(node_file_path(self.run_dir, first, n, "steps"), "steps"),
                      NodeFileWriter(node_file_path(self.run_dir, first, n, "colls"), "colls"))
                     for n in range(self.nodes)]  # fmt: skip

    def write(self, c: Chunk, samples: int) -> None:
        n_steps, _, ranks = c.start.shape
        steps = self._steps(c, samples)
        colls = self._colls(c)
        per_s, per_c = n_steps * RANKS_PER_NODE, n_steps * self.perm.shape[1]
        for n, (ws, wc) in enumerate(self.open):
            ws.write(steps.slice(n * per_s, per_s))
            wc.write(colls.slice(n * per_c, per_c))

    def _steps(self, c: Chunk, samples: int) -> pa.RecordBatch:
        n_steps, _, ranks = c.start.shape

        def node_major(a: np.ndarray) -> np.ndarray:  # (steps, ranks) -> node, step, rank
            return a.reshape(n_steps, -1, RANKS_PER_NODE).transpose(1, 0, 2).ravel()

        step = np.broadcast_to(np.arange(c.first, c.first + n_steps)[:, None], (n_steps, ranks))
        rank = np.broadcast_to(np.arange(ranks), (n_steps, ranks))
        start, end = c.start[:, STEP], c.end[:, STEP]
        cols = [node_major(rank).astype(np.int32), node_major(step).astype(np.int32),
                node_major(start), node_major(end - start),
                np.full(step.size, samples)]  # fmt: skip
        return pa.RecordBatch.from_arrays([pa.array(v) for v in cols], schema=STEPS_SCHEMA)

    def _colls(self, c: Chunk) -> pa.RecordBatch:
        cols = _reduce(c, self.keys, self.nodes)
        cols = {n: np.take_along_axis(v, self.perm[None], 2) for n, v in cols.items()}
        n_steps = cols["calls"].shape[0]

        def node_major(a: np.ndarray) -> np.ndarray:  # (steps, nodes, keys) -> node, step, key
            return np.ascontiguousarray(a.transpose(1, 0, 2)).ravel()

        step = np.broadcast_to(np.arange(c.first, c.first + n_steps)[:, None, None],
                               cols["calls"].shape)  # fmt: skip
        shape = cols["calls"].shape

        def per_node(a: np.ndarray) -> np.ndarray:
            return node_major(np.broadcast_to(a[None], shape))

        arrays = {"step": pa.array(node_major(step).astype(np.int32)),
                  "group": self.labels.take(pa.array(per_node(self.group_code))),
                  "op": self.ops.take(pa.array(per_node(self.op_code))),
                  "size_class": pa.array(per_node(self.cls))}  # fmt: skip
        for f in list(COLLS_SCHEMA)[4:]:
            arrays[f.name] = pa.array(node_major(cols[f.name]).astype(f.type.to_pandas_dtype()))
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in COLLS_SCHEMA],
                                          schema=COLLS_SCHEMA)  # fmt: skip

    def close(self) -> None:
        for ws, wc in self.open:
            ws.close()
            wc.close()
        self.open = []


def sampled_ranks(truth: Truth, every: int) -> list[int]:
    """Local rank 0 of every ``every``-th node, and the planted ranks (a slow link: the first
    rank of each end); every rank when ``every`` is 0."""
    if every <= 0:
        return list(range(truth.ranks))
    picked = set(range(0, truth.ranks, every * RANKS_PER_NODE)) | set(truth.slow_ranks)
    if truth.slow_link is not None:
        picked |= {truth.hostnames.index(h) * RANKS_PER_NODE for h in truth.slow_link}
    return sorted(picked)


def write_scale_run(
    path: Path,
    ranks: int,
    steps: int,
    plant: Plant | str | None = None,
    seed: int = 0,
    layout: str = "ddp",
    sample_every: int = 64,
    drift_ppm: float = 1.0,
) -> Truth:
    """Node files of every node and rank files of ``sampled_ranks``; returns the truth."""
    t0 = time.perf_counter()
    run_dir = Path(path)
    if layout not in ("ddp", "pipeline") or ranks % RANKS_PER_NODE:
        raise ValueError(f"node files: the ddp or pipeline layout, whole nodes of "
                         f"{RANKS_PER_NODE} ranks")  # fmt: skip
    factors, truth = plan(plant, ranks, steps, seed, layout)
    if truth.hang_rank is not None:
        raise ValueError("node files: no hang plant")
    rng = np.random.default_rng(seed)
    clocks = make_clocks(np.random.default_rng(seed + 2_000_003), ranks, drift_ppm)
    nodes = ranks // RANKS_PER_NODE
    writers = NodeWriters(run_dir, nodes, layout, ranks)
    keep = sampled_ranks(truth, sample_every)
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    last_end: dict = {}
    t = 500 * MS + rng.uniform(0, 20 * MS, ranks)
    prev_end, wait_ns, step_sum = np.zeros(ranks), np.zeros(ranks), 0.0
    for first in range(0, steps, CHUNK_STEPS):
        n = min(CHUNK_STEPS, steps - first)
        start = np.zeros((n, len(ROW_ORDER[layout]), ranks))
        dur = np.zeros_like(start)
        for s in range(n):
            start[s], dur[s], wait = _step(rng, t, prev_end, factors.at(first + s), ranks)
            if first + s >= WARMUP_STEPS:
                wait_ns += wait
                step_sum += float(dur[s, STEP].mean())
            prev_end = start[s, AR2] + dur[s, AR2]
            t = start[s, STEP] + dur[s, STEP] + rng.uniform(*GAP_NS, ranks)
        if first % WINDOW_STEPS == 0:
            writers.start_window(first)
        writers.write(chunk_of(first, start, dur, clocks, last_end), TEMPLATE[STEP][3])
        kept.append((start[:, :, keep], dur[:, :, keep]))
    writers.close()
    end_ns = float(t.max()) + 200 * MS
    write_manifest(run_dir, NodeManifest(
        window_steps=WINDOW_STEPS, windows=writers.windows, world_size=ranks,
        nodes=[NodeEntry(node=n, host=truth.hostnames[n],
                         ranks=list(range(n * RANKS_PER_NODE, (n + 1) * RANKS_PER_NODE)))
               for n in range(nodes)]))  # fmt: skip
    rows = _rank_files(run_dir, truth, clocks, keep, kept, layout, end_ns)
    measured = max(steps - WARMUP_STEPS, 1)
    return replace(
        truth,
        step_ms=step_sum / measured / MS,
        rows=rows,
        wait_ms_per_step=wait_ns / measured / MS,
        generate_s=time.perf_counter() - t0,
    )


def _rank_files(run_dir: Path, truth: Truth, clocks: Clocks, keep: list[int], kept: list,
                layout: str, end_ns: float) -> int:  # fmt: skip
    """The kept ranks' files and metas, and run.json naming only them."""
    start = np.concatenate([s for s, _ in kept])
    dur = np.concatenate([d for _, d in kept])
    order = list(ROW_ORDER[layout])
    full = Columns.of(truth.steps, tuple(order))
    rng = np.random.default_rng(0)
    rows, metas = 0, {}
    for i, rank in enumerate(keep):
        s, d = start[:, order, i].ravel(), dur[:, order, i].ravel()
        local_start = clocks.local(rank, s)
        batch = full.batch(rank, local_start, clocks.local(rank, s + d) - local_start,
                           truth.ranks)  # fmt: skip
        writer = BatchWriter(events_path(run_dir, rank), rank)
        per = STEPS_PER_BATCH * len(order)
        for at in range(0, batch.num_rows, per):
            writer.write_batch(batch.slice(at, per))
        writer.close()
        rows += writer.rows_written
        meta = rank_meta(rank, truth, clocks, end_ns, rng)
        write_json_atomic(rank_meta_path(run_dir, rank), meta)
        metas[str(rank)] = meta
    write_json_atomic(run_dir / "run.json", run_meta(truth, metas, WALL_START_S + end_ns / 1e9))
    return rows
