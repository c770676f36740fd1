"""The store's owner closes it politely (channel.closing.close_store): it waits for the relays'
last words, asks the relays to ``close`` (sealed) and marks the store closing, and a relay or
``top --connect`` told so never asks the store again, so no C++ trace of torch's store client
follows its end. Real TCPStores in this process; the owner's end is the server object
deleted."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from datetime import timedelta
from pathlib import Path

from torch.distributed import TCPStore

from scalescope.launch.channel.closing import close_store
from scalescope.launch.channel.relay import Relay
from scalescope.launch.channel.store import Channel
from scalescope.live.store_view import StoreTop

TRACE = ("Exception raised from", "Broken pipe", "failed on SocketImpl")
KEY, JOB = b"k" * 32, b"j" * 32


def channel(store: TCPStore) -> Channel:
    return Channel(store, key=KEY, job=JOB)


def server() -> TCPStore:
    return TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10)
    )


def relay_of(store: TCPStore, tmp_path: Path) -> Relay:
    """A relay of rank 1 (this process standing for it), connected to ``store``."""
    relay = Relay("127.0.0.1", store.port, tmp_path, lambda: {1: os.getpid()}, 2, key=KEY, job=JOB)
    relay.start()
    deadline = time.monotonic() + 10
    while channel(store).world_size() != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return relay


def no_trace(capfd) -> None:
    err = capfd.readouterr().err
    assert not [t for t in TRACE if t in err], err


def test_the_owner_waits_for_the_last_words_before_closing(tmp_path, capfd):
    store = server()
    relay = relay_of(store, tmp_path)
    threading.Timer(0.5, relay.finish).start()  # the rank ends a moment after the owner's
    heard = close_store(channel(store), ranks=1, wait_s=10.0)
    assert heard == 1
    assert channel(store).ended(1) == "unknown", "no rank file: its end is said as unknown"
    del store
    gc.collect()
    time.sleep(0.2)
    no_trace(capfd)


def test_a_relay_whose_rank_runs_on_leaves_a_closing_store_alone(tmp_path, capfd):
    store = server()
    relay = relay_of(store, tmp_path)
    heard = close_store(channel(store), ranks=1, wait_s=0.2)
    assert heard == 0
    relay.join(timeout=5)
    assert relay.closed and not relay.is_alive()
    assert channel(store).left_count() == 1, "the relay said it left"
    del store
    gc.collect()
    relay.finish()  # its rank ends after the store closed: not a word to it
    time.sleep(0.2)
    no_trace(capfd)


def test_the_trace_is_what_a_request_to_a_closed_store_prints(capfd):
    """The other tests' check can fail: a client's request after the owner left prints it."""
    store = server()
    one_s = timedelta(seconds=1)
    client = channel(TCPStore("127.0.0.1", store.port, is_master=False, timeout=one_s))
    client.put_world(2)
    del store
    gc.collect()
    time.sleep(0.2)
    with contextlib.suppress(RuntimeError):
        client.closing()
    assert "Exception raised from" in capfd.readouterr().err


def test_top_connect_stops_asking_a_closing_store(capfd):
    store = server()
    owner = channel(store)
    owner.put_world(2)
    top = StoreTop(channel(TCPStore("127.0.0.1", store.port, is_master=False)))
    top.frame()
    assert not top.ended
    close_store(owner, ranks=2, wait_s=0.0, leave_s=0.0)
    last = top.frame()
    assert top.ended and last is not None
    del store, owner
    gc.collect()
    time.sleep(0.2)
    assert top.frame() is last
    no_trace(capfd)
