"""A small DeepSpeed pipeline-parallel training script for the end-to-end tests, in
DeepSpeed's own structure: a ``PipelineModule`` of ``LayerSpec`` layers split into
``--stages`` stages, ``deepspeed.initialize`` with a config dict, ``engine.train_batch`` over
a ``RepeatingLoader`` of a DataLoader (the first stage reads the inputs, the last the
labels). It knows nothing of scalescope; CPU ranks over gloo.

At its end rank 0 prints one JSON line: ``{"steps": ..., "microbatches": ...,
"micro_batch": ..., "stage_layers": [...]}`` (the layers each stage holds, by its index).
"""

import argparse
import json
import os

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.pipe import LayerSpec, PipelineModule
from deepspeed.utils import RepeatingLoader
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WIDTH, DEPTH, IN, CLASSES = 64, 4, 32, 10


def layers() -> list[LayerSpec]:
    """``DEPTH`` Linear layers with a ReLU between each two."""
    dims = [IN] + [WIDTH] * (DEPTH - 1) + [CLASSES]
    out = []
    for i in range(DEPTH):
        out.append(LayerSpec(nn.Linear, dims[i], dims[i + 1]))
        if i < DEPTH - 1:
            out.append(LayerSpec(nn.ReLU))
    return out


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="train_batch calls")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4, help="gradient accumulation steps")
    return p.parse_args()


def loader(args: argparse.Namespace) -> RepeatingLoader:
    """The same batches on every stage (a seeded dataset, no shuffling)."""
    g = torch.Generator().manual_seed(0)
    n = args.micro_batch * args.microbatches * 2
    x, y = torch.randn(n, IN, generator=g), torch.randint(0, CLASSES, (n,), generator=g)
    data = TensorDataset(x, y)
    return RepeatingLoader(DataLoader(data, batch_size=args.micro_batch, drop_last=True))


def skip_shm_build() -> None:
    """The CPU accelerator compiles its shared-memory all-reduce (a C++ JIT build, about 3
    minutes on 2 cores) when the backend starts; gloo does the same work here."""
    import importlib

    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def main() -> None:
    args = parse()
    skip_shm_build()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = PipelineModule(
        layers=layers(),
        num_stages=args.stages,
        loss_fn=nn.CrossEntropyLoss(),
        partition_method="uniform",
    )
    config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.microbatches,
        "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}},
        "steps_per_print": 1_000_000,
    }
    params = [p for p in model.parameters() if p.requires_grad]
    engine, _opt, _loader, _sched = deepspeed.initialize(
        model=model, model_parameters=params, config=config
    )
    batches = iter(loader(args))
    for _ in range(args.steps):
        engine.train_batch(data_iter=batches)
    held = [None] * dist.get_world_size()
    dist.all_gather_object(held, [name for name, _ in model.named_children()])
    if dist.get_rank() == 0:
        out = {
            "steps": args.steps,
            "microbatches": args.microbatches,
            "micro_batch": args.micro_batch,
            "stage_layers": held,
        }
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
