"""More layouts and faults for the matrix (issue 49): DDP with DataLoader workers, FSDP2 slow
in backward and optimizer and cut into small units, a data x tensor-parallel mesh by hand and
FSDP2 x TP, DeepSpeed ZeRO-2 and ZeRO-3, a rank-0 checkpoint, a garbage collector's pause, a
core shared with busy processes, exposed communication and two faults at once.

Each fault's rank, size and period are drawn from the seed, as in cases.py; the truth is what
a user would want named: the rank whose slowness the others wait for (a slow input on one rank
is that rank's straggling: ``INPUT_BOUND`` names no rank), the phase of rank-only work, and
for exposed communication (and FSDP units too small, whose cost is their collectives') the
what-if's own fix, ``comm:hidden`` (their findings name no rank)."""

from __future__ import annotations

import random

from cases import (
    DDP_TRAIN,
    FSDP_TRAIN,
    GPT_TRAIN,
    SCRIPTS,
    Case,
    Truth,
    _sleep,
)

MESH_TRAIN = SCRIPTS / "mesh_train.py"
DEEPSPEED_TRAIN = SCRIPTS / "deepspeed_train.py"
WORKERS = 2
"""DataLoader workers per rank: on 2 cores with 2 ranks, more would only queue."""
INPUT_FACTOR = (3.0, 4.0)
"""A slow input's batch costs this many clear sleeps in one worker: with ``WORKERS`` workers
the rank waits for its batch by about ``factor / WORKERS`` clear sleeps less its compute."""
GC_OBJECTS = (6_000, 12_000)
"""Reference cycles a step the collecting rank builds (a few ms a step). Its collection is a
full one, as a loop's own ``gc.collect()`` is: the whole heap of a torch process, ~100 ms
alone and several times that on 2 busy cores, so that the pause is clear at any size drawn."""
HOG_JOB = ("--width", "1024", "--batch-size", "128")
"""The shared-core case's job (both arms): a rank busy computing most of its step, that a
busy process on its core slows (a rank mostly waiting gets its core back on waking). A
small model with a large batch (512) was input-bound instead: collating its batch took most
of the step, and the verdict rightly named the job's input before the hogged rank."""
HOGS = 2
"""Busy-loop processes on the hogged rank's core: one alone took the rank from 63 to 84-114
ms a step run by hand, but 60 to 63 ms in one matrix run, where other jobs' processes share
both cores too (the scheduler's fair share of a core split more ways); two take more of it."""
CHECKPOINT_MB = (30.0, 60.0)
"""A rank-0 checkpoint's extra weights: torch.save of ~40 MB takes tens of ms."""
ALLREDUCE_ELEMENTS = (200_000, 400_000)
"""A user all-reduce of float64 a step (1.6-3.2 MB): gloo's time exposed after the step."""


def _rank(rng: random.Random) -> int:
    return rng.choice((0, 1))


def _slow(rng: random.Random, size: str, where: str = "") -> tuple[int, tuple[str, ...]]:
    """A rank of two and its sleep (``--sleep-where`` when given)."""
    rank, ms = _rank(rng), _sleep(rng, size)
    fault = ("--sleep-rank", str(rank), "--sleep-s", f"{ms / 1e3:g}")
    return rank, (*fault, "--sleep-where", where) if where else fault


def _straggler(rank: int, size: str = "clear") -> Truth:
    return Truth(f"rank:{rank}", "straggler", size)


def worker_cases(rng: random.Random, steps: int) -> list[Case]:
    """DDP fed by DataLoader workers: a slow rank (clear, marginal), and one rank's samples
    slow to load in its workers (the others wait for it in the gradients' all-reduce)."""
    base = ("--steps", str(steps), "--step-log", "steps.json", "--workers", str(WORKERS))
    layout = f"ddp ({WORKERS} loader workers)"
    out = []
    for size in ("clear", "marginal"):
        rank, fault = _slow(rng, size, "forward")
        out.append(Case(f"ddp-workers-{size}", layout, DDP_TRAIN, base, fault,
                        _straggler(rank, size)))  # fmt: skip
    rank = _rank(rng)
    batch_s = rng.uniform(*INPUT_FACTOR) * _sleep(rng, "clear") / 1e3
    fault = ("--sleep-rank", str(rank), "--sleep-s", f"{batch_s:.3g}", "--sleep-where", "getitem")
    out.append(Case("ddp-workers-input", layout, DDP_TRAIN, base, fault, _straggler(rank)))
    return out


def fsdp_cases(rng: random.Random, steps: int) -> list[Case]:
    """FSDP2: one rank slow in backward, in the optimizer step; the model cut into a unit a
    layer (many small all-gathers) against the whole model as one unit: the job's
    communication the culprit, the units merged (``comm:fused``: their calls' host cost and
    latency too, not only the transfers hiding would remove) the gain."""
    base = ("--steps", str(steps), "--device", "cpu", "--step-log", "steps.json")
    out = []
    for where in ("backward", "optimizer"):
        rank, fault = _slow(rng, "clear", where)
        out.append(Case(f"fsdp-{where}-clear", "fsdp2", FSDP_TRAIN, base, fault,
                        _straggler(rank)))  # fmt: skip
    small = Case("fsdp-small-units", "fsdp2 (a unit a layer)", FSDP_TRAIN,
                 (*base, "--units", "root"), ("--units", "layer"),
                 Truth("comm:hidden", "communication", "clear"), fix="comm:fused")  # fmt: skip
    return [*out, small]


