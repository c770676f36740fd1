"""Distributed PCA, K-Means and linear SVM on torch.distributed, each over its rank's shard.

Every rank streams its shard through a DataLoader in chunks (so the probe sees the data
phases), reduces partial sums with one ``all_reduce`` per pass, and ends with the same model
on every rank. The results match a single-process fit of all rows: PCA and K-Means exactly
up to rounding (same sums, same Lloyd updates from the same initial centres), the SVM to the
accuracy of its stochastic optimiser.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset


@dataclass(frozen=True)
class PcaFit:
    mean: torch.Tensor
    components: torch.Tensor
    """One principal direction per row, largest variance first (sign: largest entry > 0)."""
    explained_variance: torch.Tensor
    """Variance along each component (covariance with n - 1 in the denominator)."""
    explained_variance_ratio: torch.Tensor


@dataclass(frozen=True)
class KMeansFit:
    centroids: torch.Tensor
    inertia: float
    """Sum of squared distances of all rows to their nearest final centroid."""
    iterations: int


@dataclass(frozen=True)
class SvmFit:
    weight: torch.Tensor
    bias: float
    steps: int


class Chunks(Dataset):
    """Consecutive slices of ``chunk_rows`` rows (views, no copies) as 1-tuples."""

    def __init__(self, rows: torch.Tensor, chunk_rows: int) -> None:
        self.rows, self.chunk_rows = rows, chunk_rows

    def __len__(self) -> int:
        return -(-len(self.rows) // self.chunk_rows)

    def __getitem__(self, index: int) -> tuple[torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"chunk {index} out of range for {len(self)} chunks")
        return (self.rows[index * self.chunk_rows : (index + 1) * self.chunk_rows],)


def chunks(rows: torch.Tensor, chunk_rows: int) -> DataLoader:
    """The shard in chunks, in order, through a DataLoader (whole chunks, no collation)."""
    return DataLoader(Chunks(rows, chunk_rows), batch_size=None, shuffle=False)


def batches(
    rows: torch.Tensor, labels: torch.Tensor, batch_size: int, generator: torch.Generator
) -> DataLoader:
    """Shuffled full batches of (rows, labels), each gathered by one index, not row by row."""
    dataset = TensorDataset(rows, labels)
    order = BatchSampler(RandomSampler(dataset, generator=generator), batch_size, drop_last=True)
    return DataLoader(dataset, sampler=order, batch_size=None)


def _sum_all(tensor: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def _fix_signs(vectors: torch.Tensor) -> torch.Tensor:
    """Flip each row so its entry of largest magnitude is positive (a canonical sign)."""
    biggest = vectors.abs().argmax(dim=1)
    signs = torch.sign(vectors[torch.arange(len(vectors)), biggest])
    return vectors * signs[:, None]


def pca(loader: Iterable, features: int, components: int) -> PcaFit:
    """Covariance from all ranks' row counts, sums and X^T X, then its eigenvectors."""
    partial = torch.zeros(1 + features + features * features, dtype=torch.float64)
    for (x,) in loader:
        partial[0] += len(x)
        partial[1 : 1 + features] += x.sum(dim=0)
        partial[1 + features :] += (x.T @ x).flatten()
    total = _sum_all(partial)
    n = total[0]
    mean = total[1 : 1 + features] / n
    gram = total[1 + features :].view(features, features)
    cov = (gram - n * torch.outer(mean, mean)) / (n - 1)
    values, vectors = torch.linalg.eigh(cov)
    order = torch.argsort(values, descending=True)[:components]
    return PcaFit(
        mean=mean,
        components=_fix_signs(vectors[:, order].T),
        explained_variance=values[order],
        explained_variance_ratio=values[order] / values.sum(),
    )


def _nearest(x: torch.Tensor, centroids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Index of each row's nearest centroid and the squared distance to it."""
    d2 = torch.cdist(x, centroids).square()
    best, index = d2.min(dim=1)
    return index, best


def _lloyd_sums(loader: Iterable, centroids: torch.Tensor) -> torch.Tensor:
    """[per-cluster sums | per-cluster counts | inertia] of this rank's rows."""
    k, features = centroids.shape
    sums = torch.zeros(k, features, dtype=centroids.dtype)
    counts = torch.zeros(k, dtype=centroids.dtype)
    inertia = torch.zeros(1, dtype=centroids.dtype)
    for (x,) in loader:
        index, d2 = _nearest(x, centroids)
        sums.index_add_(0, index, x)
        counts += torch.bincount(index, minlength=k).to(counts.dtype)
        inertia += d2.sum()
    return torch.cat([sums.flatten(), counts, inertia])


def kmeans(loader: Iterable, initial: torch.Tensor, iterations: int) -> KMeansFit:
    """Lloyd's algorithm: ``iterations`` updates, then the inertia of the final centroids.

    An empty cluster keeps its centroid. A fixed number of updates (no early stop) makes
    every rank and the reference do the same work; after convergence updates change nothing.
    """
    k, features = initial.shape
    centroids = initial.clone()
    for _ in range(iterations):
        total = _sum_all(_lloyd_sums(loader, centroids))
        sums = total[: k * features].view(k, features)
        counts = total[k * features : k * features + k]
        filled = counts > 0
        centroids[filled] = sums[filled] / counts[filled, None]
    inertia = _sum_all(_lloyd_sums(loader, centroids))[-1]
    return KMeansFit(centroids, float(inertia), iterations)


def hinge_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.clamp(1 - labels * scores, min=0).mean()


def svm_model(features: int, seed: int = 0) -> DistributedDataParallel:
    """The linear model, the same on every rank, wrapped in DDP (float64)."""
    torch.manual_seed(seed)
    return DistributedDataParallel(nn.Linear(features, 1, dtype=torch.float64))


def svm(
    model: DistributedDataParallel,
    rows: torch.Tensor,
    labels: torch.Tensor,
    steps_per_epoch: int,
    epochs: int,
    batch_size: int,
    *,
    lr: float = 0.05,
    l2: float = 1e-4,
    seed: int = 0,
) -> SvmFit:
    """A linear SVM (hinge loss, L2 on the weights) trained by SGD under DDP.

    DDP averages the gradient over ranks; every rank takes ``steps_per_epoch`` steps per
    epoch (the same on all ranks, which DDP needs) over its own shuffled shard.
    """
    linear = model.module
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    rank = dist.get_rank()
    loader = batches(rows, labels, batch_size, torch.Generator().manual_seed(seed + rank))
    for _ in range(epochs):
        for x, y in itertools.islice(loader, steps_per_epoch):
            optimizer.zero_grad(set_to_none=True)
            loss = hinge_loss(model(x).squeeze(1), y) + 0.5 * l2 * linear.weight.square().sum()
            loss.backward()
            optimizer.step()
    weight, bias = linear.weight.detach()[0].clone(), linear.bias.detach().item()
    return SvmFit(weight, bias, steps_per_epoch * epochs)


def accuracy(fit: SvmFit, rows: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of all ranks' rows the SVM classifies right."""
    with torch.no_grad():
        predicted = torch.where(rows @ fit.weight + fit.bias >= 0, 1.0, -1.0)
    counts = torch.tensor(
        [float((predicted == labels).sum()), float(len(labels))], dtype=torch.float64
    )
    right, total = _sum_all(counts).tolist()
    return right / total
