"""A writer with access to a job's store but not the user's key (launch/channel/store.py): it
reads everything there, the job's id and the relays' sessions included (a seal hides nothing,
it only vouches), and writes what it likes, sealed with a key of its own."""

from __future__ import annotations

from typing import Any

from scalescope.launch.channel.seals import TAG_BYTES
from scalescope.launch.channel.store import JOB_KEY, PREFIX, Channel

OTHER_KEY = b"o" * 32


def payload(store: Any, key: str) -> bytes:
    """What a sealed value says, without its tag."""
    return bytes(store.get(key))[:-TAG_BYTES]


class Intruder(Channel):
    """Its seals name the job's id and the relays' sessions as the store shows them."""

    def __init__(self, store: Any, key: bytes = OTHER_KEY) -> None:
        job = payload(store, JOB_KEY) if store.check([JOB_KEY]) else b"none"
        super().__init__(store, key=key, job=job, warn=None)

    def sessions(self) -> list[tuple[int, bytes]]:
        count = int(self.store.add(f"{PREFIX}relays", 0))
        return [(i, payload(self.store, f"{PREFIX}relay/{i}")) for i in range(count)]
