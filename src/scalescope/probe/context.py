"""Where a collective comes from: a thread-local tag set around DDP's own calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


PROBE_TAG = "scalescope"
"""The probe's own messages (the clock exchange): not recorded."""


def current_tag() -> str:
    return getattr(_local, "tag", "user")


@contextmanager
def tagged(tag: str) -> Iterator[None]:
    previous = getattr(_local, "tag", "user")
    _local.tag = tag
    try:
        yield
    finally:
        _local.tag = previous
