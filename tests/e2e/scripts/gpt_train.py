"""A tiny GPT-style transformer (embedding, causal self-attention of nn.Linear, MLP; no
convolution) trained with DDP on random tokens, as nanoGPT's train.py trains: gradient
accumulation, and (``--eval-every``) only rank 0 evaluating every K iterations while the
others wait in their next all-reduce; ``--checkpoint-every`` has rank 0 torch.save every K;
``--slow-rank R --slow-ms MS`` makes rank R busier every step. Prints its own clock's
training samples/s; ``--work-log FILE`` has each rank write its own clock's durations (of
every evaluation, checkpoint and step) as JSON, the truth of benchmarks/accuracy/
rank_only_work.py. It knows nothing of scalescope."""

import argparse
import contextlib
import json
import math
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

VOCAB, WIDTH, HEADS, CONTEXT = 64, 32, 4, 16


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (
            z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in self.qkv(x).split(c, dim=2)
        )
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        att = att.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        return self.proj((att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention()
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.Sequential(Block(), Block())
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.head(self.ln_f(self.blocks(x)))


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=0, help="rank 0 evaluates every K steps")
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--checkpoint-every", type=int, default=0, help="rank 0 saves every K")
    p.add_argument(
        "--checkpoint-mb", type=float, default=0.0,
        help="a checkpoint holds this many MB more than the model (a larger model's weights)",
    )  # fmt: skip
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--slow-every", type=int, default=1, help="the slow rank's extra work: every K")
    p.add_argument(
        "--work-log", default="",
        help="each rank writes its evaluations', checkpoints' and steps' durations (s, by "
        "time.perf_counter) as JSON to this path, '{rank}' replaced by its rank",
    )  # fmt: skip
    return p.parse_args()


def loss_of(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model: nn.Module, batches: DataLoader, iters: int) -> float:
    model.eval()
    losses = [float(loss_of(model, x)) for (x,), _ in zip(batches, range(iters), strict=False)]
    model.train()
    return sum(losses) / len(losses)


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(GPT())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, VOCAB, (args.batch_size * 64, CONTEXT + 1))
    train = DataLoader(TensorDataset(tokens), batch_size=args.batch_size, shuffle=True)
    held_out = torch.randint(0, VOCAB, (args.batch_size * 256, CONTEXT + 1))
    val = DataLoader(TensorDataset(held_out), batch_size=args.batch_size)
    batches = iter(train)
    pad = torch.zeros(int(args.checkpoint_mb * 2**20) // 4) if args.checkpoint_mb else None
    samples, start = 0, None
    log: dict = {"rank": rank, "eval": [], "checkpoint": [], "steps": []}
    for step in range(args.steps):
        began = time.perf_counter()
        if step == 1:  # its own clock leaves the first step out, as scalescope's warm-up
            samples, start = 0, time.perf_counter()
        if args.eval_every and step and step % args.eval_every == 0 and rank == 0:
            t0 = time.perf_counter()
            val_loss = evaluate(model, val, args.eval_iters)
            log["eval"].append({"step": step, "s": time.perf_counter() - t0})
            print(f"step {step}: val loss {val_loss:.3f}")
        if args.checkpoint_every and step and step % args.checkpoint_every == 0 and rank == 0:
            t0 = time.perf_counter()
            state = model.module.state_dict()
            saved = state if pad is None else {"model": state, "more weights": pad}
            torch.save(saved, os.path.join(os.getcwd(), "ckpt.pt"))
            log["checkpoint"].append({"step": step, "s": time.perf_counter() - t0})
        if rank == args.slow_rank and step % args.slow_every == 0:
            busy(args.slow_ms)
        for micro in range(args.grad_accum):
            try:
                (batch,) = next(batches)
            except StopIteration:
                batches = iter(train)
                (batch,) = next(batches)
            last = micro == args.grad_accum - 1
            with contextlib.nullcontext() if last else model.no_sync():
                (loss_of(model, batch) / args.grad_accum).backward()
            samples += batch.shape[0]
        opt.step()
        opt.zero_grad(set_to_none=True)
        log["steps"].append({"step": step, "s": time.perf_counter() - began})
    if args.work_log:
        with open(args.work_log.replace("{rank}", str(rank)), "w") as f:
            json.dump(log, f)
    if start is not None:
        rate = samples / (time.perf_counter() - start)
        print(f"rank {rank}: {samples} samples, {rate:.1f} training samples/s by its own clock")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
