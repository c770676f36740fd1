"""The fault matrix: real CPU jobs with a fault planted, each with its truth (issue 49).

A case is a script, its arguments, the fault's arguments and the truth: the culprit
(``rank:N``, ``stage:N``, ``phase:NAME``; None without a fault), the cause class and the
fault's size class (``clear``: at least 3x the no-fault jitter's cost; ``marginal``: where "no
bottleneck" also passes). The faulty rank, the sleep's size and a mid-run onset are drawn
from the seed, so that nothing is tuned to one draw. The fault's arguments never reach the
recorded command line: the run starts ``planted.py CASE_FILE`` (runner.py). Besides them,
synthetic cases of 1,024 generated ranks (cases_synthetic.py, run by synthetic.py).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cases_netns import Netns
    from cases_synthetic import Synthetic

SCRIPTS = Path(__file__).resolve().parents[2] / "tests" / "e2e" / "scripts"
DDP_TRAIN = SCRIPTS / "ddp_train.py"
GPT_TRAIN = SCRIPTS / "gpt_train.py"
FSDP_TRAIN = SCRIPTS / "fsdp_train.py"
PIPELINE = SCRIPTS / "p2p_pipeline.py"
LIGHTNING = SCRIPTS / "lightning_train.py"
HF_TRAINER = SCRIPTS / "hf_trainer_train.py"
PHASES = ("forward", "backward", "optimizer", "data", "outside")
CLEAR_MS = (30.0, 50.0)
"""A clear fault sleeps this long a step (drawn in the range): 3x and more the no-fault
jitter of a 2-rank ddp_train step on 2 cores (~2-5 ms of its ~40 ms)."""
MARGINAL_MS = (4.0, 8.0)
MIDRUN_SCALE = 150
MIDRUN_AFTER = 300
"""The mid-run case's onset is drawn as the matrix's (a third to a half of its steps) and
scaled 150x, and it runs 300 steps past it: the launcher's live slowdown watch
(analyze/watch/slowdown.py, a read every 0.5 s) learns its baseline over 3 s of warm-up then
12 reads and 20 steps before the onset (1,500-2,100 steps of ~8 ms alone on 2 cores, ~12 s
or more), and needs 5 reads of the fault to confirm it (300 steps of ~50 ms: ~15 s)."""
CLASSES = {
    "STRAGGLER": "straggler",
    "NODE_STRAGGLER": "straggler",
    "LOAD_IMBALANCE": "straggler",
    "INPUT_BOUND": "input",
    "PAGEABLE_COPY": "input",
    "RANK_ONLY_EVAL": "rank-only work",
    "RANK_ONLY_CHECKPOINT": "rank-only work",
    "PIPELINE_BUBBLE": "pipeline stage",
    "STAGE_IMBALANCE": "pipeline stage",
    "SLOW_LINK": "link",
    "COMM_LATENCY": "communication",
    "COMM_BANDWIDTH": "communication",
    "FSDP_SMALL_UNITS": "communication",
    "FSDP_EXPOSED_GATHER": "communication",
    "ZERO3_PARAM_GATHER": "communication",
    "ZERO_EXCHANGE": "communication",
    "OVERSUBSCRIBED": "placement",
}
"""The cause class of a finding's code; a code not listed is its own class."""


LEVEL_VARIABLE = "FAULTBENCH_LEVEL"
"""The arms' ``scalescope run --record`` level (``run.py --level``), read by every runner of
an arm (run.py, netns.py)."""


ROOM_VARIABLE = "FAULTBENCH_CORES_PER_RANK"
"""Cores each rank gets of its own (``run.py --cores-per-rank``; unset or 0: the launcher's
own placement), read by every runner of an arm (run.py, netns.py)."""


def room_options(ranks: int, first: int = 0) -> tuple[str, ...]:
    """``scalescope run`` options that give each of ``ranks`` ranks, global ranks ``first``
    on, ROOM_VARIABLE cores of its own and as many threads: no rank's cores shared with
    another's (a host of the netns cases runs one rank, its global rank ``first``)."""
    per = int(os.environ.get(ROOM_VARIABLE) or 0)
    if per <= 0:
        return ()
    lists = [f"{r * per}-{r * per + per - 1}" for r in range(first, first + ranks)]
    return (*(a for cpus in lists for a in ("--cpu-list", cpus)), "--threads-per-rank", str(per))


def record_level() -> str:
    from scalescope.probe.windows import DEFAULT_LEVEL

    return os.environ.get(LEVEL_VARIABLE, DEFAULT_LEVEL)


