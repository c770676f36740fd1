"""A real 2-rank FSDP2 run (tests/data/runs/fsdp: ``fully_shard`` on 3 blocks and the root,
gloo), recorded by the probe and by torch.profiler, then a DTensor redistribution and a
functional all-reduce.

Each unit's traffic per step must be what its parameters imply, counted here from the model
itself: the script passes ``reshard_after_forward=True`` to every ``fully_shard``, the root's
too (left at its default, FSDP2 keeps the root gathered after forward), so every unit is
gathered in forward and again in backward, and its gradients reduce-scattered once.
FSDP2 pads each parameter's dim 0 to a multiple of the world size; an all-gather's message is
the whole unit (nccl-tests: what each rank ends with), a reduce-scatter's the whole gradient
(what each rank starts with).
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from pathlib import Path

import pytest
from recorded_runs import load_scenario

from scalescope.events import Kind, load_run
from scalescope.events.tags import tag_kind
from scalescope.ingest import ingest
from scalescope.report.media.timeline import chrome_trace

WORLD, STEPS = 2, 6


SCRIPT = Path(__file__).parents[1] / "e2e" / "scripts" / "fsdp_train.py"


def _script():
    spec = importlib.util.spec_from_file_location("fsdp_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded():
    s = load_scenario("fsdp")
    return s, load_run(s.run_dir)


def unit_bytes(module) -> int:
    """Bytes of a unit's parameters once gathered: each dim 0 padded to the world size."""
    numel = 0
    for p in module.parameters(recurse=True):
        rows = math.ceil(p.shape[0] / WORLD) * WORLD
        numel += rows * math.prod(p.shape[1:])
    return numel * 4  # float32


def expected_per_step(model) -> Counter:
    blocks = {f"blocks.{i}": unit_bytes(b) for i, b in enumerate(model.blocks)}
    root = sum(unit_bytes(m) for m in (model.embed, model.head))
    out: Counter = Counter()
    for unit, nbytes in {**blocks, "root": root}.items():
        out[("all_gather", f"unshard:{unit}", nbytes)] = 2
        out[("reduce_scatter", f"reduce_grads:{unit}", nbytes)] = 1
    return out


def per_step(run, rank: int, step: int, with_tags: bool = True) -> Counter:
    ev = run.events
    coll = ev.select((ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == rank) & (ev.step == step))
    tags = coll.strings("tag") if with_tags else [""] * len(coll)
    return Counter(zip(coll.strings("name"), tags, coll.nbytes.tolist(), strict=True))


def test_each_units_traffic_is_what_its_parameters_imply(recorded) -> None:
    _s, run = recorded
    want = expected_per_step(_script().build_model())
    assert run.problems == []
    for rank in range(WORLD):
        for step in range(STEPS):
            assert per_step(run, rank, step) == want, (rank, step)


def test_every_collective_completed(recorded) -> None:
    _s, run = recorded
    coll = run.events.select(run.events.kind == int(Kind.COLLECTIVE))
    assert len(coll) > 0 and (coll.dur_ns > 0).all()


def test_the_profilers_record_of_the_same_steps_agrees(recorded) -> None:
    s, run = recorded
    traced = ingest(s.folder / "traces")
    assert traced.problems == []
    for rank in range(WORLD):
        for step in s.truth["profiled_steps"]:
            got = per_step(traced.run, rank, step, with_tags=False)
            assert got == per_step(run, rank, step, with_tags=False), (rank, step)


def test_dtensor_and_functional_collectives_are_recorded(recorded) -> None:
    """After the last step: distribute_tensor scatters (one rank's 4x4 part times 2),
    redistribute to Replicate all-gathers the 8x4 tensor, funcol.all_reduce 6 floats."""
    _s, run = recorded
    for rank in range(WORLD):
        assert per_step(run, rank, STEPS) == Counter(
            {
                ("scatter", "user", 128): 1,
                ("all_gather", "user", 128): 1,
                ("all_reduce", "user", 24): 1,
            }
        )


def test_no_finding_says_the_ranks_never_synchronise(recorded) -> None:
    s, run = recorded
    report = (s.folder / "report.txt").read_text()
    assert "no data parallelism" not in report and "never synchronise" not in report
    kinds = {
        tag_kind(t)
        for t in run.events.select(run.events.kind == int(Kind.COLLECTIVE)).strings("tag")
    }
    assert {"unshard", "reduce_grads"} <= kinds


def test_the_timeline_names_each_units_collectives(recorded) -> None:
    _s, run = recorded
    trace = chrome_trace(run, steps=range(STEPS + 1))
    names = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "collective"}
    assert {"all_gather blocks.0", "all_gather root", "reduce_scatter blocks.2"} <= names
    assert "all_reduce" in names, "the functional all-reduce, tagged user, keeps its op name"
