"""The fault matrix's further layouts and faults (benchmarks/faultbench/cases_layouts.py): at
least 12 cases in the matrix, their names unique, their truths in the score's classes and
drawn from the seed; a loop installed beside the venv (DeepSpeed) found there and put on the
ranks' path."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench"
sys.path.insert(0, str(BENCH))
from cases import CLASSES, matrix  # noqa: E402
from cases_layouts import layout_more_cases  # noqa: E402


def test_the_matrix_holds_the_layouts_cases_with_unique_names_and_known_classes() -> None:
    for seed in range(8):
        cases = matrix(seed, 20)
        names = [c.name for c in cases]
        mine = {c.name for c in layout_more_cases(random.Random(seed), 20)}
        assert len(mine) >= 12 and mine <= set(names)
        assert len(names) == len(set(names))
        for c in cases:
            assert c.truth.cause in {*CLASSES.values(), "none"}, c.name
            assert c.script.is_file(), c.name
            if c.name in mine:
                assert c.truth.culprit is not None and c.truth.size in ("clear", "marginal")
                assert c.fault and not set(c.fault) & {"--steps", "--step-log", "--work-log"}


def test_the_faults_ranks_are_drawn_from_the_seed() -> None:
    drawn = set()
    for seed in range(8):
        cases = {c.name: c for c in layout_more_cases(random.Random(seed), 20)}
        drawn.add(tuple(c.truth.culprit for c in cases.values()))
        for c in cases.values():
            if "--sleep-rank" in c.fault:
                rank = c.fault[c.fault.index("--sleep-rank") + 1]
                assert c.truth.culprit == f"rank:{rank}", c.name
        assert cases["ds-zero3-clear"].needs == "deepspeed"
        assert cases["gpt-rank0-checkpoint"].fixed == "phase:checkpoint"
    assert len(drawn) > 1


def test_a_loop_beside_the_venv_is_found_there_and_put_on_the_ranks_path(
    tmp_path, monkeypatch
) -> None:
    import run

    case = next(c for c in layout_more_cases(random.Random(1), 20) if c.needs == "deepspeed")
    case = replace(case, needs="a_loop_beside")
    monkeypatch.setattr(run, "BESIDE", {"a_loop_beside": (tmp_path / "none", tmp_path)})
    assert run.missing(case) and run.arm_env(case) is None
    (tmp_path / "a_loop_beside").mkdir()
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    assert not run.missing(case)
    assert run.arm_env(case)["PYTHONPATH"].split(":") == [str(tmp_path), "/somewhere"]
