"""Sequence models of the suite (an LSTM and a transformer block) and synthetic token data."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SEQUENCE_MODELS = ("lstm", "transformer")


class SyntheticTokens(Dataset):
    """``length`` sequences of ``seq_len + 1`` tokens drawn, modulo a pool, from random ones.

    Like ``SyntheticImages``: a small pool made once keeps start-up cheap and indexing free.
    A sample is (inputs, next-token targets).
    """

    def __init__(
        self, length: int, seq_len: int, vocab: int, seed: int = 0, pool_size: int = 64
    ) -> None:
        if min(length, seq_len, vocab, pool_size) < 1:
            raise ValueError("length, seq_len, vocab and pool_size must be positive")
        generator = torch.Generator().manual_seed(seed)
        self.length = length
        self.tokens = torch.randint(0, vocab, (pool_size, seq_len + 1), generator=generator)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} samples")
        row = self.tokens[index % len(self.tokens)]
        return row[:-1], row[1:]


def token_loader(
    dataset: SyntheticTokens, batch_size: int, seed: int, rank: int, world_size: int
) -> DataLoader:
    """This rank's shuffled share in full batches, as ``bench.data.build_loader`` makes it
    (equal steps on every rank), without importing torchvision with it."""
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)


class LstmModel(nn.Module):
    """Embedding, a stacked LSTM of width ``hidden``, and a next-token classifier."""

    def __init__(self, vocab: int, hidden: int, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


class TransformerBlockModel(nn.Module):
    """Embedding plus positions, one pre-norm transformer encoder block, a causal mask.

    The mask is made in forward, not kept as a buffer, so DDP has no buffers to broadcast.
    """

    def __init__(self, vocab: int, hidden: int, seq_len: int, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.position = nn.Parameter(torch.zeros(seq_len, hidden))
        self.block = nn.TransformerEncoderLayer(
            hidden, heads, dim_feedforward=4 * hidden, dropout=0.0, batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        x = self.embed(tokens) + self.position[:n]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        return self.head(self.block(x, src_mask=mask, is_causal=True))


def build_sequence_model(name: str, vocab: int, hidden: int, seq_len: int) -> nn.Module:
    """A randomly initialised ``lstm`` or ``transformer`` of width ``hidden``."""
    if name == "lstm":
        return LstmModel(vocab, hidden)
    if name == "transformer":
        if hidden % 4:
            raise ValueError(f"the transformer's --hidden must be a multiple of 4, got {hidden}")
        return TransformerBlockModel(vocab, hidden, seq_len)
    raise ValueError(f"unknown sequence model {name!r}; valid: {', '.join(SEQUENCE_MODELS)}")
