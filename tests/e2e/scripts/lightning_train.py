"""A small Lightning script as users write them: a LightningModule, Trainer(strategy="ddp")
on the CPU, validation every ``--val-every`` steps on every rank. Lightning runs forward and
backward inside ``optimizer.step(closure)``. Prints its own clock's training samples/s (from
the second training batch to the end of training, validation included). ``--sleep-rank`` and
``--sleep-s``: a callback makes that rank slow in each training forward; ``--step-log``: a
callback writes rank 0's step times (s), JSON. It knows nothing of scalescope: under a
launcher Lightning reads RANK/WORLD_SIZE from the environment."""

import argparse
import json
import time

import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, _index):  # noqa: ANN001, ANN201
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, _index):  # noqa: ANN001, ANN201
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class OwnClock(pl.Callback):
    """Training samples and seconds from the second training batch on."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size, self.samples, self.start = batch_size, 0, None

    def on_train_batch_start(self, trainer, module, batch, index) -> None:  # noqa: ANN001
        if index == 1:
            self.start, self.samples = time.perf_counter(), 0
        if index >= 1:
            self.samples += len(batch[0])

    def on_train_end(self, trainer, module) -> None:  # noqa: ANN001
        rate = self.samples / (time.perf_counter() - self.start)
        print(f"rank {trainer.global_rank}: {self.samples} samples, {rate:.1f} training "
              "samples/s by its own clock")  # fmt: skip


class SlowForward(pl.Callback):
    """One rank sleeps ``seconds`` at the start of each training forward (a forward pre-hook)."""

    def __init__(self, rank: int, seconds: float) -> None:
        self.rank, self.seconds = rank, seconds

    def on_fit_start(self, trainer, module) -> None:  # noqa: ANN001
        if trainer.global_rank == self.rank and self.seconds:
            module.net.register_forward_pre_hook(self.sleep)

    def sleep(self, net: nn.Module, _args: object) -> None:
        if net.training:
            time.sleep(self.seconds)


class StepLog(pl.Callback):
    """Rank 0's step times (s), each from the end of one training batch to the next's (the
    first from the start of training)."""

    def __init__(self, path: str) -> None:
        self.path, self.steps, self.last = path, [], 0.0

    def on_train_start(self, trainer, module) -> None:  # noqa: ANN001
        self.last = time.perf_counter()

    def on_train_batch_end(self, trainer, *_: object) -> None:  # noqa: ANN001
        now = time.perf_counter()
        self.steps.append(now - self.last)
        self.last = now

    def on_train_end(self, trainer, module) -> None:  # noqa: ANN001
        if trainer.global_rank == 0 and self.path:
            with open(self.path, "w") as f:
                json.dump(self.steps, f)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--val-every", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-s", type=float, default=0.0)
    p.add_argument("--step-log", default="")
    args = p.parse_args()
    torch.manual_seed(0)
    n = args.batch_size * args.steps * 2
    data = TensorDataset(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    val = TensorDataset(
        torch.randn(8 * args.batch_size, 32), torch.randint(0, 4, (8 * args.batch_size,))
    )
    clock = OwnClock(args.batch_size)
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy="ddp", max_steps=args.steps,
        val_check_interval=args.val_every, limit_val_batches=4, num_sanity_val_steps=0,
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock, SlowForward(args.sleep_rank, args.sleep_s), StepLog(args.step_log)],
    )  # fmt: skip
    trainer.fit(
        Classifier(),
        DataLoader(data, batch_size=args.batch_size, shuffle=True),
        DataLoader(val, batch_size=args.batch_size),
    )


if __name__ == "__main__":
    main()
