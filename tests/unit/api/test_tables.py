"""The Recording's tables on every recorded run, each checked against a plain computation on the
raw event rows (a Python pass over the rows and numpy), not against ``report --json``."""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache

import numpy as np
import pytest
from recorded_runs import load_scenario, scenario_names

import scalescope
from scalescope.events import Kind

NAMES = scenario_names()
PHASE_NAMES = ("data", "forward", "backward", "comm_wait", "optimizer")


@cache
def recording(name: str) -> scalescope.Recording:
    return scalescope.load(load_scenario(name).run_dir)


def raw_rows(rec: scalescope.Recording, kind: Kind) -> list[dict]:
    """The event rows of ``kind`` as dicts, strings decoded."""
    ev = rec.run.events
    picked = np.flatnonzero(ev.kind == int(kind))
    sym = ev.symbols
    return [
        {"rank": int(ev.rank[i]), "step": int(ev.step[i]), "name": sym[int(ev.name[i])],
         "dur_ns": int(ev.dur_ns[i]), "nbytes": int(ev.nbytes[i]), "count": int(ev.count[i]),
         "group": sym[int(ev.group[i])], "seq": int(ev.seq[i]), "start_ns": int(ev.start_ns[i])}
        for i in picked
    ]  # fmt: skip


def pause_steps(rec: scalescope.Recording) -> set[int]:
    pauses = rec.analysis.pauses
    return {p.step for p in pauses.pauses} if pauses else set()


def measured_steps(rec: scalescope.Recording) -> dict[tuple[int, int], dict]:
    """(rank, step) -> its first STEP row, for the steps past warm-up that are not pauses
    (every step when none is past warm-up)."""
    first: dict[tuple[int, int], dict] = {}
    for r in raw_rows(rec, Kind.STEP):
        first.setdefault((r["rank"], r["step"]), r)
    warm = rec.run.meta.warmup_steps
    kept = {k: r for k, r in first.items() if k[1] not in pause_steps(rec)}
    past = {k: r for k, r in kept.items() if k[1] >= warm}
    return past or kept


@pytest.mark.parametrize("name", NAMES)
def test_steps_rows_phases_and_samples_match_the_raw_rows(name: str) -> None:
    rec = recording(name)
    table = rec.steps().to_pydict()
    first: dict[tuple[int, int], dict] = {}
    for r in raw_rows(rec, Kind.STEP):
        first.setdefault((r["rank"], r["step"]), r)
    phase_sum: dict[tuple[int, int, str], int] = defaultdict(int)
    for r in raw_rows(rec, Kind.PHASE):
        phase_sum[r["rank"], r["step"], r["name"]] += r["dur_ns"]
    assert list(zip(table["rank"], table["step"], strict=True)) == sorted(first)
    for i, key in enumerate(sorted(first)):
        row = first[key]
        assert table["dur_ns"][i] == row["dur_ns"]
        assert table["samples"][i] == row["count"]
        phases = [phase_sum[(*key, p)] for p in PHASE_NAMES]
        assert [table[f"{p}_ns"][i] for p in PHASE_NAMES] == phases
        assert table["other_ns"][i] == max(row["dur_ns"] - sum(phases), 0)
    measured = {k for k, m in zip(sorted(first), table["measured"], strict=True) if m}
    assert measured == set(measured_steps(rec))


@pytest.mark.parametrize("name", NAMES)
def test_phases_long_form_sums_every_phase_row(name: str) -> None:
    rec = recording(name)
    table = rec.phases().to_pydict()
    rows = raw_rows(rec, Kind.PHASE)
    keys = Counter((r["rank"], r["step"], r["name"]) for r in rows)
    assert len(table["rank"]) == len(keys)
    assert sum(table["rows"]) == len(rows)
    per_phase: dict[str, int] = defaultdict(int)
    for r in rows:
        per_phase[r["name"]] += r["dur_ns"]
    got: dict[str, int] = defaultdict(int)
    for phase, dur in zip(table["phase"], table["dur_ns"], strict=True):
        got[phase] += dur
    assert got == per_phase
    order = [(r, s) for r, s in zip(table["rank"], table["step"], strict=True)]
    assert order == sorted(order)


@pytest.mark.parametrize("name", NAMES)
def test_collectives_one_row_per_call(name: str) -> None:
    rec = recording(name)
    table = rec.collectives().to_pydict()
    rows = raw_rows(rec, Kind.COLLECTIVE)
    assert len(table["rank"]) == len(rows)
    bytes_by_op: dict[str, int] = defaultdict(int)
    for r in rows:
        bytes_by_op[r["name"]] += r["nbytes"]
    got: dict[str, int] = defaultdict(int)
    for op, nbytes in zip(table["op"], table["nbytes"], strict=True):
        got[op] += nbytes
    assert got == bytes_by_op
    assert table["dur_ns"].count(None) == sum(r["dur_ns"] < 0 for r in rows)
    assert table["seq"].count(None) == sum(r["seq"] < 0 for r in rows)


