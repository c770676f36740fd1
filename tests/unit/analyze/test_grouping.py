"""Group-by with one sort against a plain Python grouping of the same rows."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scalescope.analyze.columns import grouping
from scalescope.analyze.columns.grouping import group_by, rank_calls
from scalescope.analyze.columns.sorting import distinct, index_in


def naive(*columns: np.ndarray) -> dict[tuple[int, ...], list[int]]:
    out: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        out[key].append(i)
    return out


@pytest.mark.parametrize("counted", [True, False], ids=["counted", "sorted"])
@pytest.mark.parametrize("huge", [False, True], ids=["small", "huge"])
def test_groups_sums_extremes_and_rows_match_a_plain_grouping(
    huge: bool, counted: bool, monkeypatch
) -> None:
    """Groups counted in an array, or sorted when their combinations are too many, and
    values of any range, as a plain loop over the rows groups them."""
    if not counted:
        monkeypatch.setattr(grouping, "DENSE_GROUPS", 0)
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, 400)
    b = rng.integers(0, 2**40 if huge else 50, 400)
    b[:50] = b[50]  # repeated keys even when the range is huge
    values = rng.integers(0, 1000, 400)
    g = group_by(a, b)
    want = naive(a, b)
    assert [tuple(k) for k in g.keys.tolist()] == sorted(want)
    for i, rows in enumerate(g.rows_of()):
        key = tuple(g.keys[i].tolist())
        assert rows.tolist() == want[key]
        assert g.sum(values)[i] == values[rows].sum() and g.count()[i] == len(rows)
        assert g.min(values)[i] == values[rows].min() and g.max(values)[i] == values[rows].max()


def test_rank_calls_counts_ranks_and_their_fewest_and_most_rows() -> None:
    op = np.array([0, 0, 0, 0, 1, 1])
    rank = np.array([0, 0, 1, 2, 5, 5])
    per = rank_calls(group_by(op), rank)
    assert per.ranks.tolist() == [3, 1]
    assert per.fewest.tolist() == [1, 2] and per.most.tolist() == [2, 2]


def test_no_rows_no_groups() -> None:
    g = group_by(np.zeros(0), np.zeros(0))
    assert len(g) == 0 and g.rows_of() == [] and g.count().tolist() == []


@pytest.mark.parametrize("values", [[0, 1, 2, 3], [3, 7, 100], [-5, 2, 9], [10**12, 10**12 + 3]])
def test_index_in_finds_each_value_as_a_binary_search_does(values: list[int]) -> None:
    haystack = np.array(values, dtype=np.int64)
    needles = (
        np.random.default_rng(1)
        .choice(haystack, 1000)
        .astype(np.int32 if values[-1] < 2**31 else np.int64)
    )
    np.testing.assert_array_equal(index_in(haystack, needles), np.searchsorted(haystack, needles))
    assert len(index_in(haystack, needles[:0])) == 0


@pytest.mark.parametrize("high", [50, 2**40], ids=["counted", "sorted"])
def test_distinct_is_the_sorted_set_of_values(high: int) -> None:
    values = np.random.default_rng(2).integers(-7, high, 3000)
    got = distinct(values)
    assert got.tolist() == sorted(set(values.tolist())) and got.dtype == values.dtype
    assert len(distinct(values[:0])) == 0
