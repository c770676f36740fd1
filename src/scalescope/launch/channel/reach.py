"""Reaching the job's TCPStore: its address, a client that waits for it without TCPStore's
warnings, and fails an operation in seconds once connected."""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Any

CONNECT_S = 600.0
"""How long a relay waits for the store: rank 0's process may create it at its
``init_process_group``, after its imports."""
OP_TIMEOUT = timedelta(seconds=10)
DEFAULT_RDZV_PORT = 29400
"""torchrun's port of a ``--rdzv-endpoint`` given without one."""


def connect(addr: str, port: int, timeout_s: float = CONNECT_S) -> Any:
    """A client of the job's TCPStore, waiting up to ``timeout_s`` for the server, in tries
    of OP_TIMEOUT: a client keeps its constructor's timeout to reconnect later, and a store
    that became unreachable must fail an operation in seconds, not minutes."""
    from torch.distributed import TCPStore

    deadline = time.monotonic() + timeout_s
    while True:
        if not wait_for_port(addr, port, deadline):
            raise RuntimeError(f"nothing listens at {addr}:{port}")
        try:
            return TCPStore(addr, port, is_master=False, timeout=OP_TIMEOUT, wait_for_workers=False)
        except RuntimeError:  # DistNetworkError, DistStoreError: not there (yet)
            if time.monotonic() >= deadline:
                raise


def wait_for_port(addr: str, port: int, deadline: float) -> bool:
    """Until something listens at ``addr:port`` (or the deadline): a plain socket, so no
    failed try of TCPStore's prints its warnings while rank 0 is still importing torch."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((addr, port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def split_address(text: str, default_port: int = DEFAULT_RDZV_PORT) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``, with ``default_port``)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        return text, default_port
    return host, int(port)
