"""Group-by over event columns with one sort, no loop over groups or ranks.

Per-group sums, counts, minima and maxima come out of ``bincount`` and ``reduceat`` over rows
sorted by group, so the cost is one ``unique`` whatever the number of groups (ranks, ops,
message sizes): a 1,024-rank run has as many groups as a 2-rank one has rows per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from scalescope.analyze.columns.sorting import distinct, index_in


@dataclass(frozen=True)
class Groups:
    keys: np.ndarray
    """One row per group: its key columns (int64), sorted."""
    index: np.ndarray
    """The group of each input row."""

    def __len__(self) -> int:
        return len(self.keys)

    def key(self, column: int) -> np.ndarray:
        return self.keys[:, column]

    def count(self) -> np.ndarray:
        return np.bincount(self.index, minlength=len(self))

    def sum(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.index, weights=values.astype(np.float64), minlength=len(self))

    @cached_property
    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows in group order (stable), and where each group starts in it: one sort for
        every minimum, maximum and row list asked of these groups."""
        order = np.argsort(self.index, kind="stable")
        return order, np.searchsorted(self.index[order], np.arange(len(self)))

    def _reduce(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        order, starts = self._sorted
        return ufunc.reduceat(values[order], starts)

    def min(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(np.minimum, values)

    def max(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(np.maximum, values)

    def rows_of(self) -> list[np.ndarray]:
        """Each group's row indices (one argsort)."""
        if len(self) == 0:
            return []
        order, starts = self._sorted
        return np.split(order, starts[1:])


DENSE_GROUPS = 1 << 24
"""Combinations of the columns' distinct values counted in an array at most (16 M)."""


def group_by(*columns: np.ndarray) -> Groups:
    """Groups of the distinct combinations of integer columns (rows of equal length), in
    the order of the columns' values.

    Each column becomes codes: the index of its value among the column's distinct values
    (found by hashing, then a lookup). The codes, packed into one integer, are counted in
    an array when their combinations are few (ranks x ops x sizes), so no sort of millions
    of rows is needed; else one sort of the packed codes."""
    cols = [np.asarray(c) for c in columns]
    if len(cols[0]) == 0:
        return Groups(np.zeros((0, len(cols)), dtype=np.int64), np.zeros(0, dtype=np.int64))
    coded = [_codes(c) for c in cols]
    spans = [len(values) for values, _ in coded]
    if float(np.prod(np.array(spans, dtype=np.float64))) >= 2.0**62:
        stacked = np.stack([c.astype(np.int64) for c in cols], axis=1)
        uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
        return Groups(uniq, inverse.reshape(-1))
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for (_, code), span in zip(coded, spans, strict=True):
        key *= span
        key += code
    combos, index = _distinct(key, int(np.prod(spans)))
    digits = np.unravel_index(combos, spans)
    keys = np.stack([values[d] for (values, _), d in zip(coded, digits, strict=True)], axis=1)
    return Groups(keys.astype(np.int64), index)


def _codes(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The column's distinct values (ascending) and each row's index among them."""
    values = distinct(col)
    return values, index_in(values, col)


def _distinct(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (ascending) and each row's index among them."""
    if size > DENSE_GROUPS:
        uniq, inverse = np.unique(key, return_inverse=True)
        return uniq, inverse.reshape(-1)
    present = np.flatnonzero(np.bincount(key, minlength=size))
    lookup = np.zeros(size, dtype=np.int64)
    lookup[present] = np.arange(len(present))
    return present, lookup[key]


@dataclass(frozen=True)
class RankCalls:
    """Per group: how many ranks have rows in it, and the fewest and most rows of one rank."""

    ranks: np.ndarray
    fewest: np.ndarray
    most: np.ndarray


def rank_calls(groups: Groups, rank: np.ndarray) -> RankCalls:
    pairs = group_by(groups.index, rank)
    per_pair = pairs.count()
    owner = group_by(pairs.key(0))
    return RankCalls(ranks=owner.count(), fewest=owner.min(per_pair), most=owner.max(per_pair))
