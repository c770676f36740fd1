"""The fault matrix's pipelines (issue 49): ``torch.distributed.pipelining`` runs of 2 ranks,
2 stages (3 ranks on 2 cores are oversubscribed: the placement, not the stage, would be the
cause). An unequal stage under each schedule the what-if replays (GPipe, 1F1B, interleaved
1F1B), the same stage marginal, and too few microbatches."""

from __future__ import annotations

import random

from cases import SCRIPTS, Case, Truth, _sleep

PP_TRAIN = SCRIPTS / "pp_train.py"
MICRO = 4
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B"}
CHUNKS = {"interleaved": 2}
"""Stages a rank holds under the schedule (pp_train.py's ``CHUNKS``)."""
BUBBLE_SHAPE = ("--hidden", "512", "--batch", "256")
"""A step whose compute (~40 ms a stage on 2 cores) outweighs a microbatch's fixed costs, so
that the bubble is what more microbatches take away."""


def _base(steps: int, schedule: str, micro: int = MICRO) -> tuple[str, ...]:
    return ("--schedule", schedule, "--micro", str(micro), "--steps", str(steps),
            "--step-log", "steps.json")  # fmt: skip


def heavy_stage(rng: random.Random, steps: int, schedule: str, size: str) -> Case:
    """Stage N sleeps in each forward, ``size``'s sleep a step in all (split over its
    microbatches and, interleaved, its rank's stages): the bound stage, whose cost is the
    schedule replayed with it at its peers' pace."""
    stage, ms = rng.randrange(2), _sleep(rng, size)
    per_forward = ms / (MICRO * CHUNKS.get(schedule, 1))
    fault = ("--heavy-stage", str(stage), "--sleep-ms", f"{per_forward:.2f}")
    return Case(f"pp-{schedule}-stage-{size}", f"pipeline ({SCHEDULES[schedule]}, 2 ranks)",
                PP_TRAIN, _base(steps, schedule), fault,
                Truth(f"stage:{stage}", "pipeline stage", size))  # fmt: skip


def few_microbatches(steps: int) -> Case:
    """The batch not split (one microbatch: each stage idles while the other computes), whose
    clean arm splits it in 2 (the fix the bubble's finding prices: twice the microbatches).
    At 2 against 4 the re-runs measured 4 slower, every pair (2026-11-29: a microbatch's
    fixed costs outweigh the bubble it takes away on 2 cores): no fault to find. The stages
    are equal, so none is the culprit: the one computing most would be named by noise. The
    truth is the schedule, the culprit the verdict gives a bubble that no stage bounds
    (diagnose/verdict.py), its cost the schedule replayed over twice the microbatches."""
    planted = ("--micro", "1")
    return Case("pp-gpipe-few-microbatches", "pipeline (GPipe, 2 ranks)", PP_TRAIN,
                (*_base(steps, "gpipe", micro=2), *BUBBLE_SHAPE), planted,
                Truth("schedule:ScheduleGPipe", "pipeline stage", "clear"))  # fmt: skip


def pipeline_cases(rng: random.Random, steps: int) -> list[Case]:
    """A clear unequal stage under each schedule, a marginal one (GPipe), too few
    microbatches."""
    clear = [heavy_stage(rng, steps, s, "clear") for s in SCHEDULES]
    return [*clear, heavy_stage(rng, steps, "gpipe", "marginal"), few_microbatches(steps)]