def mesh_cases(rng: random.Random, steps: int) -> list[Case]:
    """A data x tensor-parallel mesh by hand (mesh_train.py: its tp pair all-reduces the
    activations, its dp group the gradients), and FSDP2 x TP (torch's ``parallelize_module``
    over tp, ``fully_shard`` over dp). 2 ranks make the mesh 1x2 (dp 1, tp 2): 4 ranks on 2
    cores would be oversubscribed, and the placement, not the rank, the cause; with dp 1,
    FSDP2's gathers are a single rank's (the tp dimension carries the traffic)."""
    rank, fault = _slow(rng, "clear")
    return [Case("mesh-tp-clear", "dp x tp mesh (1x2, by hand)", MESH_TRAIN,
                 _mesh_base(steps), fault, _straggler(rank))]  # fmt: skip


def fsdp_tp_cases(rng: random.Random, steps: int) -> list[Case]:
    """FSDP2 x TP on the same 1x2 mesh (drawn last: the cases before keep their draws)."""
    rank, fault = _slow(rng, "clear")
    return [Case("fsdp-tp-clear", "fsdp2 x tp mesh (1x2)", MESH_TRAIN,
                 (*_mesh_base(steps), "--fsdp-tp"), fault, _straggler(rank))]  # fmt: skip


def _mesh_base(steps: int) -> tuple[str, ...]:
    return ("--steps", str(steps), "--loader", "--step-log", "steps.json")


def deepspeed_cases(rng: random.Random, steps: int) -> list[Case]:
    """One rank slow in forward under DeepSpeed's engine, ZeRO-2 and ZeRO-3 (DeepSpeed found
    beside the venv: run.py)."""
    out = []
    for stage in (2, 3):
        rank, fault = _slow(rng, "clear")
        base = ("--stage", str(stage), "--steps", str(steps), "--step-log", "steps.json")
        out.append(Case(f"ds-zero{stage}-clear", f"deepspeed ZeRO-{stage}", DEEPSPEED_TRAIN,
                        base, fault, _straggler(rank), needs="deepspeed"))  # fmt: skip
    return out


def rank_zero_cases(rng: random.Random, steps: int) -> list[Case]:
    """Rank 0 alone checkpoints every k steps (nanoGPT's loop); and two faults at once: one
    rank busier every step (the larger, the truth) while rank 0 also checkpoints."""
    base = ("--steps", str(steps), "--grad-accum", "2", "--work-log", "work-{rank}.json")
    every, mb = rng.randrange(4, 7), round(rng.uniform(*CHECKPOINT_MB))
    save = ("--checkpoint-every", str(every), "--checkpoint-mb", str(mb))
    checkpoint = Case("gpt-rank0-checkpoint", "ddp (nanoGPT-style)", GPT_TRAIN, base, save,
                      Truth("rank:0", "rank-only work", "clear"), clock="work-log",
                      fix="phase:checkpoint")  # fmt: skip
    small = ("--checkpoint-every", str(every), "--checkpoint-mb", "1")
    slow = _rank(rng)
    busy = ("--slow-rank", str(slow), "--slow-ms", f"{_sleep(rng, 'clear'):g}", *small)
    both = Case("gpt-slow-and-checkpoint", "ddp (nanoGPT-style)", GPT_TRAIN, base, busy,
                _straggler(slow), clock="work-log")  # fmt: skip
    return [checkpoint, both]


def host_cases(rng: random.Random, steps: int) -> list[Case]:
    """Faults of the host: a garbage collector's periodic pause on one rank; one rank's core
    shared with a busy process (each rank pinned to its own core in both arms)."""
    base = ("--steps", str(steps), "--step-log", "steps.json")
    rank, every = _rank(rng), rng.randrange(4, 7)
    objects = rng.randrange(*GC_OBJECTS, 1000)
    pause = ("--gc-rank", str(rank), "--gc-every", str(every), "--gc-objects", str(objects))
    gc = Case("ddp-gc-pause", "ddp", DDP_TRAIN, base, pause, _straggler(rank))
    hogged = _rank(rng)
    pinned = (*base, "--pin-cores", *HOG_JOB)
    hog = Case("ddp-shared-core", "ddp (a rank a core)", DDP_TRAIN, pinned,
               ("--hog-rank", str(hogged), "--hogs", str(HOGS)), _straggler(hogged))  # fmt: skip
    return [gc, hog]


def comm_cases(rng: random.Random, steps: int) -> list[Case]:
    """Exposed communication: small gradient buckets in both arms and, planted, a large
    all-reduce of the user's after every step that nothing overlaps. The culprit is the job's
    communication; the gain is that of the user's collectives dropped (``comm:dropped@tag:
    user``: their calls and the message built for each), what the clean arm drops (hidden,
    the message's 0.5-0.7 ms a step stayed; all of the job's hidden would also drop the
    buckets both arms keep)."""
    base = ("--steps", str(steps), "--step-log", "steps.json", "--bucket-cap-mb", "0.001")
    elements = rng.randrange(*ALLREDUCE_ELEMENTS, 1000)
    return [Case("ddp-exposed-comm", "ddp", DDP_TRAIN, base,
                 ("--user-allreduce", str(elements)),
                 Truth("comm:hidden", "communication", "clear"),
                 fix="comm:dropped@tag:user")]  # fmt: skip


def layout_more_cases(rng: random.Random, steps: int) -> list[Case]:
    """Every case of this module, drawn in a fixed order from ``rng``."""
    return [*worker_cases(rng, steps), *fsdp_cases(rng, steps), *mesh_cases(rng, steps),
            *deepspeed_cases(rng, steps), *rank_zero_cases(rng, steps),
            *host_cases(rng, steps), *comm_cases(rng, steps),
            *fsdp_tp_cases(rng, steps)]  # fmt: skip
