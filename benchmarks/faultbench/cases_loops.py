"""More cases through installed training loops (issue 49: at least a quarter of the real
jobs' cases run through the Hugging Face Trainer, Lightning or DeepSpeed's engine, not only
scripts written here): a marginal slow rank under Lightning's and the Trainer's loops, a
slow rank under DeepSpeed's engine at ZeRO-1 and with gradient accumulation, clear and
marginal, and the Trainer's loop with no fault. Drawn after every other case, so that adding
them moved no earlier draw."""

from __future__ import annotations

import random

from cases import HF_TRAINER, LIGHTNING, Case, Truth
from cases_layouts import DEEPSPEED_TRAIN, _slow, _straggler


def trainer_cases(rng: random.Random, steps: int) -> list[Case]:
    """A marginal slow rank in forward (a callback's hook) under each installed loop."""
    out = []
    for name, script, module in (("lightning", LIGHTNING, "pytorch_lightning"),
                                 ("hf", HF_TRAINER, "transformers")):  # fmt: skip
        rank, fault = _slow(rng, "marginal")
        every = "--val-every" if name == "lightning" else "--eval-every"
        base = ("--steps", str(steps), every, str(steps), "--step-log", "steps.json")
        out.append(Case(f"{name}-forward-marginal", f"ddp ({module})", script, base, fault,
                        _straggler(rank, "marginal"), needs=module))  # fmt: skip
    return out


ENGINE_CASES = ((1, "clear", 1), (1, "marginal", 1), (2, "marginal", 1), (3, "marginal", 1),
                (2, "clear", 2), (3, "clear", 2))  # fmt: skip
"""(ZeRO stage, size, micro-batches a step) of each case under DeepSpeed's engine."""


def engine_cases(rng: random.Random, steps: int) -> list[Case]:
    """A slow rank under DeepSpeed's engine: ZeRO-1 clear and marginal, ZeRO-2 and ZeRO-3
    marginal, and ZeRO-2 and ZeRO-3 accumulating 2 micro-batches a step, clear."""
    out = []
    for stage, size, accumulation in ENGINE_CASES:
        rank, fault = _slow(rng, size)
        base = ("--stage", str(stage), "--steps", str(steps), "--step-log", "steps.json",
                "--accumulation", str(accumulation))  # fmt: skip
        name = f"ds-zero{stage}-{'accum-' if accumulation > 1 else ''}{size}"
        layout = f"deepspeed ZeRO-{stage}" + (
            f", {accumulation} micro-batches" if accumulation > 1 else ""
        )
        out.append(Case(name, layout, DEEPSPEED_TRAIN, base, fault, _straggler(rank, size),
                        needs="deepspeed"))  # fmt: skip
    return out


def quiet_loop_case(steps: int) -> Case:
    """The Trainer's loop with no fault: its own jitter and costs, never a rank's."""
    base = ("--steps", str(steps), "--eval-every", str(steps), "--step-log", "steps.json")
    return Case("hf-none", "ddp (transformers)", HF_TRAINER, base, (), Truth(None, "none", "none"),
                needs="transformers", alone=("--no-sync",))  # fmt: skip


def loop_more_cases(rng: random.Random, steps: int) -> list[Case]:
    return [*trainer_cases(rng, steps), *engine_cases(rng, steps), quiet_loop_case(steps)]
