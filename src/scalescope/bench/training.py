"""The bench's model, optimizer, learning-rate schedule and loss: plain SGD, or a
large-batch recipe of ``scalescope.recipes`` (``--recipe goyal|lars``)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LRScheduler

from scalescope.bench.models import build_model
from scalescope.recipes import get_recipe

DEFAULT_LR = 0.01


@dataclass(frozen=True)
class Training:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: LRScheduler | None
    """Stepped after every optimizer step; None for plain SGD at a constant rate."""
    criterion: nn.Module
    lr: float
    """The peak learning rate."""
    lr_warmup_steps: int


BLOCKS = (
    "BasicBlock", "Bottleneck", "InvertedResidual", "MBConv", "FusedMBConv", "_DenseBlock",
    "_Transition", "EncoderBlock", "CNBlock", "SwinTransformerBlock", "Fire", "Inception",
)  # fmt: skip
"""torchvision's repeated blocks: the units ``--fsdp`` shards (class names)."""


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The outermost blocks of ``model`` (torchvision's block classes); a model without any
    shards its top-level children that hold parameters."""
    found: list[nn.Module] = []
    inside: set[int] = set()
    for module in model.modules():
        if id(module) in inside or type(module).__name__ not in BLOCKS:
            continue
        found.append(module)
        inside.update(id(m) for m in module.modules())
    if found:
        return found
    return [m for m in model.children() if any(True for _ in m.parameters())]


def shard(model: nn.Module) -> nn.Module:
    """FSDP2 as its documentation shows: fully_shard on each block, then on the model (with
    tune's FSDP knobs when set: probe/fsdp_knobs.py)."""
    from torch.distributed.fsdp import fully_shard as plain

    from scalescope.probe.fsdp_knobs import with_knobs

    fully_shard = with_knobs(plain)

    for unit in fsdp_units(model):
        fully_shard(unit)
    fully_shard(model)
    return model


def _parallel(args: argparse.Namespace, device: torch.device) -> nn.Module:
    torch.manual_seed(args.seed)
    model = build_model(args.model, args.num_classes, image_size=args.image_size).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if getattr(args, "fsdp", False):
        return shard(model)
    return DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=args.bucket_cap_mb,
    )


def build_training(
    args: argparse.Namespace,
    device: torch.device,
    global_batch: int,
    steps_per_epoch: int,
    total_steps: int,
) -> Training:
    """The DDP-wrapped (or, with --fsdp, sharded) model with SGD (momentum 0.9, --lr), or
    with --recipe's optimizer, schedule and loss for ``global_batch`` (--lr then replaces the
    recipe's base rate)."""
    ddp = _parallel(args, device)
    if args.recipe is None:
        lr = args.lr or DEFAULT_LR
        optimizer = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
        return Training(ddp, optimizer, None, nn.CrossEntropyLoss().to(device), lr, 0)
    recipe = get_recipe(args.recipe)
    if args.lr is not None:
        recipe = dataclasses.replace(recipe, base_lr=args.lr)
    built = recipe.build(ddp, global_batch, steps_per_epoch, total_steps)
    return Training(ddp, built.optimizer, built.scheduler, built.criterion.to(device),
                    built.lr, built.warmup_steps)  # fmt: skip