@dataclass(frozen=True)
class Truth:
    culprit: str | None
    """``rank:1``, ``rank:0``...; None: no fault planted."""
    cause: str
    """A value of ``CLASSES`` (``none`` without a fault)."""
    size: str
    """``clear``, ``marginal`` or ``none``."""


@dataclass(frozen=True)
class Case:
    name: str
    layout: str
    script: Path
    args: tuple[str, ...]
    fault: tuple[str, ...]
    """The planted arm's extra arguments; the clean arm runs without them."""
    truth: Truth
    ranks: int = 2
    warmup_steps: int = 4
    clock: str = "step-log"
    """How the script's own clock is read: ``step-log`` (ddp_train's rank-0 step times,
    median) or ``work-log`` (gpt_train's rank-0 steps, mean: a cost every k steps)."""
    launch: tuple[str, ...] = field(default=())
    """Extra ``scalescope run`` options (``--oversubscribe``)."""
    fix: str = ""
    """The what-if's cause whose gain is the prediction (default: the culprit)."""
    since: int = 0
    """A fault planted from this step on: both arms are measured on the steps since it, as
    the what-if costs a mid-run cause (since its onset)."""
    needs: str = ""
    """A module the script imports (an installed training loop); without it the case is
    skipped, neither passed nor failed."""
    alone: tuple[str, ...] = ()
    """A no-fault case's third arm: the same job with its communication removed
    (``--no-sync``). A job has costs of its own besides noise (a small model's exposed
    all-reduce): a cost the verdict claims for its communication is judged against this
    arm's gain, as a fault's against its clean arm, and passes only where it holds."""
    alone_input: tuple[str, ...] = ()
    """A no-fault case's fourth arm: the same job with its input loading removed
    (``--preload``: every batch loaded before the first step). Its synchronous DataLoader is
    a cost of its own too (ddp_train.py's: ~1 ms of an 8 ms step): a cost the verdict claims
    for the input pipeline, naming no rank, is judged against this arm's gain."""
    synthetic: Synthetic | None = None
    """A generated run (cases_synthetic.py): no script is run, the runner generates both arms
    from this (synthetic.py)."""
    netns: Netns | None = None
    """A multi-host case (cases_netns.py): each rank on a host of its own, a network
    namespace; the planted arm's fault is the path it throttles (netns.py), not arguments."""

    @property
    def fixed(self) -> str | None:
        return self.fix or self.truth.culprit

    @property
    def thirds(self) -> dict[str, tuple[str, ...]]:
        """A no-fault case's arms without one of the job's own costs, by the class of the
        cost each judges (``CLASSES``): their arguments."""
        arms = {"communication": self.alone, "input": self.alone_input}
        return {kind: extra for kind, extra in arms.items() if extra}


def _sleep(rng: random.Random, size: str) -> float:
    low, high = CLEAR_MS if size == "clear" else MARGINAL_MS
    return round(rng.uniform(low, high), 1)


