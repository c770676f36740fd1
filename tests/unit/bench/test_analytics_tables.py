"""Generated analytics data: shards tile the set, any row range is the same rows."""

from __future__ import annotations

import pytest
import torch

from scalescope.bench.tables import BLOCK_ROWS, make_rows, shard_of


@pytest.mark.parametrize("total,world", [(10, 3), (4_000, 2), (5, 8), (BLOCK_ROWS * 3 + 7, 4)])
def test_shards_tile_the_rows_and_differ_by_at_most_one(total, world):
    shards = [shard_of(total, r, world) for r in range(world)]
    assert shards[0].start == 0 and shards[-1].stop == total
    assert all(a.stop == b.start for a, b in zip(shards, shards[1:], strict=False))
    sizes = [s.rows for s in shards]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("kind", ["pca", "kmeans", "svm"])
def test_row_ranges_are_slices_of_the_whole_set(kind):
    total = BLOCK_ROWS * 2 + 100
    whole = make_rows(kind, 0, total, 5, 3, seed=7)
    parts = [
        make_rows(kind, s.start, s.stop, 5, 3, 7) for s in (shard_of(total, r, 3) for r in range(3))
    ]
    assert torch.equal(torch.cat(parts), whole)
    assert whole.shape == (total, 5 + (kind == "svm"))
    assert not torch.equal(make_rows(kind, 0, 50, 5, 3, seed=8), whole[:50])


def test_svm_labels_are_plus_minus_one_and_both_present():
    labels = make_rows("svm", 0, 2_000, 4)[:, -1]
    assert set(labels.tolist()) == {-1.0, 1.0}


def test_bad_kind_and_empty_set_are_refused():
    with pytest.raises(ValueError, match="unknown data set 'iris'"):
        make_rows("iris", 0, 10, 3)
    with pytest.raises(ValueError, match="at least one row"):
        shard_of(0, 0, 2)
