"""A small Hugging Face Trainer script as users write them: a GPT-2 language model built from
a config (no download), a synthetic token dataset, Trainer on the CPU over gloo, evaluation
every ``--eval-every`` steps on every rank. The Trainer is unmodified: accelerate wraps the
DataLoaders, the model (DDP) and the optimizer; batches are dicts of tensors. Prints its own
clock's training samples/s (from the end of the first training step to the end of the last,
evaluation included). ``--sleep-rank`` and ``--sleep-s``: a callback makes that rank slow in
each training forward; ``--step-log``: a callback writes rank 0's step times (s), JSON;
``--no-sync``: each rank trains alone, with no communication (the fault matrix's third arm). It
knows nothing of scalescope: under a launcher the Trainer reads RANK/WORLD_SIZE from the
environment."""

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

VOCAB, CONTEXT = 256, 32


class Tokens(Dataset):
    """Random token sequences, each its own label (the model shifts them)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, CONTEXT), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class OwnClock(TrainerCallback):
    """Training samples and seconds from the end of the first training step on."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size, self.samples, self.start, self.end = batch_size, 0, None, None

    def on_step_end(self, args, state, control, **kwargs) -> None:  # noqa: ANN001
        now = time.perf_counter()
        if self.start is None:
            self.start = now
        else:
            self.samples += self.batch_size * args.gradient_accumulation_steps
            self.end = now

    def on_train_end(self, args, state, control, **kwargs) -> None:  # noqa: ANN001
        rate = self.samples / (self.end - self.start)
        print(f"rank {args.process_index}: {self.samples} samples, {rate:.1f} training "
              "samples/s by its own clock", flush=True)  # fmt: skip


class SlowForward(TrainerCallback):
    """One rank sleeps ``seconds`` at the start of each training forward (a forward pre-hook)."""

    def __init__(self, rank: int, seconds: float) -> None:
        self.rank, self.seconds = rank, seconds

    def on_train_begin(self, args, state, control, model=None, **kwargs) -> None:  # noqa: ANN001
        if args.process_index == self.rank and self.seconds:
            model.register_forward_pre_hook(self.sleep)

    def sleep(self, model: torch.nn.Module, _args: object) -> None:
        if model.training:
            time.sleep(self.seconds)


class StepLog(TrainerCallback):
    """Rank 0's step times (s), each from the end of one training step to the next's (the
    first from the start of training)."""

    def __init__(self, path: str) -> None:
        self.path, self.steps, self.last = path, [], 0.0

    def on_train_begin(self, args, state, control, **kwargs) -> None:  # noqa: ANN001
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:  # noqa: ANN001
        now = time.perf_counter()
        self.steps.append(now - self.last)
        self.last = now

    def on_train_end(self, args, state, control, **kwargs) -> None:  # noqa: ANN001
        if args.process_index == 0 and self.path:
            with open(self.path, "w") as f:
                json.dump(self.steps, f)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--out", default="hf_out")
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-s", type=float, default=0.0)
    p.add_argument("--step-log", default="")
    p.add_argument("--no-sync", action="store_true", help="each rank trains alone")
    args = p.parse_args()
    first = int(os.environ.get("RANK", "0")) == 0
    if args.no_sync:
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
            os.environ.pop(name, None)
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB, n_positions=CONTEXT,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    targs = TrainingArguments(
        output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size, eval_strategy="steps",
        eval_steps=args.eval_every, logging_steps=10_000, report_to=[], use_cpu=True,
        ddp_backend=None if args.no_sync else "gloo", dataloader_num_workers=0,
        disable_tqdm=True, learning_rate=1e-3, save_strategy="no",
    )  # fmt: skip
    clock = OwnClock(args.batch_size)
    trainer = Trainer(
        model=model, args=targs, train_dataset=Tokens(args.batch_size * args.steps * 2, 1),
        eval_dataset=Tokens(args.batch_size * 2 * 4, 2),
        callbacks=[clock, SlowForward(args.sleep_rank, args.sleep_s),
                   StepLog(args.step_log if first else "")],
    )  # fmt: skip
    trainer.train()


if __name__ == "__main__":
    main()
