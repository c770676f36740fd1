"""Sorting rows by several integer keys at once."""

from __future__ import annotations

import numpy as np


def packed(cols: list[np.ndarray]) -> np.ndarray | None:
    """The integer columns packed into one int64 key (mixed radix over each column's range),
    in the same order as sorting by the columns in turn; None when their ranges do not fit
    62 bits. Built in place: no int64 copy of each column."""
    lows = [int(c.min()) for c in cols]
    spans = [int(c.max()) - low + 1 for c, low in zip(cols, lows, strict=True)]
    if float(np.prod(np.array(spans, dtype=np.float64))) >= 2.0**62:
        return None
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for c, low, span in zip(cols, lows, spans, strict=True):
        key *= span
        key += c
        key -= low
    return key


def sort_order(*keys: np.ndarray) -> np.ndarray:
    """The order sorting by ``keys[0]``, then ``keys[1]``, ... (``lexsort`` takes them last
    first): one argsort of the packed keys when they fit, several times faster than
    ``lexsort`` on millions of rows."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    key = packed(list(keys))
    if key is None:
        return np.lexsort(tuple(k.astype(np.int64) for k in reversed(keys)))
    return np.argsort(key, kind="stable")


def index_in(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The position in ``sorted_values`` (ascending, unique) of each of ``values``, which
    must all be there: one gather in a lookup table when the values are small non-negative
    integers (rank numbers), else a binary search. On millions of rows the gather is several
    times faster, and the search's needles are cast to the haystack's type first."""
    if len(sorted_values) == 0 or len(values) == 0:
        return np.zeros(len(values), dtype=np.int64)
    low, high = int(sorted_values[0]), int(sorted_values[-1])
    if low >= 0 and high < 4 * len(sorted_values) + 4096:
        lookup = np.zeros(high + 1, dtype=np.int64)
        lookup[sorted_values] = np.arange(len(sorted_values))
        return lookup[values]
    return np.searchsorted(sorted_values, values.astype(sorted_values.dtype, copy=False))


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, ascending: by a count when their range is
    small, else by one sort. Not ``np.unique``: numpy 2.3+ finds them by hashing, which on
    millions of mostly distinct values is ten to twenty times slower than a sort."""
    if len(values) == 0:
        return values[:0]
    low, high = int(values.min()), int(values.max())
    if high - low < 4 * len(values) + (1 << 16):
        present = np.flatnonzero(np.bincount((values - low).astype(np.int64, copy=False)))
        return (present + low).astype(values.dtype)
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]]
