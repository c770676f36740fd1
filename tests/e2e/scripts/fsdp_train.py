"""A small real FSDP2 training script for the end-to-end tests: ``fully_shard`` on each block
and then on the root, as torchtitan and the FSDP2 tutorial do. It knows nothing of
scalescope; it runs on gloo (CPU) or NCCL (one GPU per rank); ``--device cuda --backend gloo``
puts every rank on GPU ``LOCAL_RANK % device_count`` (ranks may share one GPU over gloo).

The model is built by ``build_model`` so a test can count its units' parameters itself.
``--trace-dir`` records the steps with torch.profiler too (one trace per rank; steps line up:
``prof.step()`` right after ``opt.step()``). ``--dtensor``: after training, one DTensor
redistribution (Shard(0) -> Replicate: an all-gather of DTENSOR_SHAPE) and one functional
all-reduce of FUNCOL_NUMEL floats.
"""

import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WIDTH, DEPTH, CLASSES = 64, 3, 10
DTENSOR_SHAPE = (8, 4)
FUNCOL_NUMEL = 6


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width: int = WIDTH, depth: int = DEPTH) -> None:
        super().__init__()
        self.embed = nn.Linear(16, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build_model(depth: int = DEPTH) -> Net:
    """The unsharded model: the units are each block, then the root (embed and head)."""
    torch.manual_seed(0)
    return Net(depth=depth)


UNITS = ("block", "layer", "root")
"""How the model is cut into FSDP units: each block then the root (the default), each layer
(every Linear and LayerNorm: many small units) then the root, or the root alone."""


def shard(model: Net, reshard_after_forward: bool, units: str = "block") -> None:
    from torch.distributed.fsdp import fully_shard

    if units == "layer":
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.LayerNorm)):
                fully_shard(module, reshard_after_forward=reshard_after_forward)
    elif units == "block":
        for block in model.blocks:
            fully_shard(block, reshard_after_forward=reshard_after_forward)
    fully_shard(model, reshard_after_forward=reshard_after_forward)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--no-reshard", action="store_true", help="reshard_after_forward=False")
    p.add_argument("--trace-dir", default="", help="torch.profiler traces here")
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--dtensor", action="store_true")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if any")
    p.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default: by device")
    p.add_argument("--units", choices=UNITS, default="block", help="the FSDP units")
    p.add_argument("--depth", type=int, default=DEPTH, help="blocks (--units layer: 3 units each)")
    p.add_argument("--sleep-rank", type=int, default=-1, help="this rank is slow in forward")
    p.add_argument("--sleep-s", type=float, default=0.0, help="by this much a step")
    p.add_argument(
        "--sleep-where",
        choices=("forward", "backward", "optimizer"),
        default="forward",
        help="where the slow rank sleeps: before forward, at the start of backward (a hook "
        "on the loss), before the optimizer step (a pre-hook)",
    )
    p.add_argument("--step-log", default="", help="JSON list of rank 0's step times (s)")
    return p.parse_args()


def slow_forward(model: nn.Module, seconds: float) -> None:
    """Every forward of ``model`` starts with a sleep of ``seconds``."""
    model.register_forward_pre_hook(lambda *_: time.sleep(seconds))


def profiler(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    if not args.trace_dir:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    plan = schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=1)
    rank = dist.get_rank()
    handler = tensorboard_trace_handler(args.trace_dir, worker_name=f"rank{rank}", use_gzip=True)
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return profile(activities=activities, schedule=plan, record_shapes=True, on_trace_ready=handler)


def dtensor_collectives(device: torch.device) -> None:
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    whole = torch.arange(DTENSOR_SHAPE[0] * DTENSOR_SHAPE[1], dtype=torch.float32)
    sharded = distribute_tensor(whole.reshape(DTENSOR_SHAPE).to(device), mesh, [Shard(0)])
    sharded.redistribute(mesh, [Replicate()]).to_local()
    reduced = funcol.all_reduce(torch.ones(FUNCOL_NUMEL, device=device), "sum", mesh)
    assert float(funcol.wait_tensor(reduced)[0]) == dist.get_world_size()


def main() -> None:
    args = parse()
    cuda = (args.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda"
    dist.init_process_group(args.backend or ("nccl" if cuda else "gloo"))
    device = torch.device("cpu")
    if cuda:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    model = build_model(args.depth).to(device)
    shard(model, reshard_after_forward=not args.no_reshard, units=args.units)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    slow = dist.get_rank() == args.sleep_rank and args.sleep_s > 0
    if slow and args.sleep_where == "forward":
        slow_forward(model, args.sleep_s)
    if slow and args.sleep_where == "optimizer":
        opt.register_step_pre_hook(lambda *_: time.sleep(args.sleep_s))
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(
        torch.randn(512, 16, generator=g), torch.randint(0, CLASSES, (512,), generator=g)
    )
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    step, steps, last = 0, [], time.perf_counter()
    with profiler(args) as prof:
        while step < args.steps:
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                if slow and args.sleep_where == "backward":
                    loss.register_hook(lambda g: time.sleep(args.sleep_s) or g)
                opt.zero_grad()
                loss.backward()
                opt.step()
                now = time.perf_counter()
                steps.append(now - last)
                last = now
                if prof is not None:
                    prof.step()
                step += 1
                if step == args.steps:
                    break
    if dist.get_rank() == 0 and args.step_log:
        with open(args.step_log, "w") as f:
            json.dump(steps, f)
    if args.dtensor:
        dtensor_collectives(device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
