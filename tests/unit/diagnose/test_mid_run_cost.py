"""A cause that began mid-run is costed on the steps since its onset, with the onset named
(diagnose/engine.py ``replayed_savings``, whatif.py): a written run of two ranks and 30
steps in which rank 1's forward takes 50 ms longer from step 12 on, the others waiting for it
in the gradients' all-reduce."""

from __future__ import annotations

import pytest
from analysed import analysed
from run_builders import coll_row, phase_row, step_row, write_run_dir

from scalescope.diagnose.engine import diagnose_run
from scalescope.events import RankMeta, RunMeta, load_run

MS = 1_000_000
STEPS, ONSET = 30, 12
FORWARD_MS, SLOWER_MS, BACKWARD_MS, TRANSFER_MS = 30, 50, 40, 2


def forward_ms(rank: int, step: int) -> int:
    return FORWARD_MS + (SLOWER_MS if rank == 1 and step >= ONSET else 0)


def rows(rank: int) -> list[tuple]:
    out, t = [], 0
    for step in range(STEPS):
        slowest = max(forward_ms(r, step) for r in (0, 1)) + BACKWARD_MS
        forward = forward_ms(rank, step)
        issued = forward + BACKWARD_MS
        done = slowest + TRANSFER_MS
        out += [
            phase_row(step, "forward", t * MS, forward * MS),
            phase_row(step, "backward", (t + forward) * MS, BACKWARD_MS * MS),
            phase_row(step, "comm_wait", (t + issued) * MS, (done - issued) * MS),
            coll_row(step, "all_reduce", (t + issued) * MS, (done - issued) * MS, 4096, step),
            step_row(step, t * MS, (done + 1) * MS, 8),
        ]
        t += done + 1
    return out


@pytest.fixture(scope="module")
def mid_run(tmp_path_factory):
    files = {r: RankMeta(rank=r, world_size=2, hostname="vm", status="completed") for r in (0, 1)}
    meta = RunMeta(run_id="mid", command=["t.py"], script="t.py", world_size=2, warmup_steps=1,
                   hostnames=["vm"], status="completed", probe=True)  # fmt: skip
    path = tmp_path_factory.mktemp("mid") / "run"
    return load_run(write_run_dir(path, meta, {r: [rows(r)] for r in (0, 1)}, files))


def test_a_rank_slowed_from_step_12_costs_what_the_slow_steps_lose(mid_run):
    """50 ms a step since step 12, not the ~31 ms of its 18 slow steps averaged over the 29
    measured ones; the finding and the verdict name the onset."""
    diagnosis = diagnose_run(mid_run, analysed(mid_run))
    straggler = next(f for f in diagnosis.findings if f.code == "STRAGGLER")
    assert straggler.rank == 1
    assert straggler.since_step == ONSET
    assert straggler.saved_ms_per_step == pytest.approx(SLOWER_MS, abs=1.0)
    assert straggler.basis == "replayed without it: began at step 12: as in steps 3-11"
    cost = diagnosis.verdict.top.cost
    assert (cost.since_step, cost.replayed) == (ONSET, True)
    assert "(~50 ms/step to gain since step 12, replayed)" in diagnosis.verdict.line
