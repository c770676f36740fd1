"""Where a collective comes from: a thread-local tag set around DDP's own calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


PROBE_TAG = "scalescope"
"""The probe's own messages (the clock exchange, comm's barriers): not recorded."""
DDP_SETUP = "ddp_setup"
"""DDP's construction: its checks across ranks; only its coalesced broadcast of the
parameters is recorded (tag ``parameters``)."""
DDP_BUCKETS = "ddp_buckets"
"""DDP's pre-forward: the reducer's broadcast of the buckets it rebuilt; only the coalesced
broadcast of the buffers is recorded (tag ``buffers``)."""
UNRECORDED = frozenset({PROBE_TAG, DDP_SETUP, DDP_BUCKETS})
"""Tags whose collectives the probe leaves out: scalescope's own messages, and DDP's internal
ones, which the probe never saw before torch's group hooks (a DDP run records what it did)."""


_codes: dict[str, int] = {"user": 0}
_names: list[str] = ["user"]
_mirror: Callable[[int], None] | None = None
"""Told each tag's code as a thread enters and leaves it: the probe's C++ hooks keep the
thread's tag themselves (probe/native_rows.py)."""


def tag_code(tag: str) -> int:
    code = _codes.get(tag)
    if code is None:
        code = _codes[tag] = len(_names)
        _names.append(tag)
    return code


def tag_named(code: int) -> str:
    return _names[code] if 0 <= code < len(_names) else "user"


def mirror_tags(set_code: Callable[[int], None] | None) -> None:
    global _mirror
    _mirror = set_code


def current_tag() -> str:
    return getattr(_local, "tag", "user")


def _set(tag: str) -> None:
    _local.tag = tag
    if _mirror is not None:
        _mirror(tag_code(tag))


@contextmanager
def tagged(tag: str) -> Iterator[None]:
    previous = getattr(_local, "tag", "user")
    _set(tag)
    try:
        yield
    finally:
        _set(previous)
