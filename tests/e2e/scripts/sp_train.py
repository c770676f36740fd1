"""Tensor parallel with sequence parallelism under FSDP2 on a 2-D (dp x tp) mesh, the layout
torchtitan gives its models, small: a token embedding split by rows whose partial sums are
reduce-scattered along the sequence (``RowwiseParallel(output_layouts=Shard(1))``), norms on
the sequence shards (``SequenceParallel``), an MLP per block (column- then row-wise), and
``fully_shard`` of the embedding, each block and the root over the dp dimension. It knows
nothing of scalescope; it runs on gloo.

Besides DTensor's reduce-scatter (a functional collective, waited in C++), each block's
output is reduced over tp by hand the way torchtitan's spmd_types does it: a sync
``dist.reduce_scatter_tensor`` inside an autograd Function that returns a view of its
output (``movedim``). gloo fills a reduce-scatter's output in ``Work.wait``, every time it
is called: a profiler that waits for the work a second time writes the output again, and
autograd then refuses the view ("... is a view and its base ... has been modified inplace").

``--losses FILE``: rank 0 writes each step's loss (the same under any profiler that leaves
the program alone).

    scalescope run -n 4 --oversubscribe sp_train.py --steps 3
"""

import argparse
import json

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

VOCAB, WIDTH, SEQ, BATCH, DEPTH = 64, 32, 16, 4, 2


class ReduceScatterSeq(torch.autograd.Function):
    """Sum over ``group`` and keep this rank's part of the sequence (dim 1); backward
    all-gathers it back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        flat = x.movedim(1, 0).contiguous()
        out = flat.new_empty((flat.shape[0] // group.size(), *flat.shape[1:]))
        dist.reduce_scatter_tensor(out, flat, group=group)
        return out.movedim(0, 1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        flat = grad.movedim(1, 0).contiguous()
        full = flat.new_empty((flat.shape[0] * ctx.group.size(), *flat.shape[1:]))
        dist.all_gather_into_tensor(full, flat, group=ctx.group)
        return full.movedim(0, 1), None


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.down = nn.Linear(4 * WIDTH, WIDTH)
        self.mix = nn.Linear(WIDTH, WIDTH, bias=False)
        self.tp: dist.ProcessGroup | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.down(torch.relu(self.up(self.norm(x))))
        full = torch.cat([h] * self.tp.size(), dim=1) / self.tp.size()  # each rank's part
        return h + ReduceScatterSeq.apply(self.mix(full), self.tp)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok(tokens)
        for block in self.blocks:
            h = block(h)
        return self.out(self.norm(h))


def parallelize(model: Net, mesh) -> None:
    tp = mesh["tp"]
    parallelize_module(
        model,
        tp,
        {
            "tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "out": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        },
    )
    for block in model.blocks:
        block.tp = tp.get_group()
        parallelize_module(
            block,
            tp,
            {
                "norm": SequenceParallel(),
                "up": ColwiseParallel(input_layouts=Shard(1)),
                "down": RowwiseParallel(output_layouts=Shard(1)),
            },
        )
    dp = mesh["dp"]
    for module in (model.tok, *model.blocks, model):
        fully_shard(module, mesh=dp)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--losses", default="")
    args = p.parse_args()
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size() // 2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = Net()
    parallelize(model, mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1 + mesh["dp"].get_local_rank())
    losses = []
    for _ in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    if args.losses and dist.get_rank() == 0:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
