"""The user's secret for the live channel (launch/channel/store.py): whoever reaches a job's
store can read and write its keys, so what acts on the job (flush, stacks and stop requests)
and what it believes (the ranks' live states, their stacks) carry an HMAC-SHA256 under this
key, and only holders of the key can make one.

The key is a file no launcher has to hand out: ``~/.scalescope/key`` (a cluster's nodes
share the home directory) or ``SCALESCOPE_KEY_FILE``, 32 random bytes created on first use.
Like ssh with a private key, a file another user owns, one the group or others can read, a
symbolic link (opened with ``O_NOFOLLOW``), or one in a folder another user owns or the group
or others can write (where the file could be swapped) is refused.

One key serves all of a user's jobs, so every seal also covers the job's id (``job_context``):
random, made by the end that owns the job's channel and published in its store, itself sealed
(``JOB_CONTEXT``). A value sealed for another running job of the same user, or for an earlier
job, does not open in this one.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_ENV = "SCALESCOPE_KEY_FILE"
KEY_BYTES = 32
TAG_BYTES = 32
JOB_ID_BYTES = 16
JOB_CONTEXT = b"job-id:"
"""What the seal of the job's id covers besides the id: only that it is one."""


class KeyFileError(ValueError):
    """The key file cannot be used; the message is one line that says how to fix it."""


def key_path() -> Path:
    named = os.environ.get(KEY_ENV, "").strip()
    return Path(named).expanduser() if named else Path.home() / ".scalescope" / "key"


def load_key(create: bool = True) -> bytes:
    """The user's key, created (0600, in a 0700 directory) when there is none and ``create``."""
    path = key_path()
    if create and not os.path.lexists(path):
        _create(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise KeyFileError(
            f"no key file at {path}: it is created by a multi-node or srun/mpirun run of this "
            f"user; on another machine, copy it there (mode 0600) or set {KEY_ENV}"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise KeyFileError(
                f"the key file {path} is a symbolic link, which scalescope does not follow: "
                f"put the key itself there (mode 0600) or set {KEY_ENV} to it"
            ) from None
        raise KeyFileError(f"cannot read the key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        _check_folder(path.parent)
        _check(path, os.fstat(f.fileno()))
        key = f.read()
    if len(key) < KEY_BYTES:
        raise KeyFileError(f"the key file {path} holds {len(key)} bytes, fewer than {KEY_BYTES}")
    return key


def _check(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"the key file {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise KeyFileError(f"the key file {path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        raise KeyFileError(
            f"the key file {path} can be read by others (mode {stat.S_IMODE(info.st_mode):04o}): "
            f"chmod 600 {path}"
        )


def _check_folder(folder: Path) -> None:
    """Whoever can write the key's folder can replace the key with one they know."""
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise KeyFileError(
            f"the key's folder {folder} belongs to another user (uid {info.st_uid}): "
            f"set {KEY_ENV} to a file in a folder of yours"
        )
    if info.st_mode & 0o022:
        raise KeyFileError(
            f"the key's folder {folder} can be written by others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}): chmod go-w {folder}"
        )


def _create(path: Path) -> None:
    """Written whole under a temporary name, then linked into place: of the tasks of a job
    that start together on nodes sharing the home directory, one creates the key and every
    other reads that one (``link`` fails on an existing name, on NFS too)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as exc:
        raise KeyFileError(f"cannot create the key file {path}: {exc.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)


def seal(key: bytes, context: bytes, payload: bytes) -> bytes:
    """``payload`` followed by its tag, which also covers ``context``: what the value is
    for (its rank, request and count), so it cannot be replayed as another."""
    return payload + hmac.digest(key, context + payload, hashlib.sha256)


def unseal(key: bytes, context: bytes, value: bytes) -> bytes | None:
    """The payload of a value ``seal`` made with this key and context; None otherwise."""
    payload, got = value[:-TAG_BYTES], value[-TAG_BYTES:]
    want = hmac.digest(key, context + payload, hashlib.sha256)
    return payload if len(value) >= TAG_BYTES and hmac.compare_digest(want, got) else None


NOT_SEALED = (
    "not sealed with this user's key for this job (written by someone without it, for "
    "another job, or the nodes read different key files: ~/.scalescope/key or "
    "SCALESCOPE_KEY_FILE)"
)


def new_job_id() -> bytes:
    """A job's id: random, so no two jobs (of one user, under one key) share one."""
    return secrets.token_hex(JOB_ID_BYTES).encode()


def job_context(job: bytes, name: bytes) -> bytes:
    """What a seal in a job's store covers besides its payload: the job's id and the value's
    name (its rank, request, count), so it cannot stand for another job's nor another value."""
    return b"job:" + job + b":" + name


def request_name(session: bytes, what: str) -> bytes:
    """A request's name: the relay's session and the request."""
    return b"ask:" + session + b":" + what.encode() + b":"
