"""The collective micro-benchmark, run in every rank by the launcher (like nccl-tests).

    torchrun --nproc-per-node 2 -m scalescope.bench.comm --ops=all_reduce --sizes=8,1048576

For each backend, op and size: warm-up calls, then timed calls, each after a barrier; a
call's time is the slowest rank's (max over ranks, as nccl-tests reports). Rank 0 writes
the raw times to ``comm.json`` in SCALESCOPE_RUN_DIR. The barriers and the max-reduction are
tagged as scalescope's own messages, so the probe records the benchmarked calls only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from scalescope.bench.comm_options import DTYPES, OPS
from scalescope.events.files import COMM_FILE
from scalescope.probe.context import PROBE_TAG, tagged

ROUNDED_OPS = ("all_gather", "reduce_scatter", "all_to_all")
"""Ops whose element count is rounded down to a multiple of the ranks (as nccl-tests does)."""


def element_count(op: str, nbytes: int, elem_size: int, world_size: int) -> int:
    count = nbytes // elem_size
    return count - count % world_size if op in ROUNDED_OPS else count


def make_call(
    op: str, count: int, dtype: torch.dtype, group: Any, device: torch.device
) -> Callable:
    """One call of ``op`` on ``count`` elements in total (nccl-tests' size convention)."""
    n, rank = dist.get_world_size(group), dist.get_rank(group)
    full = torch.ones(count, dtype=dtype, device=device)
    part = torch.ones(count // n, dtype=dtype, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(full, src=0, group=group)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(full, part, group=group)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, full, group=group)
    if op == "all_to_all":
        out = torch.empty_like(full)
        return lambda: dist.all_to_all_single(out, full, group=group)
    if op == "sendrecv":
        received = torch.empty_like(full)

        def sendrecv() -> None:
            send = dist.isend(full, dst=(rank + 1) % n, group=group)
            recv = dist.irecv(received, src=(rank - 1) % n, group=group)
            send.wait()
            recv.wait()

        return sendrecv
    raise ValueError(f"unknown op {op}")


def time_calls(call: Callable, group: Any, device: torch.device, warmup: int, iters: int) -> list:
    """Seconds of each timed call, max over ranks; a barrier before each call."""
    times = []
    for i in range(warmup + iters):
        with tagged(PROBE_TAG):
            c10d.barrier(group=group)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            call()
            elapsed = time.perf_counter() - t0
        if i >= warmup:
            times.append(elapsed)
    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    with tagged(PROBE_TAG):
        c10d.all_reduce(slowest, op=c10d.ReduceOp.MAX, group=group)
    return slowest.cpu().tolist()


def measure(args: argparse.Namespace, backend: str, group: Any, device: torch.device) -> list:
    dtype, elem = getattr(torch, args.dtype), DTYPES[args.dtype]
    n = dist.get_world_size(group)
    out = []
    for op in args.ops:
        started = time.perf_counter()
        if dist.get_rank() == 0:
            print(f"# {backend} {op}: {len(args.sizes)} sizes ...", file=sys.stderr, flush=True)
        if op == "sendrecv" and n < 2:
            out.append({"backend": backend, "op": op, "error": "sendrecv needs 2 or more ranks"})
            continue
        for nbytes in args.sizes:
            count = element_count(op, nbytes, elem, n)
            row: dict[str, Any] = {"backend": backend, "op": op, "count": count}
            row["nbytes"] = count * elem
            if count == 0:
                continue
            try:
                call = make_call(op, count, dtype, group, device)
                row["times_s"] = time_calls(call, group, device, args.warmup, args.iters)
            except (RuntimeError, ValueError) as exc:
                row["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                out.append(row)
                break
            out.append(row)
        if dist.get_rank() == 0:
            print(f"# {backend} {op}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return out


def backend_device(backend: str) -> torch.device:
    if backend == "nccl":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scalescope.bench.comm")
    p.add_argument("--ops", type=lambda s: s.split(","), default=["all_reduce"])
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[8])
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--backends", type=lambda s: s.split(","), default=["gloo"])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args(argv)
    bad = [op for op in args.ops if op not in OPS]
    if bad:
        p.error(f"unknown ops {bad}; choose from {', '.join(OPS)}")
    return args


def write_raw(record: dict[str, Any]) -> None:
    """comm.json in the run directory, atomically (a reader never sees half a file)."""
    run_dir = os.environ.get("SCALESCOPE_RUN_DIR")
    if run_dir:
        path = Path(run_dir) / COMM_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record) + "\n")
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # all_gather_into_tensor and reduce_scatter_tensor are the names the probe wraps
    warnings.filterwarnings("ignore", message=".*is deprecated.*", category=FutureWarning)
    default = "cpu:gloo,cuda:nccl" if "nccl" in args.backends else args.backends[0]
    dist.init_process_group(backend=default)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    results = []
    try:
        for backend in args.backends:
            group = None if backend == default else dist.new_group(backend=backend)
            results += measure(args, backend, group, backend_device(backend))
    finally:
        dist.destroy_process_group()
    if rank == 0:
        write_raw(
            {"world_size": world_size, "dtype": args.dtype, "iters": args.iters,
             "warmup": args.warmup, "measurements": results}
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
