"""Collectives, and optionally DDP training, under torch.profiler: one trace per rank.

It knows nothing of scalescope: gpu_check runs it under ``scalescope run`` (probe on), so
the probe's record and torch.profiler's trace describe the same calls. Every rank uses
device ``local_rank % device_count`` (two gloo ranks share one GPU). Each iteration
all-reduces one float32 tensor of each size, then takes a no-op optimizer step (the
probe's step boundary) and ``prof.step()``. One all_reduce of ``WARMUP_BYTES`` before profiling
creates the communicator, so no profiled call pays for it: the probe records it, the trace
does not. NCCL reduces with AVG: with one rank, NCCL may run no kernel at all for a SUM.

With ``--loader`` the training batches come from a DataLoader (pageable memory, collated
anew each step) and are copied to the device in the loop: the probe's ``to_device`` phase
against the trace's host-to-device copies. ``--skip N`` leaves the first N iterations out
of the trace (the probe's warm-up steps).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WARMUP_BYTES = 8


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--trace-dir", required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--sizes", default="4096", help="all_reduce message sizes, bytes")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--model", help="also train this torchvision model with DDP")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--loader", action="store_true", help="batches from a DataLoader")
    p.add_argument("--skip", type=int, default=0, help="iterations before the trace")
    return p.parse_args()


def pick_device(name: str) -> torch.device:
    if name == "cpu":
        return torch.device("cpu")
    index = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def training(
    args: argparse.Namespace, device: torch.device
) -> tuple[Callable[[], None], torch.optim.Optimizer]:
    """One DDP step's forward and backward (batches copied from the host each step), and
    the optimizer that ends the step."""
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torchvision.models.get_model(args.model, num_classes=10).to(device)
    ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    labels = torch.randint(0, 10, (args.batch_size,))
    batches = loader_batches(images, labels) if args.loader else None

    def forward_backward() -> None:
        x, y = next(batches) if batches is not None else (images, labels)
        x, y = x.to(device), y.to(device)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()

    return forward_backward, torch.optim.SGD(ddp.parameters(), lr=0.01)


def loader_batches(images: torch.Tensor, labels: torch.Tensor) -> Iterator:
    """Endless batches of a DataLoader over two batches' worth of samples."""
    from torch.utils.data import DataLoader, TensorDataset

    n = len(images)
    data = TensorDataset(torch.cat([images, images]), torch.cat([labels, labels]))
    while True:
        yield from DataLoader(data, batch_size=n, drop_last=True)


def main() -> None:
    args = parse()
    device = pick_device(args.device)
    dist.init_process_group(args.backend)
    rank = dist.get_rank()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    tensors = [torch.ones(n // 4, dtype=torch.float32, device=device) for n in sizes]
    forward_backward, opt = None, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
    if args.model:
        forward_backward, opt = training(args, device)
    op = dist.ReduceOp.AVG if args.backend == "nccl" else dist.ReduceOp.SUM
    dist.all_reduce(torch.ones(WARMUP_BYTES // 4, device=device), op=op)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    handler = tensorboard_trace_handler(args.trace_dir, worker_name=f"rank{rank}")
    every_step = schedule(wait=args.skip, warmup=0, active=args.iters, repeat=1)
    with profile(
        activities=activities, schedule=every_step, record_shapes=True, on_trace_ready=handler
    ) as prof:
        for _ in range(args.skip + args.iters):
            if forward_backward is not None:
                forward_backward()
            for t in tensors:
                dist.all_reduce(t, op=op)
            opt.step()
            prof.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
