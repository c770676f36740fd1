"""Training data for the bench workload: synthetic images or an ImageFolder, and the loader."""

from __future__ import annotations

import os

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import datasets, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class SyntheticImages(Dataset):
    """`length` samples drawn, modulo the pool, from `pool_size` random images and labels.

    A small pool generated once keeps memory and start-up cost independent of `length`, and
    indexing costs no computation, so the benchmark measures the model and not the data.
    """

    def __init__(
        self, length: int, image_size: int, num_classes: int, seed: int = 0, pool_size: int = 64
    ) -> None:
        if length < 1 or image_size < 1 or num_classes < 1 or pool_size < 1:
            raise ValueError("length, image_size, num_classes and pool_size must be positive")
        generator = torch.Generator().manual_seed(seed)
        self.length = length
        self.images = torch.randn(pool_size, 3, image_size, image_size, generator=generator)
        self.labels = torch.randint(0, num_classes, (pool_size,), generator=generator)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} samples")
        k = index % len(self.labels)
        return self.images[k], self.labels[k]


def train_transforms(image_size: int) -> transforms.Compose:
    """The usual ImageNet training augmentation, ending in a normalised tensor."""
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
            transforms.RandomGrayscale(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def image_folder(path: str | os.PathLike[str], image_size: int) -> datasets.ImageFolder:
    """The ImageFolder at `path` with the training transforms."""
    return datasets.ImageFolder(os.fspath(path), transform=train_transforms(image_size))


def build_loader(
    dataset: Dataset,
    batch_size: int,
    workers: int,
    pin_memory: bool,
    seed: int,
    rank: int,
    world_size: int,
) -> DataLoader:
    """This rank's shuffled share of `dataset`, in full batches only.

    Dropping the last partial batch (in the sampler and the loader) gives every rank the same
    number of equal steps, which DDP needs and the throughput arithmetic assumes. Call
    `loader.sampler.set_epoch(epoch)` before each epoch for a new shuffle.
    """
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        pin_memory=pin_memory,
        drop_last=True,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(seed + rank),
    )
