"""Staging shards: who copies (from the launcher's variables), checks, and failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from image_folders import make_image_folder

from scalescope.bench.shard_manifest import ShardError, read_manifest, validate_shard_dir
from scalescope.data.pack import pack_folder
from scalescope.data.stage import FAILED, stage_shards


def torchrun_env(local_rank: int, run_id: str = "job7") -> dict[str, str]:
    return {
        "RANK": str(local_rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511",
        "TORCHELASTIC_RUN_ID": run_id,
    }  # fmt: skip


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("stage")
    pack_folder(make_image_folder(tmp / "images", 2, 6), tmp / "shards", shard_bytes=5000)
    return tmp / "shards"


def test_copy_without_a_launcher_then_up_to_date(shards: Path, tmp_path: Path) -> None:
    manifest = read_manifest(shards)
    advanced: list[int] = []
    result = stage_shards(
        shards, tmp_path / "dest", env={}, progress=lambda n, t: advanced.append(n)
    )
    assert (result.action, result.files, result.nbytes) == ("copied", len(manifest.shards),
                                                            manifest.nbytes)  # fmt: skip
    assert sum(advanced) == manifest.nbytes
    assert result.local_rank is None
    for shard in manifest.shards:
        assert (tmp_path / "dest" / shard.name).read_bytes() == (shards / shard.name).read_bytes()
    assert validate_shard_dir(tmp_path / "dest") == manifest
    again = stage_shards(shards, tmp_path / "dest", env={})
    assert (again.action, again.files, again.nbytes) == ("up to date", 0, 0)


def test_local_rank_0_copies_while_local_rank_1_waits(shards: Path, tmp_path: Path) -> None:
    dest = tmp_path / "node-local"
    waited: list[object] = []
    waiter = threading.Thread(
        target=lambda: waited.append(stage_shards(shards, dest, env=torchrun_env(1), poll_s=0.01))
    )
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive() and not dest.exists()
    copied = stage_shards(shards, dest, env=torchrun_env(0))
    waiter.join(timeout=30)
    assert copied.action == "copied" and copied.local_rank == 0
    assert waited[0].action == "waited" and waited[0].local_rank == 1
    assert validate_shard_dir(dest) == read_manifest(shards)


def test_waiting_rank_gives_up_after_the_timeout(shards: Path, tmp_path: Path) -> None:
    with pytest.raises(ShardError, match="waited 0.3 s for local rank 0 to stage"):
        stage_shards(shards, tmp_path / "dest", env=torchrun_env(1), timeout_s=0.3, poll_s=0.05)


def test_damaged_source_fails_the_copier_and_its_waiters(shards: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in shards.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    name = read_manifest(bad).shards[1].name
    data = bytearray((bad / name).read_bytes())
    data[700] ^= 0xFF
    (bad / name).write_bytes(bytes(data))
    dest = tmp_path / "dest"
    with pytest.raises(ShardError, match=f"shard {bad / name} does not match its manifest"):
        stage_shards(bad, dest, env=torchrun_env(0))
    assert not (dest / "manifest.json").exists() and not list(dest.glob("*.tmp"))
    assert not (dest / name).exists()
    assert (dest / FAILED).exists()
    start = time.monotonic()
    with pytest.raises(ShardError, match="local rank 0 failed to stage .* does not match"):
        stage_shards(bad, dest, env=torchrun_env(1), timeout_s=60)
    assert time.monotonic() - start < 10
    with pytest.raises(ShardError, match="waited"):  # another job's failure is not ours
        stage_shards(bad, dest, env=torchrun_env(1, "job8"), timeout_s=0.2, poll_s=0.05)


def test_stage_refuses_its_own_source_and_a_folder_without_manifest(
    shards: Path, tmp_path: Path
) -> None:
    with pytest.raises(ShardError, match="is the source itself"):
        stage_shards(shards, shards, env={})
    with pytest.raises(ShardError, match="no manifest.json"):
        stage_shards(tmp_path, tmp_path / "dest", env={})
