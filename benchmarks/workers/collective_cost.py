"""Rank side of benchmarks/collective_cost.py (and of gpu-check's ``3.nccl.cost``): the probe
installed and removed in-process, each way of seeing collectives in turn."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parents[2] / "tests" / "e2e" / "scripts"))
import fsdp_train  # noqa: E402

from scalescope.events.schema import Kind  # noqa: E402
from scalescope.probe import dispatched, group_hooks  # noqa: E402
from scalescope.probe.install import WAY_VARIABLE, Probe  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--blocks", type=int, default=21)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--fsdp-steps", type=int, default=10)
    p.add_argument("--fsdp-blocks", type=int, default=9)
    p.add_argument(
        "--backend", default="gloo", choices=("gloo", "nccl", "fake"),
        help="nccl: a CUDA tensor; fake: torch's FakeProcessGroup (2 ranks, no work done), "
        "which leaves the probe's own cost without the backend's thread handoff",
    )  # fmt: skip
    return p.parse_args()


WAY_ASKED = {"dispatcher": "dispatcher", "python": "hooks", "wrappers": "wrappers"}
"""Each way but the probe's own choice ("probe"), as SCALESCOPE_COLLECTIVES asks for it."""


def ways() -> tuple[str, ...]:
    """off, the probe as it chooses, then each other way this torch and build offer."""
    found = ["off", "probe"]
    if dispatched.ready() is not None:
        found.append("dispatcher")
    if group_hooks.available():
        found.append("python")  # torch's hooks calling the probe's Python
    return (*found, "wrappers")


def described(probe: Probe) -> str:
    """The way ``probe`` records collectives, as the docs name it."""
    if probe.way == "hooks":
        compiled = probe.group_hooks is not None and probe.group_hooks.native is not None
        return "group hooks (C++)" if compiled else "group hooks (Python)"
    return {"dispatcher": "c10d ops at the dispatcher (C++)"}.get(probe.way, "dist.* wrappers")


@contextlib.contextmanager
def asking(way: str | None) -> Iterator[None]:
    saved = os.environ.pop(WAY_VARIABLE, None)
    if way is not None:
        os.environ[WAY_VARIABLE] = way
    try:
        yield
    finally:
        os.environ.pop(WAY_VARIABLE, None)
        if saved is not None:
            os.environ[WAY_VARIABLE] = saved


class Way:
    """One way of recording collectives, installed around a block."""

    def __init__(self, name: str, run_dir: Path) -> None:
        self.name, self.run_dir, self.probe = name, run_dir, None

    def __enter__(self) -> None:
        if self.name != "off":
            with asking(WAY_ASKED.get(self.name)):
                self.probe = Probe(self.run_dir / self.name, dist.get_rank())
            if self.name == "python" and self.probe.group_hooks is not None:
                self.probe.group_hooks.native = None  # torch's hooks calling Python
            self.probe.install()
        # A block starts with no garbage: else the objects a probe's install makes bring
        # Python's full collection (tens of ms with torch loaded) into the blocks that follow
        # it, by chance, and a 500-call block reads several µs a call dearer.
        gc.collect()

    def __exit__(self, *exc: object) -> None:
        if self.probe is not None:
            self.probe.recorder.rows.clear()
            self.probe.close()


def all_reduce_block(calls: int, device: str) -> float:
    t = torch.ones(2, dtype=torch.float32, device=device)
    dist.barrier()
    start = time.perf_counter_ns()
    for _ in range(calls):
        dist.all_reduce(t)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter_ns() - start) / calls / 1e3


def fsdp_step(model, opt, x, y) -> None:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def fsdp_block(model, opt, x, y, steps: int) -> float:
    """Mean step time of ``steps`` steps after one untimed step (the probe's first step
    after install looks for the model once: a one-off, not a per-step cost)."""
    fsdp_step(model, opt, x, y)
    dist.barrier()
    start = time.perf_counter_ns()
    for _ in range(steps):
        fsdp_step(model, opt, x, y)
    return (time.perf_counter_ns() - start) / steps / 1e6


def write(out: str, times: dict, steps: dict, per_step: int, way: str) -> None:
    if dist.get_rank() != 0:
        return
    medians = {
        "all_reduce_us": {w: statistics.median(v) for w, v in times.items()},
        "fsdp_step_ms": {w: statistics.median(v) for w, v in steps.items()},
        "fsdp_collectives_per_step": per_step,
        "probe_way": way,
        "torch": torch.__version__,
        "backend": dist.get_backend(),
    }
    Path(out).write_text(json.dumps(medians))


def init_fake() -> None:
    """torch's FakeProcessGroup: every collective returns a completed work at once. The
    probe's C++ hooks take only gloo and NCCL groups; here they take this one too."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    group_hooks.native_takes = lambda pg, device_timing: True
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)


def probe_way(run_dir: Path) -> str:
    probe = Probe(run_dir / "which", dist.get_rank())
    try:
        probe.install()
        return described(probe)
    finally:
        probe.close()


def main() -> None:
    args = parse()
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        # one core: gloo's thread and the caller then never migrate, and a call costs ~30 us
        # steady instead of ~100 us swinging by 10 (the probe's Python costs the same)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    device = "cuda" if args.backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if args.backend == "fake":
        init_fake()
    else:
        dist.init_process_group(args.backend)
    run_dir = Path(tempfile.mkdtemp())
    way = probe_way(run_dir)
    times: dict[str, list[float]] = {w: [] for w in ways()}
    all_reduce_block(50, device)
    for _ in range(args.blocks):
        for name in times:
            with Way(name, run_dir):
                times[name].append(all_reduce_block(args.calls, device))
    if dist.get_world_size() == 1 or args.backend != "gloo":  # FSDP with one rank: nothing
        write(args.out, times, {}, 0, way)
        dist.destroy_process_group()
        return
    model = fsdp_train.build_model()
    fsdp_train.shard(model, reshard_after_forward=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16), torch.randint(0, fsdp_train.CLASSES, (8,))
    fsdp_step(model, opt, x, y)
    steps: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.fsdp_blocks):
        for name, key in (("off", "off"), ("probe", "on")):
            with Way(name, run_dir):
                steps[key].append(fsdp_block(model, opt, x, y, args.fsdp_steps))
    probe = Probe(run_dir / "count", dist.get_rank()).install()
    fsdp_step(model, opt, x, y)
    dist.barrier()
    probe.recorder.collect(final=True)
    per_step = sum(row[1] == Kind.COLLECTIVE for row in probe.recorder.rows)
    probe.close()
    write(args.out, times, steps, per_step, way)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
