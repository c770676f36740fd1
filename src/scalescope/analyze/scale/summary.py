"""The analysis of a run from its node files (issue 50): which runs get it, and its results.

A run is analysed from its node files when it has them (``node_events/nodes.json``) and
either has more than ``RANKS_FROM_NODE_FILES`` ranks or lacks some rank's rank file: the
rank files of every rank would not fit in memory, or are not all there. Everything else is
analysed from the rank files as before (analyze/summary.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scalescope.analyze.scale.late_nodes import LateNode, late_nodes, node_figures
from scalescope.analyze.scale.node_replay import NodeGain, node_gains
from scalescope.analyze.scale.scan import scan
from scalescope.analyze.scale.slow_links import ScaleLink, slow_links
from scalescope.events.files import events_path
from scalescope.events.node_file import has_node_files, read_manifest
from scalescope.events.run import load_meta

RANKS_FROM_NODE_FILES = 4096
"""Beyond this many ranks a run with node files is analysed from them (4,096 ranks' rows
took 5.5 GiB: docs/many-ranks.md); below, only when most of its rank files are missing (a
sampled run): a run that lost a rank's file reports from the others', in detail."""


def from_node_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` is analysed from its node files."""
    if not has_node_files(run_dir):
        return False
    meta = load_meta(run_dir)
    if meta.world_size > RANKS_FROM_NODE_FILES:
        return True
    present = sum(events_path(run_dir, r).is_file() for r in range(meta.world_size))
    return 2 * present < meta.world_size


@dataclass(frozen=True)
class ScaleAnalysis:
    """A run analysed from its node files."""

    path: Path
    world_size: int
    hosts: tuple[str, ...]
    warmup_steps: int
    sampled_steps: int
    """Steps of the node matrices (evenly spaced over the measured ones)."""
    rank_steps: np.ndarray
    """Per rank: measured steps."""
    rank_step_ms: np.ndarray
    """Per rank: mean measured step (nan: none)."""
    node_busy_ms: np.ndarray
    """Per node: mean busy time per sampled step."""
    late_nodes: list[LateNode] = field(default_factory=list)
    late_ranks: list[LateNode] = field(default_factory=list)
    links: list[ScaleLink] = field(default_factory=list)
    rank_files: tuple[int, ...] = ()
    """The ranks whose rank files are in the run (their detail: ``report --rank``)."""
    gains: dict[int, NodeGain] = field(default_factory=dict)
    """The late nodes' (and late ranks' nodes') what-if: the sampled steps replayed with
    the node at the median node's pace (node_replay.py), by node index."""
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """The sampled steps of the node matrices."""
    node_step_ms: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    """(nodes, sampled steps): the node's ranks' mean step (nan: none)."""
    node_busy_steps_ms: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    """(nodes, sampled steps): the node's busy time (``node_busy_ms`` per step)."""
    command: tuple[str, ...] = ()
    """The run's command line (run.json)."""

    @property
    def rank_steps_range(self) -> tuple[int, int]:
        return (int(self.rank_steps.min()), int(self.rank_steps.max()))

    @property
    def rank_step_spread(self) -> dict[str, float] | None:
        return spread(self.rank_step_ms)

    @property
    def node_busy_spread(self) -> dict[str, float] | None:
        return spread(self.node_busy_ms)

    @property
    def step_ms(self) -> float:
        """The median over ranks of their mean measured step."""
        seen = self.rank_step_ms[np.isfinite(self.rank_step_ms)]
        return float(np.median(seen)) if len(seen) else float("nan")


def spread(values: np.ndarray) -> dict[str, float] | None:
    """min, p10, p50, p90 and max of the finite values (None: none)."""
    seen = values[np.isfinite(values)]
    if not len(seen):
        return None
    p = np.percentile(seen, [0, 10, 50, 90, 100])
    return dict(zip(("min", "p10", "p50", "p90", "max"), map(float, p), strict=True))


def analyse_node_files(run_dir: Path) -> ScaleAnalysis:
    """The run at ``run_dir`` from its node files, one node's window at a time."""
    meta = load_meta(run_dir)
    manifest = read_manifest(run_dir)
    warmup = meta.warmup_steps or 0
    s = scan(run_dir, manifest, warmup)
    figures = node_figures(s)
    nodes, ranks = late_nodes(s, figures)
    with np.errstate(invalid="ignore", divide="ignore"):
        step_ms = s.rank_step_ns / s.rank_steps / 1e6
        busy = np.nanmean(figures.busy_ms, axis=1) if figures.busy_ms.size else np.zeros(0)
    late = {n.node for n in nodes + ranks}
    gains = {g.node: g for g in node_gains(s) if g.node in late}
    kept = tuple(sorted(int(k) for k in meta.ranks if events_path(run_dir, int(k)).is_file()))
    return ScaleAnalysis(Path(run_dir), manifest.world_size,
                         tuple(e.host for e in manifest.nodes), warmup, len(s.steps),
                         s.rank_steps, step_ms, busy, nodes, ranks, slow_links(s),
                         kept, gains, s.steps, (s.node_step_ns / 1e6).astype(np.float32),
                         figures.busy_ms.astype(np.float32), tuple(meta.command or ()))  # fmt: skip
