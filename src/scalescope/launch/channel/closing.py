"""The store dies with its owner (rank 0's scalescope process, launch/world/rendezvous.py), and a
client's request to a closed store prints a C++ trace (``Broken pipe``) in the job's output.
So the owner closes it politely (:func:`close_store`): it waits until every relay said how its
rank ended (its last request), then asks every relay to ``close`` (sealed, as the other
requests) and marks the store closing for ``top --connect``: a relay that is asked says it
left, and asks nothing more.
"""

from __future__ import annotations

import contextlib
import time

from scalescope.launch.channel.store import CLOSE, RELAY_POLL_S, Channel

ENDS_WAIT_S = 10.0
"""How long the store's owner waits for the relays' last words before it closes the store: a
rank may end some seconds after rank 0 (its rank file, its interpreter's exit)."""
LEAVE_WAIT_S = 5.0
"""After the ``close`` request: how long the owner waits for the relays still polling to say
they left (a busy machine may not run one for a while)."""


def close_store(
    channel: Channel, ranks: int, wait_s: float = ENDS_WAIT_S, leave_s: float = LEAVE_WAIT_S
) -> int:
    """What the store's owner does before it closes the store: wait (at most ``wait_s``) until
    the relays said how each of ``ranks`` ranks ended, then ask them to ``close``; wait (at
    most ``leave_s``) until the relays whose ranks run on said they left, and one poll more
    for a ``top --connect`` frame under way. The number of ranks whose end was heard."""
    heard = 0
    with contextlib.suppress(Exception):  # a store that already failed: nothing to protect
        deadline = time.monotonic() + wait_s
        while (heard := channel.ended_count()) < ranks and time.monotonic() < deadline:
            time.sleep(0.05)
        channel.mark_closing()
        channel.ask(CLOSE)
        deadline = time.monotonic() + leave_s
        while heard < ranks and time.monotonic() < deadline:
            time.sleep(0.05)
            if channel.left_count() + (heard := channel.ended_count()) >= ranks:
                break
        time.sleep(RELAY_POLL_S)
    return heard
