"""A DDP training script on plain tensors (no DataLoader), for the tests of the samples the
probe counts from the DDP module's inputs: ``--accumulate`` forwards of ``--batch-size``
samples per optimizer step (gradient accumulation), and one evaluation forward under
``no_grad`` per step that is not training. ``--no-ddp`` all-reduces the gradients by hand;
``--raw-params`` also keeps the weights as plain tensors that no module holds (nothing the
probe can count samples from). It knows nothing of scalescope."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--raw-params", action="store_true")
    args = p.parse_args()
    if args.raw_params:
        return raw_params(args)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    net = model if args.no_ddp else DDP(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        for _ in range(args.accumulate):
            x, y = torch.randn(args.batch_size, 32), torch.randint(0, 4, (args.batch_size,))
            nn.functional.cross_entropy(net(x), y).backward()
        if args.no_ddp:
            for param in model.parameters():
                dist.all_reduce(param.grad)
        opt.step()
        with torch.no_grad():
            net(torch.randn(3 * args.batch_size, 32))  # evaluation: not samples of the step
    dist.destroy_process_group()


def raw_params(args: argparse.Namespace) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    weights = [torch.randn(32, 4, requires_grad=True), torch.zeros(4, requires_grad=True)]
    opt = torch.optim.SGD(weights, lr=0.01)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        x, y = torch.randn(args.batch_size, 32), torch.randint(0, 4, (args.batch_size,))
        nn.functional.cross_entropy(x @ weights[0] + weights[1], y).backward()
        for w in weights:
            dist.all_reduce(w.grad)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
