"""Packing an image folder into shards and reading them back, checked against the files."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from image_folders import make_image_folder
from PIL import Image

from scalescope.bench.data_check import validate_data
from scalescope.bench.shard_manifest import (
    ShardError,
    parse_size,
    read_manifest,
    validate_shard_dir,
)
from scalescope.bench.shards import load_sample, read_shard, shard_loader
from scalescope.data.pack import pack_folder

CLASSES, PER_CLASS = 3, 10


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return make_image_folder(tmp_path_factory.mktemp("data") / "images", CLASSES, PER_CLASS)


@pytest.fixture
def packed(folder: Path, tmp_path: Path) -> Path:
    pack_folder(folder, tmp_path / "shards", shard_bytes=parse_size("6kB"))
    return tmp_path / "shards"


def source_files(folder: Path) -> dict[bytes, int]:
    """Bytes of every image -> its class index (sorted class folder names)."""
    classes = sorted(p.name for p in folder.iterdir())
    return {f.read_bytes(): classes.index(f.parent.name) for f in folder.rglob("*.jpg")}


def pixels_digest(image: Image.Image) -> str:
    return hashlib.sha1(np.asarray(image.convert("RGB")).tobytes()).hexdigest()


def epoch_pairs(loader) -> list[tuple[str, int]]:
    return [pair for images, labels in loader for pair in zip(images, labels.tolist(), strict=True)]


def test_parse_size() -> None:
    assert parse_size("256MB") == 256_000_000
    assert parse_size("1GiB") == 2**30
    assert parse_size("1.5 kB") == 1500
    assert parse_size("4096") == 4096
    for bad in ("12XB", "MB", "-1MB", "0.1"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)


def test_shards_hold_every_image_once_with_its_class(folder: Path, packed: Path) -> None:
    expected = source_files(folder)
    manifest = read_manifest(packed)
    assert manifest.classes == ("c0", "c1", "c2")
    assert manifest.images == CLASSES * PER_CLASS == len(expected)
    assert len(manifest.shards) > 2
    seen: dict[str, bytes] = {}
    for shard in manifest.shards:
        path = packed / shard.name
        assert shard.nbytes == path.stat().st_size
        assert shard.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        with tarfile.open(path) as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        keys = {name.split(".")[0] for name in members}
        assert set(members) == {f"{k}.jpg" for k in keys} | {f"{k}.cls" for k in keys}
        assert shard.images == len(keys)
        for key in keys:
            assert int(members[f"{key}.cls"]) == expected[members[f"{key}.jpg"]]
            assert key not in seen
            seen[key] = members[f"{key}.jpg"]
    assert sorted(seen) == [f"{i:06d}" for i in range(len(expected))]
    assert set(seen.values()) == set(expected)


def test_shards_stay_under_the_size_and_mix_classes(packed: Path) -> None:
    manifest = read_manifest(packed)
    for shard in manifest.shards:
        assert shard.nbytes <= 6000 + 3 * 512 + 10240  # tar end blocks and record padding
    labels = [int(s["cls"]) for s in wds.WebDataset(str(packed / manifest.shards[0].name),
                                                     shardshuffle=False)]  # fmt: skip
    assert len(set(labels)) > 1


def test_webdataset_reads_the_shards(packed: Path) -> None:
    urls = [str(packed / s.name) for s in read_manifest(packed).shards]
    samples = list(wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("jpg", "cls"))
    assert len(samples) == CLASSES * PER_CLASS
    assert all(isinstance(img, Image.Image) and 0 <= cls < CLASSES for img, cls in samples)


def test_validate_data_counts_classes_of_shards_and_folders(folder: Path, packed: Path) -> None:
    assert validate_data(packed) == CLASSES
    assert validate_data(folder) == CLASSES


def test_loader_gives_every_rank_equal_batches_of_correct_samples(
    folder: Path, packed: Path
) -> None:
    classes = sorted(p.name for p in folder.iterdir())
    truth = {pixels_digest(Image.open(f)): classes.index(f.parent.name)
             for f in folder.rglob("*.jpg")}  # fmt: skip
    per_rank = []
    for rank in (0, 1):
        loader = shard_loader(packed, batch_size=4, workers=0, pin_memory=False, seed=1,
                              rank=rank, world_size=2, transform=pixels_digest)  # fmt: skip
        assert len(loader) == (CLASSES * PER_CLASS) // (4 * 2)
        epochs = [epoch_pairs(loader) for _ in range(3)]
        for epoch in epochs:
            assert len(epoch) == len(loader) * 4
            assert all(truth[digest] == label for digest, label in epoch)
        assert epochs[0] != epochs[1]
        per_rank.append({d for d, _ in epochs[0]})
    assert not per_rank[0] & per_rank[1]


def test_loader_workers_split_the_batches(packed: Path) -> None:
    loader = shard_loader(packed, batch_size=3, workers=2, pin_memory=False, seed=0, rank=0,
                          world_size=1, transform=pixels_digest)  # fmt: skip
    batches = [len(digests) for digests, _ in loader]
    assert batches == [3] * (CLASSES * PER_CLASS // 3) == [3] * len(loader)


def test_truncated_shard_is_named(packed: Path) -> None:
    shard = packed / read_manifest(packed).shards[1].name
    shard.write_bytes(shard.read_bytes()[:1000])
    with pytest.raises(ShardError, match=f"shard {shard} has 1000 bytes.*truncated"):
        validate_shard_dir(packed)
    with pytest.raises(ValueError, match="truncated"):
        validate_data(packed)


def test_damaged_shard_of_the_same_size_is_named_when_read(packed: Path) -> None:
    shard = packed / read_manifest(packed).shards[0].name
    data = bytearray(shard.read_bytes())
    data[512:514] = b"\0\0"  # the first JPEG's start-of-image marker
    shard.write_bytes(bytes(data))
    validate_shard_dir(packed)  # sizes still match: only reading tells
    with pytest.raises(ShardError, match=f"shard {shard}, sample 000000: the image does not"):
        for sample in read_shard(str(shard)):
            load_sample(*sample, transform=pixels_digest)
    count = read_manifest(packed).shards[0].images
    first = bytes(data)
    data[124:136] = b"garbage!!!!\0"  # the size field of the first header
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardError, match=f"shard {shard} is damaged at sample \\(first\\)"):
        list(read_shard(str(shard), count))
    data = bytearray(first)
    second = data.index(b"000001.jpg")
    data[second : second + 10] = b"\xff" * 10  # a later header: tarfile stops quietly there
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardError, match=f"shard {shard} is damaged after sample 000000: 1 of"):
        list(read_shard(str(shard), count))


def test_missing_manifest_and_missing_shard(packed: Path) -> None:
    first = read_manifest(packed).shards[0].name
    (packed / first).unlink()
    with pytest.raises(ShardError, match=f"shard {packed / first} is missing"):
        validate_shard_dir(packed)
    (packed / "manifest.json").unlink()
    with pytest.raises(ShardError, match="no manifest.json; pack it with `scalescope data pack`"):
        read_manifest(packed)


def test_interrupted_pack_leaves_no_partial_shard_and_no_manifest(
    folder: Path, tmp_path: Path
) -> None:
    packed_images = []

    def stop_after_12(nbytes: int, total: int) -> None:
        packed_images.append(nbytes)
        if len(packed_images) == 12:
            raise KeyboardInterrupt

    out = tmp_path / "shards"
    with pytest.raises(KeyboardInterrupt):
        pack_folder(folder, out, shard_bytes=6000, progress=stop_after_12)
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("*.tmp"))
    for shard in out.glob("*.tar"):
        with tarfile.open(shard) as tar:
            assert len(tar.getnames()) % 2 == 0 and tar.getnames()
    with pytest.raises(ShardError, match="no manifest.json"):
        validate_shard_dir(out)


def test_pack_refuses_a_used_output_and_a_bad_folder(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="exists and is not an empty directory"):
        pack_folder(folder, tmp_path / "used", 6000)
    assert (tmp_path / "used" / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="does not exist"):
        pack_folder(tmp_path / "nowhere", tmp_path / "out", 6000)
