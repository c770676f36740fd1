"""analyze/ranks/links.py: its own pass over the subgroups' rows finds the instances and transfers
that matching.py's ``match_collectives`` finds; the median of a segment's other elements;
which rows it looks at (groups smaller than the world; point to point on 2-rank groups
only); and the cost of a run whose collectives are all on the world group."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.ranks.clocks import align_clocks, aligned_start_ns  # noqa: E402
from scalescope.analyze.ranks.links import (  # noqa: E402
    _instances,
    _median_of_others,
    _subgroups,
    analyze_links,
)
from scalescope.analyze.ranks.matching import match_collectives  # noqa: E402
from scalescope.events import EventTable, load_run  # noqa: E402
from synthetic_run import Plant, write_run  # noqa: E402


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("links") / "run"
    write_run(path, 24, 20, Plant("slow_link", target=0), seed=5, layout="pipeline")
    return load_run(path)


def test_its_instances_are_those_match_collectives_finds(pipeline):
    rows, ranks_in = _subgroups(pipeline)
    clocks = align_clocks(replace(pipeline, events=rows))
    mine = _instances(rows, aligned_start_ns(rows, clocks), ranks_in)
    m = match_collectives(rows, clocks, 50_000)
    assert m is not None and len(mine.first) == m.num_instances == 24 * 20
    theirs = np.maximum.reduceat(m.transfer_ns, m.first)
    step = np.minimum.reduceat(m.step, m.first)
    a, b = np.lexsort((mine.transfer, mine.step)), np.lexsort((theirs, step))
    assert np.array_equal(mine.transfer[a], theirs[b])
    assert np.array_equal(mine.step[a], step[b])
    assert (mine.size == 2).all()


def test_only_groups_smaller_than_the_world_are_looked_at(pipeline):
    rows, ranks_in = _subgroups(pipeline)
    names = set(pipeline.events.names(np.unique(rows.name)))
    assert names == {"send", "recv"}, "the world group's broadcast and all-reduces are left out"
    world = pipeline.events.symbols.id_of("0")
    assert ranks_in[world] == 24 and world not in set(rows.group.tolist())


def test_point_to_point_on_a_larger_group_is_left_out(pipeline):
    """Without the peer rank a send on a group of 3+ ranks (a pipeline group, as Megatron
    uses) cannot be paired with its recv: those rows are left out, the pairs' kept."""
    events = pipeline.events
    table = EventTable(**{c: getattr(events, c).copy() for c in EventTable.COLUMNS},
                       symbols=events.symbols)  # fmt: skip
    p2p = np.isin(table.name, [events.symbols.id_of("send"), events.symbols.id_of("recv")])
    stage = p2p & np.isin(table.rank, [0, 8, 16])
    table.group[stage] = events.symbols.intern("pipeline-stage-0")
    rows, ranks_in = _subgroups(replace(pipeline, events=table))
    assert ranks_in[events.symbols.id_of("pipeline-stage-0")] == 3
    assert not np.isin(rows.rank, [0, 8, 16]).any()
    assert len(np.unique(rows.group)) == 24 - 3, "the pairs of the other local ranks"


def test_the_median_of_the_others_in_each_segment():
    rng = np.random.default_rng(1)
    counts = np.array([1, 2, 3, 4, 7])
    values = np.concatenate([np.sort(rng.integers(0, 100, c)).astype(float) for c in counts])
    start = np.repeat(np.cumsum(np.append(0, counts[:-1])), counts)
    count = np.repeat(counts, counts)
    got = _median_of_others(values, start, count)
    for i in range(len(values)):
        seg = values[start[i] : start[i] + count[i]]
        others = np.delete(seg, i - start[i])
        assert (np.isnan(got[i]) and len(others) == 0) or got[i] == np.median(others)


def test_a_world_group_run_is_left_at_once(tmp_path):
    write_run(tmp_path / "run", 16, 10, Plant("slow_link", target=0))
    assert analyze_links(load_run(tmp_path / "run"), 2) is None


def test_subgroups_that_never_completed_give_nothing_to_compare(pipeline):
    """A hang inside the pairs: every send/recv row unfinished (dur -1)."""
    events = pipeline.events
    table = EventTable(**{c: getattr(events, c).copy() for c in EventTable.COLUMNS},
                       symbols=events.symbols)  # fmt: skip
    p2p = np.isin(table.name, [events.symbols.id_of("send"), events.symbols.id_of("recv")])
    table.dur_ns[p2p] = -1
    assert analyze_links(replace(pipeline, events=table), 2) is None
