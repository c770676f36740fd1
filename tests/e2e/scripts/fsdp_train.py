"""A small real FSDP2 training script for the end-to-end tests: ``fully_shard`` on each block
and then on the root, as torchtitan and the FSDP2 tutorial do. It knows nothing of
scalescope; it runs on gloo (CPU) or NCCL (one GPU per rank).

The model is built by ``build_model`` so a test can count its units' parameters itself.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WIDTH, DEPTH, CLASSES = 64, 3, 10


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


def build_model(reshard_after_forward: bool = True) -> Net:
    """The unsharded model: the units are each block, then the root (embed and head)."""
    torch.manual_seed(0)
    return Net()


def shard(model: Net, reshard_after_forward: bool) -> None:
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard_after_forward)
    fully_shard(model, reshard_after_forward=reshard_after_forward)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--no-reshard", action="store_true", help="reshard_after_forward=False")
    return p.parse_args()


def main() -> None:
    args = parse()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    model = build_model().to(device)
    shard(model, reshard_after_forward=not args.no_reshard)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(512, 16, generator=g), torch.randint(0, CLASSES, (512,), generator=g))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    step = 0
    while step < args.steps:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == args.steps:
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
