"""A rank's own time per phase when its wait in a collective outlasts the phase it was
issued in: a tensor-parallel all-reduce DTensor issues in forward and waits for after it
(the fault matrix's fsdp-tp case: rank 0 issued it 0.5 ms into a 0.8 ms forward and waited
36 ms for its slow peer, all counted as its own busy time)."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.steps.step_slots import OTHER, OWN_PHASES, StepSlots
from scalescope.events import PHASES


def _slots(forward_ms: float, wait_ms: float, step_ms: float) -> StepSlots:
    phases = {p: np.zeros(1) for p in PHASES}
    phases["forward"] = np.array([forward_ms * 1e6])
    phases["backward"] = np.array([2e6])
    return StepSlots(
        keys=np.array([0]), rank=np.array([0]), dur_ns=np.array([step_ms * 1e6]),
        samples=np.array([8]), phase_ns=phases, ranks=np.array([0]),
        sync_wait_ns={"forward": np.array([wait_ms * 1e6])},
    )  # fmt: skip


def test_the_wait_that_outlasts_its_phase_is_taken_from_the_time_outside_the_phases() -> None:
    slots = _slots(forward_ms=0.8, wait_ms=36.0, step_ms=40.0)
    assert slots.own_ns("forward")[0] == 0.0
    assert slots.own_ns(OTHER)[0] / 1e6 == np.float64(40.0 - 0.8 - 2.0 - (36.0 - 0.8))
    busy = slots.own_ms_per_step(OWN_PHASES)[0]
    assert abs(busy - (40.0 - 36.0)) < 1e-9  # the step less the wait, wherever it fell


def test_a_wait_within_its_phase_is_taken_from_that_phase_alone() -> None:
    slots = _slots(forward_ms=10.0, wait_ms=4.0, step_ms=20.0)
    assert slots.own_ns("forward")[0] / 1e6 == 6.0
    assert slots.own_ns(OTHER)[0] / 1e6 == 20.0 - 10.0 - 2.0
    assert abs(slots.own_ms_per_step(OWN_PHASES)[0] - 16.0) < 1e-9


def test_a_wait_neither_its_phase_nor_the_time_outside_can_hold_comes_off_the_rest() -> None:
    """A summarised cell's waits are placed at its calls' mean arrival: FSDP2's root unshard,
    in forward and again in backward, put the peer's 38 ms wait of backward in a 4 ms
    forward, with 2.8 ms outside the phases (held-out seed 4911's fsdp-backward-clear). The
    whole own time the what-if reads of summarised steps is the step less the wait; each
    phase's stays as its own rows say, and so does the sum of the phases' (matched rows)."""
    phases = {p: np.zeros(1) for p in PHASES}
    phases["forward"], phases["backward"] = np.array([4.0e6]), np.array([50.0e6])
    slots = StepSlots(
        keys=np.array([0]), rank=np.array([0]), dur_ns=np.array([56.8e6]),
        samples=np.array([8]), phase_ns=phases, ranks=np.array([0]),
        sync_wait_ns={"forward": np.array([38.0e6])},
    )  # fmt: skip
    assert slots.own_ns("forward")[0] == 0.0 and slots.own_ns(OTHER)[0] == 0.0
    assert slots.own_ns("backward")[0] / 1e6 == 50.0
    assert abs(slots.whole_own_ns()[0] / 1e6 - (56.8 - 38.0)) < 1e-9
    assert abs(slots.own_ms_per_step(OWN_PHASES)[0] - 50.0) < 1e-9
