"""Generated data sets of the analytics workloads, made block by block so each rank makes
only its own shard and any process (a test, a reference) can make the same rows again.

Row ``i`` belongs to block ``i // BLOCK_ROWS``, drawn from a generator seeded by
``(seed, kind, block)``; the parameters every block shares (principal directions, cluster
centres, the true separating plane) come from ``seed`` alone. A shard is therefore the same
rows whatever the number of ranks, and ``make_rows(kind, 0, n, ...)`` is the whole set.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

BLOCK_ROWS = 1024
KINDS = ("pca", "kmeans", "svm")
DTYPE = torch.float64
"""Analytics run in double precision, as the single-process reference does."""


@dataclass(frozen=True)
class Shard:
    """Rows ``start`` to ``stop`` (exclusive) of a data set of ``total`` rows."""

    start: int
    stop: int
    total: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


def shard_of(total: int, rank: int, world_size: int) -> Shard:
    """Contiguous shards whose sizes differ by at most one row."""
    if total < 1:
        raise ValueError(f"a data set needs at least one row, got {total}")
    base, extra = divmod(total, world_size)
    start = rank * base + min(rank, extra)
    return Shard(start, start + base + (1 if rank < extra else 0), total)


def _generator(*keys: int) -> torch.Generator:
    seed = 0
    for key in keys:
        seed = (seed * 1_000_003 + key) % (2**63 - 1)
    return torch.Generator().manual_seed(seed)


@cache
def _shared(kind: str, features: int, classes: int, seed: int) -> torch.Tensor:
    """The parameters every block of a data set shares (cached: never modify the result)."""
    g = _generator(seed, KINDS.index(kind), 1 << 40)
    if kind == "pca":  # a basis with decaying scales: a clear spectrum for the components
        basis, _ = torch.linalg.qr(torch.randn(features, features, generator=g, dtype=DTYPE))
        scales = 0.8 ** torch.arange(features, dtype=DTYPE) * 3.0
        return basis * scales
    if kind == "kmeans":  # well separated centres
        return torch.randn(classes, features, generator=g, dtype=DTYPE) * 6.0
    return torch.randn(features, generator=g, dtype=DTYPE)


def _block(kind: str, block: int, features: int, classes: int, seed: int) -> torch.Tensor:
    """One block of rows; for svm the last column is the label (-1 or 1)."""
    g = _generator(seed, KINDS.index(kind), block)
    shared = _shared(kind, features, classes, seed)
    z = torch.randn(BLOCK_ROWS, features, generator=g, dtype=DTYPE)
    if kind == "pca":
        return z @ shared.T + 1.5
    if kind == "kmeans":
        which = torch.randint(0, classes, (BLOCK_ROWS,), generator=g)
        return shared[which] + z
    margin = z @ shared + 0.3 * torch.randn(BLOCK_ROWS, generator=g, dtype=DTYPE)
    labels = torch.where(margin >= 0, 1.0, -1.0).to(DTYPE)
    return torch.cat([z, labels[:, None]], dim=1)


def make_rows(
    kind: str, start: int, stop: int, features: int, classes: int = 1, seed: int = 0
) -> torch.Tensor:
    """Rows ``start:stop`` of the ``kind`` data set (pca, kmeans, svm)."""
    if kind not in KINDS:
        raise ValueError(f"unknown data set {kind!r}; valid: {', '.join(KINDS)}")
    if not 0 <= start <= stop:
        raise ValueError(f"bad row range {start}:{stop}")
    first, last = start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS
    blocks = [_block(kind, b, features, classes, seed) for b in range(first, last + 1)]
    if not blocks or start == stop:
        return torch.empty(0, features + (kind == "svm"), dtype=DTYPE)
    rows = torch.cat(blocks)
    offset = start - first * BLOCK_ROWS
    return rows[offset : offset + stop - start]
