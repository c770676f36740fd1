"""Layer kinds as shares of a model's parameters, on real torch models."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torchvision.models import resnet18

from scalescope.probe.bootstrap import model_layer_shares
from scalescope.probe.model_layers import KINDS, layer_params, layer_shares


class CausalSelfAttention(nn.Module):
    """As GPT scripts write it: q, k, v and the output projection as plain Linear layers."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 16, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Parameter(torch.zeros(8, width))
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied: counted once, as the embedding

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe[: idx.shape[1]]
        return self.head(self.ln_f(self.blocks(x)))


def numel(*modules: nn.Module) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def test_resnet18_is_almost_all_convolution() -> None:
    model = resnet18(num_classes=10)
    shares = layer_shares(model)
    conv = numel(*(m for m in model.modules() if isinstance(m, nn.Conv2d)))
    assert shares["convolution"] == pytest.approx(100 * conv / numel(model), abs=0.01)
    assert shares["convolution"] > 95
    assert shares["normalization"] > 0 and shares["linear"] > 0
    assert "attention" not in shares and "recurrent" not in shares
    assert sum(shares.values()) == pytest.approx(100, abs=0.05)


def test_a_gpt_of_linear_layers_counts_its_attention_and_no_convolution() -> None:
    model = TinyGPT()
    model(torch.randint(0, 50, (2, 8)))  # the model is a working one
    counts = layer_params(model).numel
    attention = numel(*(b.attn for b in model.blocks))
    assert counts["attention"] == attention
    assert counts["linear"] == numel(*(b.mlp for b in model.blocks))
    assert counts["embedding"] == model.wte.weight.numel()  # the tied head not twice
    assert counts["other"] == model.wpe.numel()
    assert counts["convolution"] == 0
    assert layer_params(model).total == numel(model)
    shares = layer_shares(model)
    assert shares["attention"] == pytest.approx(100 * attention / numel(model), abs=0.01)
    assert "convolution" not in shares


def test_multihead_attention_and_a_transformer_layer() -> None:
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32)
    counts = layer_params(layer).numel
    assert counts["attention"] == numel(layer.self_attn)
    assert counts["linear"] == numel(layer.linear1, layer.linear2)
    assert counts["normalization"] == numel(layer.norm1, layer.norm2)


def test_an_lstm_is_recurrent() -> None:
    model = nn.Sequential(nn.Embedding(100, 8), nn.LSTM(8, 32, num_layers=2), nn.Linear(32, 4))
    counts = layer_params(model).numel
    assert counts["recurrent"] == numel(model[1])
    assert counts["embedding"] == 800 and counts["linear"] == 32 * 4 + 4
    assert layer_shares(model)["recurrent"] > 80


def test_a_convolution_inside_an_attention_block_stays_a_convolution() -> None:
    class SpatialAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 1)
            self.q = nn.Linear(4, 4)

    counts = layer_params(SpatialAttention()).numel
    assert (counts["convolution"], counts["attention"]) == (20, 20)


@pytest.fixture
def world(tmp_path: Path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp_and_fsdp_are_walked_through(world) -> None:
    from torch.distributed.fsdp import fully_shard

    plain = layer_shares(TinyGPT())
    assert layer_shares(DistributedDataParallel(TinyGPT())) == plain
    sharded = TinyGPT()
    for block in sharded.blocks:
        fully_shard(block)
    fully_shard(sharded)
    assert type(sharded.blocks[0]).__name__.startswith("FSDP")
    assert layer_shares(sharded) == plain


def test_no_model_or_no_parameters_is_unknown() -> None:
    assert layer_shares(None) is None
    assert layer_shares(nn.ReLU()) is None


def test_fsdp1_flattened_parameters_are_unknown() -> None:
    from torch.distributed.fsdp._flat_param import FlatParameter

    wrapper = nn.Module()  # FSDP1 (use_orig_params=False) holds one flat parameter
    wrapper.module = nn.Conv2d(3, 4, 3)
    wrapper.flat = FlatParameter(torch.zeros(4), requires_grad=True)
    assert layer_shares(wrapper) is None


def test_every_kind_is_known() -> None:
    assert set(layer_params(TinyGPT()).numel) == set(KINDS)


def test_the_rank_end_never_fails_on_the_model() -> None:
    class Probe:
        class phases:  # noqa: N801 - stands for the probe's PhaseHooks
            watched = TinyGPT()

    assert model_layer_shares(Probe())["attention"] > 0

    class Broken(nn.Module):
        def parameters(self, recurse: bool = True):
            raise RuntimeError("broken")

    Probe.phases.watched = Broken()
    assert model_layer_shares(Probe()) is None
    assert model_layer_shares(object()) is None
