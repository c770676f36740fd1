"""Copy a shard directory to node-local disk or RAM (``scalescope data stage``).

Run it in every rank of a job (``srun``, ``mpirun``, ``torchrun``): the world discovery of
``scalescope.launch.world.detect`` tells each process its local rank; local rank 0 of each node
copies, the others wait until the node's copy is complete. Without a launcher the process
copies. Every shard is copied under a temporary name, checked against the manifest's
SHA-256 and renamed; the manifest goes last and marks the copy complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scalescope.bench.shard_manifest import (
    MANIFEST,
    Manifest,
    ShardError,
    ShardInfo,
    validate_shard_dir,
)
from scalescope.launch.world.detect import detect_world

FAILED = ".stage-failed"
"""Written by the copying process when it fails, so the waiting ones stop at once."""
CHUNK = 8 << 20
Progress = Callable[[int, int], None]
"""Called with (bytes just copied, bytes of all shards)."""


@dataclass(frozen=True)
class StageResult:
    dest: str
    action: str
    """copied, up to date (nothing to copy) or waited (another process copied)."""
    files: int
    nbytes: int
    local_rank: int | None
    """None without a launcher."""
    node_rank: int | None


def _is_complete(dest: Path, manifest_text: str) -> bool:
    try:
        if (dest / MANIFEST).read_text() != manifest_text:
            return False
        validate_shard_dir(dest)
    except (OSError, ShardError):
        return False
    return True


def _copy_shard(src: Path, dest: Path, shard: ShardInfo, total: int, progress: Progress | None):
    target = dest / shard.name
    tmp = target.with_name(target.name + ".tmp")
    digest = hashlib.sha256()
    try:
        with open(src / shard.name, "rb") as fin, open(tmp, "wb") as fout:
            while chunk := fin.read(CHUNK):
                digest.update(chunk)
                fout.write(chunk)
                if progress:
                    progress(len(chunk), total)
            fout.flush()
            os.fsync(fout.fileno())
        if digest.hexdigest() != shard.sha256:
            raise ShardError(f"shard {src / shard.name} does not match its manifest checksum")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _copy_all(src: Path, dest: Path, manifest: Manifest, text: str, progress: Progress | None):
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)
    for shard in manifest.shards:
        _copy_shard(src, dest, shard, manifest.nbytes, progress)
    tmp = dest / (MANIFEST + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, dest / MANIFEST)


def copy_shards(
    src: Path, dest: Path, manifest: Manifest, job: str, progress: Progress | None
) -> str:
    """Copy unless ``dest`` already holds the same complete pack; the action taken."""
    text = (src / MANIFEST).read_text()
    if _is_complete(dest, text):
        return "up to date"
    failed = dest / FAILED
    try:
        failed.unlink(missing_ok=True)
        _copy_all(src, dest, manifest, text, progress)
    except (OSError, ShardError) as exc:
        message = str(exc) if isinstance(exc, ShardError) else f"copying to {dest}: {exc}"
        with contextlib.suppress(OSError):
            failed.write_text(f"{job}\n{message}\n")
        raise ShardError(message) from None
    return "copied"


def wait_for_copy(dest: Path, src: Path, job: str, timeout_s: float, poll_s: float) -> None:
    """Return once ``dest`` holds the complete pack; ShardError if the copier failed."""
    text = (src / MANIFEST).read_text()
    deadline = time.monotonic() + timeout_s
    while not _is_complete(dest, text):
        try:
            lines = (dest / FAILED).read_text().splitlines()
        except OSError:
            lines = []
        if len(lines) >= 2 and lines[0] == job:
            raise ShardError(f"local rank 0 failed to stage to {dest}: {lines[1]}")
        if time.monotonic() > deadline:
            raise ShardError(
                f"waited {timeout_s:g} s for local rank 0 to stage {src} to {dest}; "
                "did it start? (raise --timeout for large data sets)"
            )
        time.sleep(poll_s)


def stage_shards(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    env: Mapping[str, str] = os.environ,
    timeout_s: float = 3600.0,
    poll_s: float = 0.2,
    progress: Progress | None = None,
) -> StageResult:
    """Stage the shard directory ``src`` to ``dest`` once per node. ShardError (or
    ``WorldError``, a ValueError) with a one-line message on failure."""
    source, target = Path(src), Path(dest)
    manifest = validate_shard_dir(source)
    if source.resolve() == target.resolve():
        raise ShardError(f"{dest} is the source itself; stage to another directory")
    world = detect_world(env)
    job = (world.job_id or f"{world.master_addr}:{world.master_port}") if world else "local"
    if world is None or world.local_rank == 0:
        action = copy_shards(source, target, manifest, job, progress)
    else:
        wait_for_copy(target, source, job, timeout_s, poll_s)
        action = "waited"
    copied = action == "copied"
    return StageResult(
        dest=str(target),
        action=action,
        files=len(manifest.shards) if copied else 0,
        nbytes=manifest.nbytes if copied else 0,
        local_rank=world.local_rank if world else None,
        node_rank=world.node_rank if world else None,
    )
