"""A 2-D (data x tensor parallel) step on a DeviceMesh, by hand: each rank's activations
all-reduced over its tensor-parallel pair, its gradients over its data-parallel pair. It
knows nothing of scalescope; with ``--facts DIR`` each rank writes the members of its mesh
dimensions' groups as torch gives them (the truth the probe's record is checked against).

    scalescope run -n 4 --oversubscribe mesh_train.py --steps 4 [--unnamed]
"""

import argparse
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--facts", default="")
    p.add_argument("--unnamed", action="store_true", help="a mesh without dimension names")
    p.add_argument(
        "--unflatten", action="store_true",
        help="torchtitan's way: a 1-D 'world' mesh unflattened into dp x tp",
    )  # fmt: skip
    p.add_argument(
        "--loader", action="store_true",
        help="train from a DataLoader with an optimizer (the tp pair loads the same batches, "
        "the dp pair its own shards); when rank 0's steps ended (s) to FACTS/steps.json",
    )  # fmt: skip
    p.add_argument(
        "--fsdp-tp", action="store_true",
        help="with --loader: an MLP tensor-parallel over tp (column- then row-wise) and "
        "FSDP2-sharded over dp, torch's own collectives instead of the ones by hand",
    )  # fmt: skip
    p.add_argument("--sleep-rank", type=int, default=-1, help="this rank is slow in forward")
    p.add_argument("--sleep-s", type=float, default=0.0, help="by this much a step")
    p.add_argument(
        "--step-log", default="", help="with --loader: JSON list of rank 0's step times (s)"
    )
    args = p.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    names = None if args.unnamed else ("dp", "tp")
    if args.unflatten:
        flat = init_device_mesh("cpu", (world,), mesh_dim_names=("world",))
        mesh = flat._unflatten(0, (world // 2, 2), ("dp", "tp"))
    else:
        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=names)
    dp, tp = mesh.get_group(0), mesh.get_group(1)
    torch.manual_seed(0)
    model = fsdp_tp(mesh) if args.fsdp_tp else nn.Linear(64, 64)
    if dist.get_rank() == args.sleep_rank and args.sleep_s > 0:
        model.register_forward_pre_hook(lambda *_: time.sleep(args.sleep_s))
    if args.loader:
        train_from_loader(args, model, mesh, dp, tp)
    for _ in range(0 if args.loader else args.steps):
        hidden = model(torch.randn(16, 64))
        dist.all_reduce(hidden.detach(), group=tp)
        hidden.square().mean().backward()
        for param in model.parameters():
            dist.all_reduce(param.grad, group=dp)
        model.zero_grad(set_to_none=True)
    if args.facts:
        facts = {"dp": dist.get_process_group_ranks(dp), "tp": dist.get_process_group_ranks(tp)}
        Path(args.facts, f"mesh-{dist.get_rank()}.json").write_text(json.dumps(facts))
    dist.destroy_process_group()


def fsdp_tp(mesh) -> nn.Module:
    """An MLP whose layers are split over the mesh's tp dimension and whose shards FSDP2
    gathers over its dp dimension (torchtitan's 2-D parallelism)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_from_loader(args, model, mesh, dp, tp) -> None:
    data = TensorDataset(torch.randn(16 * args.steps * mesh.size(0), 64))
    sampler = DistributedSampler(
        data, num_replicas=mesh.size(0), rank=mesh.get_local_rank(0), shuffle=False
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ends = [time.perf_counter()]
    for (x,) in DataLoader(data, batch_size=16, sampler=sampler):
        if args.fsdp_tp:
            model(x).square().mean().backward()
        else:
            hidden = model(x)
            dist.all_reduce(hidden.detach(), group=tp)
            hidden.square().mean().backward()
            for param in model.parameters():
                dist.all_reduce(param.grad, group=dp)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ends.append(time.perf_counter())
    if args.facts and dist.get_rank() == 0:
        Path(args.facts, "steps.json").write_text(json.dumps(ends[1:]))
    if args.step_log and dist.get_rank() == 0:
        steps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
        Path(args.step_log).write_text(json.dumps(steps))


if __name__ == "__main__":
    main()