def ddp_cases(rng: random.Random, steps: int) -> list[Case]:
    """One rank slow in each phase, clear and marginal; no fault twice; a fault from
    mid-run; two slow ranks at once."""
    base = ("--steps", str(steps), "--step-log", "steps.json")
    out = [Case(f"ddp-none-{i}", "ddp", DDP_TRAIN, base, (), Truth(None, "none", "none"),
                alone=("--no-sync",), alone_input=("--preload",)) for i in range(2)]  # fmt: skip
    for where in PHASES:
        for size in ("clear", "marginal"):
            rank, ms = rng.choice((0, 1)), _sleep(rng, size)
            fault = (
                "--sleep-rank",
                str(rank),
                "--sleep-s",
                f"{ms / 1e3:g}",
                "--sleep-where",
                where,
            )
            truth = Truth(f"rank:{rank}", "straggler", size)
            out.append(Case(f"ddp-{where}-{size}", "ddp", DDP_TRAIN, base, fault, truth))
    onset = rng.randrange(steps // 3, steps // 2) * MIDRUN_SCALE
    rank, ms = rng.choice((0, 1)), _sleep(rng, "clear")
    midrun = ("--sleep-rank", str(rank), "--sleep-s", f"{ms / 1e3:g}", "--sleep-from", str(onset))
    long = ("--steps", str(onset + MIDRUN_AFTER), *base[2:])
    out.append(Case("ddp-forward-midrun", "ddp", DDP_TRAIN, long, midrun,
                    Truth(f"rank:{rank}", "straggler", "clear"), since=onset))  # fmt: skip
    two = ("--sleep-rank", "1", "--sleep-s", f"{_sleep(rng, 'clear') / 1e3:g}",
           f"--also-sleep=2:{_sleep(rng, 'marginal') / 1e3:g}")  # fmt: skip
    out.append(Case("ddp-two-faults", "ddp", DDP_TRAIN, base, two,
                    Truth("rank:1", "straggler", "clear"), ranks=3,
                    launch=("--oversubscribe",)))  # fmt: skip
    stall = ("--sleep-rank", "1", "--sleep-s", "0.15", "--sleep-every", "10")
    out.append(Case("ddp-periodic-stall", "ddp", DDP_TRAIN, base, stall,
                    Truth("rank:1", "straggler", "clear")))  # fmt: skip
    return out


def slow_rank(rng: random.Random) -> tuple[int, tuple[str, ...]]:
    """A rank of two drawn from the seed and its clear sleep in forward."""
    rank = rng.choice((0, 1))
    return rank, ("--sleep-rank", str(rank), "--sleep-s", f"{_sleep(rng, 'clear') / 1e3:g}")


def layout_cases(rng: random.Random, steps: int) -> list[Case]:
    """One rank slow in forward under FSDP2; an unequal stage of a 2-stage pipeline (3 ranks
    on 2 cores are oversubscribed: the placement, not the stage, would be the cause)."""
    rank, fault = slow_rank(rng)
    fsdp = Case("fsdp-forward-clear", "fsdp2", FSDP_TRAIN,
                ("--steps", str(steps), "--device", "cpu", "--step-log", "steps.json"), fault,
                Truth(f"rank:{rank}", "straggler", "clear"))  # fmt: skip
    stage = rng.randrange(2)
    heavy = ("--sleep-ms", f"{_sleep(rng, 'clear') / 3:.1f}", "--heavy-stage", str(stage))
    pipe = Case("pipe-stage-clear", "pipeline (GPipe, 2 stages)", PIPELINE,
                ("--steps", str(steps), "--micro", "3", "--sleep-ms", "0",
                 "--step-log", "steps.json"), heavy,
                Truth(f"stage:{stage}", "pipeline stage", "clear"))  # fmt: skip
    return [fsdp, pipe]


def loop_cases(rng: random.Random, steps: int) -> list[Case]:
    """One rank slow in forward through an installed training loop (a callback's hook), its
    steps timed by a callback on rank 0."""
    out = []
    for name, script, module in (("lightning", LIGHTNING, "pytorch_lightning"),
                                 ("hf", HF_TRAINER, "transformers")):  # fmt: skip
        rank, fault = slow_rank(rng)
        every = "--val-every" if name == "lightning" else "--eval-every"
        base = ("--steps", str(steps), every, str(steps), "--step-log", "steps.json")
        out.append(Case(f"{name}-forward-clear", f"ddp ({module})", script, base, fault,
                        Truth(f"rank:{rank}", "straggler", "clear"), needs=module))  # fmt: skip
    return out


def rank_only_cases(steps: int) -> list[Case]:
    """Rank 0 alone evaluates every 5 steps (a nanoGPT-style loop)."""
    base = ("--steps", str(steps), "--grad-accum", "2", "--work-log", "work-{rank}.json")
    fault = ("--eval-every", "5", "--eval-iters", "100")
    truth = Truth("rank:0", "rank-only work", "clear")
    return [Case("gpt-rank0-eval", "ddp (nanoGPT-style)", GPT_TRAIN, base, fault, truth,
                 clock="work-log", fix="phase:eval")]  # fmt: skip


def matrix(seed: int, steps: int = 30) -> list[Case]:
    from cases_layouts import layout_more_cases  # they import this module's pieces
    from cases_loops import loop_more_cases
    from cases_netns import netns_cases
    from cases_pipeline import pipeline_cases
    from cases_synthetic import synthetic_cases

    rng = random.Random(seed)
    return [*ddp_cases(rng, steps), *rank_only_cases(steps), *layout_cases(rng, steps),
            *loop_cases(rng, steps), *layout_more_cases(rng, steps),
            *pipeline_cases(rng, steps), *synthetic_cases(rng, steps),
            *loop_more_cases(rng, steps), *netns_cases(rng, steps)]  # fmt: skip


QUICK = ("ddp-none-0", "ddp-forward-clear", "ddp-backward-clear", "ddp-data-marginal",
         "ddp-forward-midrun", "gpt-rank0-eval", "pipe-stage-clear",
         "lightning-forward-clear")  # fmt: skip
"""The ``--quick`` tier: one case of each kind (at most 8: ~30-50 s a pair on 2 cores)."""
