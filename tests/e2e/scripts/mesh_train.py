"""A 2-D (data x tensor parallel) step on a DeviceMesh, by hand: each rank's activations
all-reduced over its tensor-parallel pair, its gradients over its data-parallel pair. It
knows nothing of scalescope; with ``--facts DIR`` each rank writes the members of its mesh
dimensions' groups as torch gives them (the truth the probe's record is checked against).

    scalescope run -n 4 --oversubscribe mesh_train.py --steps 4 [--unnamed]
"""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--facts", default="")
    p.add_argument("--unnamed", action="store_true", help="a mesh without dimension names")
    args = p.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    names = None if args.unnamed else ("dp", "tp")
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=names)
    dp, tp = mesh.get_group(0), mesh.get_group(1)
    torch.manual_seed(0)
    model = nn.Linear(64, 64)
    for _ in range(args.steps):
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


if __name__ == "__main__":
    main()
