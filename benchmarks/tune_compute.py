"""What the compute knobs of ``scalescope tune`` do to one rank's arithmetic alone: images/s of
forward + backward + SGD step of the bench model in one process, one thread (a rank's share of
a core when ranks fill the cores), no DDP, no launcher, for contiguous vs channels_last, fp32
vs bf16 autocast, and batch sizes. The variants alternate step by step in the same process,
so load on a shared machine falls on all of them alike; medians of the per-step images/s.
The counterpart of ``tune_knobs.py`` (whole runs): it says how much of a knob's effect is
the arithmetic, and so the most the knob can give a compute-bound run. Run by hand:

    .venv/bin/python benchmarks/tune_compute.py --model resnet18 --steps 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

from results import record
from scalescope.bench.models import build_model

VARIANTS = {
    "fp32 contiguous": (False, False, 1),
    "channels_last": (True, False, 1),
    "bf16 (numerics)": (False, True, 1),
    "batch x2 (batch)": (False, False, 2),
    "channels_last + batch x2": (True, False, 2),
}
"""name -> (channels_last, bf16, batch multiplier)."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=15, help="measured steps of each variant")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variant", action="append", choices=list(VARIANTS))
    return p.parse_args()


class Variant:
    def __init__(self, args: argparse.Namespace, channels_last: bool, bf16: bool, times: int):
        torch.manual_seed(0)
        self.model = build_model(args.model, 1000, image_size=args.image_size)
        self.format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = self.model.to(memory_format=self.format)
        self.bf16 = bf16
        self.batch = args.batch_size * times
        self.images = torch.randn(self.batch, 3, args.image_size, args.image_size)
        self.labels = torch.randint(0, 1000, (self.batch,))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = nn.CrossEntropyLoss()

    def step(self) -> float:
        """images/s of one training step."""
        start = time.perf_counter()
        images = self.images.to(memory_format=self.format)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.loss(self.model(images), self.labels)
        loss.backward()
        self.optimizer.step()
        return self.batch / (time.perf_counter() - start)


def main() -> None:
    args = parse()
    torch.set_num_threads(args.threads)
    names = args.variant or list(VARIANTS)
    variants = {name: Variant(args, *VARIANTS[name]) for name in names}
    for variant in variants.values():  # warm-up: oneDNN primitives, allocator
        variant.step()
        variant.step()
    rates: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.steps):
        order = names if i % 2 == 0 else list(reversed(names))
        for name in order:
            rates[name].append(variants[name].step())
    base = statistics.median(rates[names[0]])
    print(f"{args.model}, batch {args.batch_size}, images {args.image_size} px, "
          f"{args.threads} thread(s), {args.steps} steps each, load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'variant':26s} {'median images/s':>16s} {'/ ' + names[0]:>20s}")
    for name, values in rates.items():
        med = statistics.median(values)
        print(f"{name:26s} {med:16.2f} {med / base:20.2f}")
        if name != names[0]:
            record(
                f"one rank's arithmetic, {name} / {names[0]} ({args.model}, batch "
                f"{args.batch_size}, {args.image_size} px, {args.threads} thread(s))",
                med / base, "ratio", "", None,
                f"median {med:.2f} images/s over {args.steps} steps",
            )  # fmt: skip


if __name__ == "__main__":
    main()
