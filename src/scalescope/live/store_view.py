"""The ranks' live states polled from the job's store (``top --connect``), from any node:
steps done and their rate per rank, and, once no rank has progressed for ``STALL_S``, the hang
verdict the watch would give; report/views/live_store.py draws it."""

from __future__ import annotations

import time
from dataclasses import replace

from rich.console import RenderableType

from scalescope.analyze.watch.hang import rank_hang, verdicts
from scalescope.diagnose.hang_words import verdict_line
from scalescope.events.units import fmt_seconds
from scalescope.events.watch_stops import stop_line
from scalescope.launch.channel.reach import connect
from scalescope.launch.channel.seals import load_key
from scalescope.launch.channel.store import Channel
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import StoreFrame, StoreRank

CONNECT_WAIT_S = 5.0
STALL_S = 10.0
"""No rank progressed for this long: the view shows the hang verdict."""


def stall_words(ranks: list[StoreRank], now: float) -> str | None:
    """The line "no progress for T: VERDICT" once no rank progressed for STALL_S; else None."""
    progress = [r.state.last_progress_s for r in ranks if r.state.last_progress_s]
    if not progress or now - max(progress) < STALL_S:
        return None
    hangs = [
        replace(rank_hang(r.state, now, alive=not r.ended, ended=r.ended), host=r.host)
        for r in ranks
    ]
    found = verdicts(hangs)
    by_rank = {h.rank: h for h in hangs}
    words = verdict_line(found[0], by_rank) if found else "no rank progressed"
    return f"no progress for {fmt_seconds(now - max(progress))}: {words}"


class StoreTop:
    """The ranks' live states polled from the job's store: each ``frame`` is their view."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ended = False
        """Every rank has ended, or the store is closing (``watch`` without a terminal then
        stops; with one, the last frame stays, and the store is no longer asked)."""
        self._before: dict[int, tuple[float, int]] = {}
        self._hosts: dict[int, str] = {}
        self._last: RenderableType | None = None

    def ranks(self, now: float, world: int) -> list[StoreRank]:
        states = self.channel.states(list(range(world)))
        any_ended = self.channel.ended_count() > 0
        out = []
        for rank, state in sorted(states.items()):
            rate = None
            if rank in self._before:
                then, steps = self._before[rank]
                if now > then:
                    rate = (state.steps_done - steps) / (now - then)
            self._before[rank] = (now, state.steps_done)
            ended = self.channel.ended(rank) if any_ended else ""
            out.append(StoreRank(state, self._host(rank), rate, ended))
        return out

    def _host(self, rank: int) -> str:
        if rank not in self._hosts:
            self._hosts[rank] = self.channel.host(rank)
        return self._hosts[rank]

    def frame(self) -> RenderableType:
        """The view; once the run ended, the last one, without asking a store about to close
        (its owner closes it soon after: channel.closing.close_store)."""
        if self._last is not None and self.ended:
            return self._last
        if self.channel.closing():
            self.ended = True
            return self._last if self._last is not None else "the job's store is closing"
        now = time.time()
        world = self.channel.world_size()
        ranks = self.ranks(now, world)
        self.ended = bool(ranks) and len(ranks) == world and all(r.ended for r in ranks)
        alert = self.channel.alert()
        unknown = [(r, self._host(r)) for r in sorted(self.channel.unknown)]
        stopped = [stop_line(w, e) for w, e in self.channel.watch_stops().items()]
        shown = StoreFrame(ranks=ranks, world=world, now=now, stall=stall_words(ranks, now),
                           alert=alert, unknown=unknown, stopped=stopped)  # fmt: skip
        self._last = document_renderable(document(shown))
        return self._last


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of the job's store (MASTER_ADDR:MASTER_PORT, or the rendezvous
    endpoint); a one-line error otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--connect takes HOST:PORT of the job's store, got {text!r}")
    return host, int(port)


def store_top(address: str) -> StoreTop:
    """The view through the store at ``address``; a one-line error when none answers, or
    without the user's key, which the states there are sealed with (it is not created here:
    a new key would check nothing)."""
    return StoreTop(store_channel(address))


def store_channel(address: str) -> Channel:
    """The job's channel through the store at ``address``, with the user's key (``top
    --connect``, ``flush --connect``); a one-line error as ``store_top``'s."""
    host, port = parse_address(address)
    key = load_key(create=False)
    try:
        return Channel(connect(host, port, timeout_s=CONNECT_WAIT_S), key=key, warn=None)
    except RuntimeError as exc:  # torch's DistStoreError and DistNetworkError among them
        raise ValueError(f"no store answers at {address}: {str(exc).splitlines()[0]}") from None


CONNECT_WAIT_S = 5.0
