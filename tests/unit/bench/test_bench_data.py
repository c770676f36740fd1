from pathlib import Path

import pytest
import torch
from PIL import Image

from scalescope.bench.data import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    SyntheticImages,
    build_loader,
    image_folder,
)
from scalescope.bench.data_check import IMG_EXTENSIONS, validate_image_folder


def write_images(directory: Path, count: int, suffix: str = ".jpg") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        color = (40 * i % 256, 255 - 30 * i % 256, 90)
        Image.new("RGB", (40 + 3 * i, 36 + 2 * i), color).save(directory / f"img{i}{suffix}")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    write_images(root / "cat", 4)
    write_images(root / "dog", 3, ".png")
    write_images(root / "eel" / "nested", 2, ".JPG")
    return root


def test_image_folder_is_valid(folder: Path) -> None:
    assert validate_image_folder(folder) == 3
    assert validate_image_folder(str(folder)) == 3


def layout_error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        validate_image_folder(path)
    message = str(info.value)
    assert "\n" not in message
    assert "expected DIR/<class>/<image>" in message and ".jpg" in message
    return message


def test_missing_path(tmp_path: Path) -> None:
    assert "does not exist" in layout_error(tmp_path / "nowhere")


def test_file_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file.jpg").write_bytes(b"x")
    assert "is not a directory" in layout_error(tmp_path / "file.jpg")


def test_empty_directory(tmp_path: Path) -> None:
    assert "has no class subdirectories" in layout_error(tmp_path)


def test_flat_directory_of_images(tmp_path: Path) -> None:
    write_images(tmp_path, 2)
    assert "image files but no class subdirectories" in layout_error(tmp_path)


def test_class_without_images(folder: Path) -> None:
    (folder / "fox").mkdir()
    (folder / "fox" / "notes.txt").write_text("not an image")
    assert "class folders without image files: fox" in layout_error(folder)


def test_synthetic_shapes_and_labels() -> None:
    data = SyntheticImages(length=100, image_size=24, num_classes=10, seed=3)
    assert len(data) == 100
    image, label = data[99]
    assert image.shape == (3, 24, 24) and image.dtype == torch.float32
    assert label.dtype == torch.int64 and 0 <= int(label) < 10
    with pytest.raises(IndexError):
        data[100]


def test_synthetic_is_a_fixed_pool_from_the_seed() -> None:
    a = SyntheticImages(length=200, image_size=8, num_classes=5, seed=1)
    b = SyntheticImages(length=10, image_size=8, num_classes=5, seed=1)
    c = SyntheticImages(length=10, image_size=8, num_classes=5, seed=2)
    assert torch.equal(a[3][0], b[3][0]) and a[3][1] == b[3][1]
    assert torch.equal(a[3][0], a[3 + 64][0])
    assert not torch.equal(a[3][0], c[3][0])
    assert not torch.equal(a[3][0], a[4][0])


def test_loader_splits_full_batches_between_ranks() -> None:
    data = SyntheticImages(length=42, image_size=8, num_classes=5)
    loaders = [build_loader(data, 4, 0, False, seed=0, rank=r, world_size=2) for r in (0, 1)]
    assert [len(loader) for loader in loaders] == [5, 5]
    shares = [set(iter(loader.sampler)) for loader in loaders]
    assert not shares[0] & shares[1]
    assert len(shares[0] | shares[1]) == 42
    for images, labels in loaders[0]:
        assert images.shape == (4, 3, 8, 8) and labels.shape == (4,)


def test_loader_shuffles_by_epoch() -> None:
    loader = build_loader(
        SyntheticImages(length=64, image_size=4, num_classes=2), 8, 0, False, 0, 0, 1
    )
    first = list(iter(loader.sampler))
    loader.sampler.set_epoch(1)
    assert sorted(first) == sorted(iter(loader.sampler)) and first != list(iter(loader.sampler))


def test_loader_workers_persist() -> None:
    data = SyntheticImages(length=16, image_size=4, num_classes=2)
    assert build_loader(data, 4, 1, False, 0, 0, 1).persistent_workers
    assert not build_loader(data, 4, 0, False, 0, 0, 1).persistent_workers


def test_image_folder_loader_yields_normalized_tensors(folder: Path) -> None:
    loader = build_loader(image_folder(folder, 16), 3, 0, False, seed=0, rank=0, world_size=1)
    assert len(loader) == 3
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    for images, labels in loader:
        assert images.shape == (3, 3, 16, 16) and images.dtype == torch.float32
        assert set(labels.tolist()) <= {0, 1, 2}
        pixels = images * std + mean
        assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5
    assert images.min() < 0


def test_the_image_extensions_are_torchvisions():
    """The torch-free check of --data knows the files ImageFolder reads, no more, no less."""
    from torchvision.datasets.folder import IMG_EXTENSIONS as TORCHVISION

    assert IMG_EXTENSIONS == TORCHVISION