def complete_instances(rec: scalescope.Recording) -> dict[tuple[str, int], set[int]]:
    """(group, seq) -> ranks, for the collectives completed on every rank that recorded
    their group (groups of two ranks or more), outside pause steps."""
    pauses = pause_steps(rec)
    rows = [r for r in raw_rows(rec, Kind.COLLECTIVE) if r["seq"] >= 0 and r["step"] not in pauses]
    group_ranks: dict[str, set[int]] = defaultdict(set)
    done: dict[tuple[str, int], set[int]] = defaultdict(set)
    for r in rows:
        group_ranks[r["group"]].add(r["rank"])
        if r["dur_ns"] >= 0:
            done[r["group"], r["seq"]].add(r["rank"])
    return {
        k: ranks
        for k, ranks in done.items()
        if len(group_ranks[k[0]]) >= 2 and ranks == group_ranks[k[0]]
    }


@pytest.mark.parametrize("name", NAMES)
def test_waits_one_row_per_matched_instance_and_rank(name: str) -> None:
    rec = recording(name)
    table = rec.waits()
    if rec.analysis.cross_rank is None:
        assert table.num_rows == 0
        return
    expected = complete_instances(rec)
    inst = table.column("instance").to_numpy()
    assert len(np.unique(inst)) == len(expected)
    assert table.num_rows == sum(len(r) for r in expected.values())
    if table.num_rows == 0:
        return
    wait = table.column("wait_ns").to_numpy()
    starts = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    assert (wait >= 0).all() and (table.column("transfer_ns").to_numpy() >= 0).all()
    assert (np.minimum.reduceat(wait, starts) == 0).all()  # the last to arrive waits for none
    skew = table.column("skew_ns").to_numpy()
    assert (np.maximum.reduceat(wait, starts) == skew[starts]).all()
    assert (np.add.reduceat(table.column("last").to_numpy().astype(int), starts) <= 1).all()
    warm = rec.run.meta.warmup_steps
    measured = table.column("measured").to_numpy()
    early = np.add.reduceat((table.column("step").to_numpy() < warm).astype(int), starts) > 0
    if rec.analysis.steps and not rec.analysis.steps.warmup_fallback:
        assert not (measured[starts] & early).any()
    assert int(measured[starts].sum()) == rec.analysis.cross_rank.measured_instances


@pytest.mark.parametrize("name", NAMES)
def test_ranks_count_sum_and_average_the_measured_steps(name: str) -> None:
    rec = recording(name)
    table = rec.ranks().to_pydict()
    meta = rec.run.meta
    assert table["rank"] == list(range(meta.world_size))
    per_rank: dict[int, list[dict]] = defaultdict(list)
    for (rank, _), row in measured_steps(rec).items():
        per_rank[rank].append(row)
    for i, rank in enumerate(table["rank"]):
        rows = per_rank.get(rank, [])
        assert table["measured_steps"][i] == len(rows)
        assert table["samples"][i] == sum(r["count"] for r in rows)
        mean = np.mean([r["dur_ns"] for r in rows]) / 1e6 if rows else None
        assert table["mean_step_ms"][i] == pytest.approx(mean)
        own = rec.run.ranks.get(rank)
        if own is not None and own.hostname:
            assert table["host"][i] == own.hostname


@pytest.mark.parametrize("name", NAMES)
def test_phases_carry_their_cpu_time_where_recorded(name: str) -> None:
    """Each (rank, step, phase)'s CPU time: its rows' CPU rows (same rank and start) summed by
    a plain pass; null where one of its rows has none (every row of a run recorded before
    the CPU rows)."""
    rec = recording(name)
    table = rec.phases().to_pydict()
    cpu = {(r["rank"], r["start_ns"]): (r["count"], r["seq"]) for r in raw_rows(rec, Kind.CPU)}
    want: dict[tuple, list] = defaultdict(lambda: [0, 0])
    for r in raw_rows(rec, Kind.PHASE):
        acc = want[r["rank"], r["step"], r["name"]]
        got = cpu.get((r["rank"], r["start_ns"]), (-1, -1))
        for i in (0, 1):
            acc[i] = None if acc[i] is None or got[i] < 0 else acc[i] + got[i]
    keys = zip(table["rank"], table["step"], table["phase"], strict=True)
    for key, process, thread in zip(keys, table["cpu_ns"], table["thread_cpu_ns"], strict=True):
        assert [process, thread] == want[key], key
    assert any(v is not None for v in table["cpu_ns"]) == bool(cpu)
