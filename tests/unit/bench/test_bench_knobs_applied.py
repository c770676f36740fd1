"""The bench workload's speed knobs reach the computation, not only its options: with
--channels-last the convolution weights and every batch entering the model are channels_last
(oneDNN's fast path on CPU), with --bf16 the forward runs in bfloat16, and by default neither.
One real rank (gloo, world size 1) trains two steps of a small convolutional network."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from scalescope.bench.progress import Display, StepReporter
from scalescope.bench.rank_env import World
from scalescope.bench.training import build_training
from scalescope.bench.workload import build_parser, make_loader, parse_args, train

CL = torch.channels_last


@pytest.fixture
def one_rank(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as one rank per core: OpenMP threads spinning on a busy machine
    dist.init_process_group("gloo", rank=0, world_size=1)  # make two steps take seconds
    yield
    dist.destroy_process_group()
    torch.set_num_threads(threads)


def trained(*flags: str) -> list[tuple[bool, bool, torch.dtype]]:
    """Per step, of the first convolution: (input channels_last, weight channels_last, output
    dtype)."""
    argv = ["squeezenet1_1", "--steps=2", "--warmup-steps=1", "--batch-size=2", "--image-size=32"]
    args = parse_args(build_parser(), [*argv, "--num-classes=10", *flags])
    loader = make_loader(args, World(0, 0, 1))
    cpu = torch.device("cpu")
    training = build_training(args, cpu, 2, len(loader), 2)
    conv = next(m for m in training.model.modules() if isinstance(m, torch.nn.Conv2d))
    seen = []

    def look(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        seen.append(
            (
                inputs[0].is_contiguous(memory_format=CL),
                module.weight.is_contiguous(memory_format=CL),
                output.dtype,
            )
        )

    conv.register_forward_hook(look)
    train(training, loader, args, StepReporter(Display(False, 2, "t"), cpu, 1, 2, 2, 10))
    return seen


def test_default_is_contiguous_float32(one_rank: None) -> None:
    assert trained() == [(False, False, torch.float32)] * 2


def test_channels_last_reaches_weights_and_every_batch(one_rank: None) -> None:
    assert trained("--channels-last") == [(True, True, torch.float32)] * 2


def test_bf16_autocasts_the_forward(one_rank: None) -> None:
    assert trained("--bf16") == [(False, False, torch.bfloat16)] * 2
