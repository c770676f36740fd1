"""Where a collective comes from: a thread-local tag set around DDP's own calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
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
