"""Communication fixes restricted to a mesh dimension or a tag (``comm:X@dim:NAME``,
``comm:X@tag:NAME``), on a 2-rank run written by hand whose answer is worked out by hand:
per step, a tensor-parallel all-reduce that rank 1 joins 0.5 ms late (2 ms of transfer after
it) and a ZeRO parameter gather on the world group (3 ms of transfer). Hiding a collective
saves its transfer, not the 0.5 ms rank 0 waits for rank 1; a 2x faster link saves half."""

from __future__ import annotations

from dataclasses import replace

import pytest
from run_builders import coll_row, step_row, write_run_dir

from scalescope.analyze.model.causes import apply_fix, candidate_causes, scope_of
from scalescope.analyze.model.replay import predict
from scalescope.analyze.model.step_grid import build_grid
from scalescope.analyze.model.whatif import what_if
from scalescope.events import RankMeta, RunMeta, load_run
from scalescope.events.run import GroupMeta
from scalescope.events.tags import ZERO_GATHER

MS = 1_000_000
STEPS, STEP_MS = 6, 14
TP_ISSUE_MS = {0: 3.0, 1: 3.5}
TP_DONE_MS, GATHER_MS, GATHER_DONE_MS = 5.5, 10.0, 13.0
"""Both ranks see the tp all-reduce complete 2 ms after rank 1 joins it, and issue the
gather at 10 ms; it completes 3 ms later; the step ends 1 ms after that."""
TP_TRANSFER_MS = TP_DONE_MS - TP_ISSUE_MS[1]
GATHER_TRANSFER_MS = GATHER_DONE_MS - GATHER_MS


def on_group(row: tuple, group: str) -> tuple:
    return (*row[:8], group, *row[9:])


def rank_rows(rank: int) -> list[tuple]:
    rows = []
    for step in range(STEPS):
        t = step * STEP_MS * MS
        issue = t + int(TP_ISSUE_MS[rank] * MS)
        tp = coll_row(step, "all_reduce", issue, t + int(TP_DONE_MS * MS) - issue, 4096, step,
                      tag="user")  # fmt: skip
        rows.append(on_group(tp, "tp0"))
        gather = int(GATHER_TRANSFER_MS * MS)
        start = t + int(GATHER_MS * MS)
        rows.append(coll_row(step, "all_gather", start, gather, 8192, step, tag=ZERO_GATHER))
        rows.append(step_row(step, t, STEP_MS * MS, 4))
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    files = {
        r: RankMeta(rank=r, world_size=2, hostname="vm", status="completed",
                    groups={"tp0": GroupMeta(ranks=[0, 1], dim="tp", backend="gloo")})
        for r in (0, 1)
    }  # fmt: skip
    meta = RunMeta(run_id="scoped", command=["t.py"], script="t.py", world_size=2,
                   warmup_steps=1, hostnames=["vm"], status="completed")  # fmt: skip
    path = tmp_path_factory.mktemp("scoped") / "run"
    return load_run(write_run_dir(path, meta, {r: [rank_rows(r)] for r in (0, 1)}, files))


def gain(run, cause: str) -> float:
    fix = what_if(run, 1, [cause]).fixes[0]
    return fix.gain_ms


def test_the_grid_knows_each_collectives_dimension_and_tag(run):
    grid, _ = build_grid(run)
    assert grid.dims.tolist() == [["tp", "world"]] * 2
    assert grid.tags.tolist() == [["user", "zero_gather_params"]] * 2
    assert predict(grid, "x").step_ms == pytest.approx(STEP_MS)


@pytest.mark.parametrize(
    ("cause", "saved_ms"),
    [
        ("comm:hidden@dim:tp", TP_TRANSFER_MS),
        ("comm:x2@dim:tp", TP_TRANSFER_MS / 2),
        ("comm:4@dim:tp", TP_TRANSFER_MS * 3 / 4),
        ("comm:hidden@tag:zero_gather_params", GATHER_TRANSFER_MS),
        ("comm:hidden@dim:tp,world", TP_TRANSFER_MS + GATHER_TRANSFER_MS),
        ("comm:hidden@dim:tp+comm:hidden@tag:zero_gather_params",
         TP_TRANSFER_MS + GATHER_TRANSFER_MS),
        ("comm:hidden", TP_TRANSFER_MS + GATHER_TRANSFER_MS),
    ],
)  # fmt: skip
def test_a_fix_of_some_collectives_saves_their_transfer_time(run, cause, saved_ms):
    assert gain(run, cause) == pytest.approx(saved_ms)


def test_the_fix_says_what_it_was_restricted_to(run):
    (fix,) = what_if(run, 1, ["comm:x2@dim:tp"]).fixes
    assert fix.note == "comm 2x faster (dim tp)"
    (fix,) = what_if(run, 1, ["comm:hidden@tag:zero_gather_params"]).fixes
    assert fix.note == "no transfer time (tag zero_gather_params)"


def test_the_default_causes_try_the_scopes_with_transfers(run):
    grid, _ = build_grid(run)
    causes = candidate_causes(grid, {})
    assert causes[-3:] == [
        "comm:hidden@dim:tp", "comm:x2@dim:tp", "comm:hidden@tag:zero_gather_params"
    ]  # fmt: skip
    assert "comm:hidden@tag:zero_reduce_grads,zero_gather_params" not in causes


def test_a_tag_names_its_kind_too(run):
    grid, _ = build_grid(run)
    units = grid.tags.astype(object)
    units[:, 1] = ["unshard:layers.0", "unshard:layers.0"]
    scoped = replace(grid, tags=units.astype(str))
    assert scope_of(scoped, "x", "tag:unshard").mask.tolist() == [[False, True]] * 2
    assert scope_of(scoped, "x", "tag:unshard:layers.0").mask.tolist() == [[False, True]] * 2


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        ("comm:hidden@dim:pp", "no replayed collective has the dim 'pp' (dims: tp, world)"),
        ("comm:hidden@tag:zero_reduce_grads,zero_gather_params",
         "no replayed collective has the tag 'zero_reduce_grads'"),
        ("comm:hidden@mesh:tp", "comm:X@dim:NAME or comm:X@tag:NAME"),
        ("comm:hidden@dim:", "comm:X@dim:NAME or comm:X@tag:NAME"),
        ("compute:2@dim:tp", "only comm takes a scope"),
        ("comm:fast@dim:tp", "the speed-up must be a number"),
    ],
)  # fmt: skip
def test_a_bad_scope_is_one_line(run, cause, message):
    grid, _ = build_grid(run)
    with pytest.raises(ValueError, match="^[^\n]*$") as err:
        apply_fix(grid, cause, {})
    assert message in str(err.value)


def test_a_grid_without_tags_refuses_a_tag_scope(run):
    grid, _ = build_grid(run)
    with pytest.raises(ValueError, match="the model has no tags of its collectives"):
        apply_fix(replace(grid, tags=None), "comm:hidden@tag:user", {})
