"""What ``--record summary``'s summaries say about the measured steps the full-row windows
leave out, carried by the step grid (step_grid.py) so that every test over its steps can read
them: the what-if replays the windows only, but the windows are a sample of the run
(window_sample.py computes this and weighs the windows by it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RunSample:
    own_ns: np.ndarray
    """(summarised measured steps, the grid's ranks): each rank's own time per step, its
    estimated waits in blocking collectives and comm_wait left out (as the cross-rank
    analysis's busy time): what the peer test adds to the windows' rows."""
    steps: np.ndarray
    """The summarised measured steps of ``own_ns``'s rows, sorted."""
    every_own_ns: np.ndarray
    """(every measured step, the grid's ranks): the same own time, its waits estimated from
    the summaries at the windows' steps too: one measure of every step, the windows' and the
    others' (run_gain.py's ratio estimator)."""
    every_steps: np.ndarray
    """The measured steps of ``every_own_ns``'s rows, sorted."""
    every_step_ns: np.ndarray
    """(those steps, the grid's ranks): the STEP rows' durations."""
    work_ns: dict[str, np.ndarray]
    """Per kind of work beside training (``eval``, ``checkpoint``), per row of
    ``every_steps``: its time on the rank that spent the most on it."""
    work_steps: np.ndarray
    """The steps, sorted, at which some rank did work beside training (evaluation,
    checkpoints): the stratum the windows may hold too many or too few of."""
    summarised_steps: int
    """Measured steps recorded as summaries only."""
    summarised_work: int
    """Of those, the ones in ``work_steps``."""
    unit_calls_ns: np.ndarray | None = None
    """Per row of ``every_steps``: the time in FSDP units' calls (``unshard:*``,
    ``reduce_grads:*``, from the SUMMARY rows), the least over the grid's ranks (the rank
    that waited least in them: their transfers and host cost, not a straggler's lateness);
    what ``comm:fused``'s gain follows (run_gain.py ``fused_gain``)."""
