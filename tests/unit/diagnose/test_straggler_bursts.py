"""A rank late only every K steps against one slower at every step, through the analysis and
the diagnosis on hand-built runs (tests/helpers/many_ranks.py): the first is a straggler with
its steps and period, never "slower cores"; the second a straggler at every step. The live
runs of the same two (benchmarks/live/test_rank_only_timing.py) are in `make bench`."""

from __future__ import annotations

from analysed import analysed  # noqa: E402
from many_ranks import write_many_ranks_run

from scalescope.diagnose import diagnose_run
from scalescope.events import load_run

CORES_WORDS = ("slower", "shared or slower", "homogeneous")


def findings_of(run_dir):
    run = load_run(run_dir)
    return diagnose_run(run, analysed(run)).findings


def test_a_rank_late_every_5_steps_is_a_straggler_with_its_steps_and_period(tmp_path) -> None:
    run_dir = write_many_ranks_run(
        tmp_path / "run", ranks=2, steps=31, per_node=2, late_every={1: (5, 150.0)}
    )
    found = findings_of(run_dir)
    late = [f for f in found if f.code == "STRAGGLER"]
    assert late and late[0].rank == 1, late
    assert "late only at steps 5, 10, 15, 20, 25, 30 (every 5 steps)" in late[0].summary
    assert not any(words in late[0].summary for words in CORES_WORDS)
    assert not any(f.code.startswith("RANK_ONLY") for f in found)


def test_a_rank_slower_at_every_step_is_a_straggler_without_bursts(tmp_path) -> None:
    run_dir = write_many_ranks_run(tmp_path / "run", ranks=2, steps=24, per_node=2, slow={1: 1.3})
    found = findings_of(run_dir)
    codes = [f.code for f in found]
    assert "STRAGGLER" in codes and not any(c.startswith("RANK_ONLY") for c in codes), codes
    straggler = found[codes.index("STRAGGLER")]
    assert straggler.rank == 1 and "only at steps" not in straggler.summary
