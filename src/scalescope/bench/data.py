"""Training data for the bench workload: synthetic images or an ImageFolder, and the loader."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import datasets, transforms
from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EXPECTED_LAYOUT = (
    "expected DIR/<class>/<image>: one subdirectory per class, each holding image files ("
    + ", ".join(IMG_EXTENSIONS)
    + "), or shards from `scalescope data pack`"
)


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


def _has_image(directory: str) -> bool:
    for _, _, files in os.walk(directory, followlinks=True):
        if any(has_file_allowed_extension(f, IMG_EXTENSIONS) for f in files):
            return True
    return False


def _folder_problem(root: Path) -> tuple[str | None, int]:
    """What keeps `root` from being an ImageFolder (None if nothing), and its class count.

    Class folders are found exactly as torchvision's `find_classes` does (every
    subdirectory, hidden ones included), so the count matches what ImageFolder will use.
    """
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        loose = any(has_file_allowed_extension(f.name, IMG_EXTENSIONS) for f in os.scandir(root))
        found = "image files but no class subdirectories" if loose else "no class subdirectories"
        return f"has {found}", 0
    empty = [c for c in classes if not _has_image(os.path.join(root, c))]
    if empty:
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        return f"class folders without image files: {shown}", len(classes)
    return None, len(classes)


def validate_image_folder(path: str | os.PathLike[str]) -> int:
    """Number of classes of the ImageFolder at `path`; `ValueError` (one line) if it is not one."""
    root = Path(path)
    if not root.exists():
        problem: str | None = "does not exist"
    elif not root.is_dir():
        problem = "is not a directory"
    else:
        problem, num_classes = _folder_problem(root)
    if problem is not None:
        raise ValueError(f"--data {root}: {problem}; {EXPECTED_LAYOUT}")
    return num_classes


def validate_data(path: str | os.PathLike[str]) -> int:
    """Number of classes of a shard directory (``data pack``) or an ImageFolder at ``path``.

    `ValueError` (one line) if it is neither or a shard is missing or truncated.
    """
    from scalescope.bench.shards import is_shard_dir, validate_shard_dir

    if is_shard_dir(path):
        return len(validate_shard_dir(path).classes)
    return validate_image_folder(path)


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
