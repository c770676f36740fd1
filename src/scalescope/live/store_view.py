"""The ranks' live states polled from the job's store (``top --connect``), from any node:
steps done and their rate per rank, and, once no rank has progressed for ``STALL_S``, the hang
verdict the watch would give; report/views/live_store.py draws it.

Where the relays publish their nodes' records (launch/channel/node_record.py), a frame reads
those and the states of the ranks they name (each node's slowest, the one longest in a
collective), not every rank's; the ranks no record covers (an older relay, a record that did
not open) are read one by one. Once nothing progressed for ``STALL_S`` the verdict needs
every rank's state: it is read once, and again only when a record changes."""

from __future__ import annotations

import time
from dataclasses import replace

from rich.console import RenderableType

from scalescope.analyze.watch.hang import rank_hang, verdicts
from scalescope.diagnose.hang_words import verdict_line
from scalescope.events.units import fmt_seconds
from scalescope.events.watch_stops import stop_line
from scalescope.launch.channel.node_record import NodeRecord, current
from scalescope.launch.channel.reach import connect
from scalescope.launch.channel.seals import load_key
from scalescope.launch.channel.store import Channel, freshness
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import StoreFrame, StoreRank, StoreSummary

CONNECT_WAIT_S = 5.0
STALL_S = 10.0
"""No rank progressed for this long: the view shows the hang verdict."""
NAMED = 16
"""Ranks named for the rows of each kind (longest in a collective, fewest steps): as many as a
frame shows (report/views/live_store.py MAX_ROWS)."""
ALL_ROWS_UP_TO = 256
"""Up to this many ranks the records cover, a frame reads all of their states for its rows
(~5 ms): the rows are each rank's worth showing, not only those the records name."""


def stall_words(ranks: list[StoreRank], now: float) -> str | None:
    """The line "no progress for T: VERDICT" once no rank progressed for STALL_S; else None."""
    progress = [r.state.last_progress_s for r in ranks if r.state.last_progress_s]
    if not progress or now - max(progress) < STALL_S:
        return None
    return f"no progress for {fmt_seconds(now - max(progress))}: {verdict_words(ranks, now)}"


def verdict_words(ranks: list[StoreRank], now: float) -> str:
    """What the hang watch would say of these ranks."""
    hangs = [
        replace(rank_hang(r.state, now, alive=not r.ended, ended=r.ended), host=r.host)
        for r in ranks
    ]
    found = verdicts(hangs)
    by_rank = {h.rank: h for h in hangs}
    return verdict_line(found[0], by_rank) if found else "no rank progressed"


def named_ranks(records: list[NodeRecord]) -> list[int]:
    """The ranks the records name worth a row: the NAMED in a collective since the
    earliest, and the NAMED with the fewest steps; every rank up to ALL_ROWS_UP_TO (the
    rows then as when every state is read)."""
    ranks = sorted(r for record in records for r in record.ranks)
    if len(ranks) <= ALL_ROWS_UP_TO:
        return ranks
    inside = sorted((rec.oldest.entered_s, rec.oldest.rank) for rec in records if rec.oldest)
    fewest = sorted((rec.steps_min, rec.slowest) for rec in records)
    return sorted({r for _, r in inside[:NAMED]} | {r for _, r in fewest[:NAMED]})


class StoreTop:
    """The ranks' live states polled from the job's store: each ``frame`` is their view."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ended = False
        """Every rank has ended, or the store is closing (``watch`` without a terminal then
        stops; with one, the last frame stays, and the store is no longer asked)."""
        self._before: dict[int, tuple[float, int]] = {}
        self._node_before: dict[int, tuple[float, int]] = {}
        self._hosts: dict[int, str] = {}
        self._last: RenderableType | None = None
        self._unknown: set[int] = set()
        self._stall: tuple[tuple, str] = ((), "")
        """The verdict of the last stall, with what the records said then."""

    def ranks(self, now: float, world: int | list[int]) -> list[StoreRank]:
        """The states of ``world`` ranks (or of those listed), their rates and ends; the
        unknown among them are noted for the frame."""
        asked = list(range(world)) if isinstance(world, int) else world
        states = self.channel.states(asked)
        self._unknown |= self.channel.unknown
        any_ended = bool(asked) and self.channel.ended_count() > 0
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
        self._unknown = set()
        records = current(self.channel.node_records())
        unknown_nodes = sorted(self.channel.unknown_nodes)
        if records or unknown_nodes:
            ranks, summary, stall = self.from_records(now, world, list(records.values()))
            self.ended = summary.ended >= world > 0
        else:
            ranks, summary = self.ranks(now, world), None
            stall = stall_words(ranks, now)
            self.ended = bool(ranks) and len(ranks) == world and all(r.ended for r in ranks)
        alert = self.channel.alert()
        unknown = [(r, self._host(r)) for r in sorted(self._unknown)]
        stopped = [stop_line(w, e) for w, e in self.channel.watch_stops().items()]
        shown = StoreFrame(ranks=ranks, world=world, now=now, stall=stall, alert=alert,
                           unknown=unknown, stopped=stopped, summary=summary,
                           unknown_nodes=unknown_nodes)  # fmt: skip
        self._last = document_renderable(document(shown))
        return self._last

    def from_records(
        self, now: float, world: int, records: list[NodeRecord]
    ) -> tuple[list[StoreRank], StoreSummary, str | None]:
        """The rows, head and verdict of a frame from the nodes' records: the ranks no record
        covers and those the records name are read, every rank only at a stall."""
        covered = {r for record in records for r in record.ranks}
        rest = self.ranks(now, [r for r in range(world) if r not in covered])
        shown = self.ranks(now, named_ranks(records))
        for record in records:
            self._hosts.update(dict.fromkeys(record.ranks, record.host))
        summary = self.summary(now, records, rest)
        progress = [r.last_progress_s for r in records if r.last_progress_s]
        progress += [r.state.last_progress_s for r in rest if r.state.last_progress_s]
        if not progress or now - max(progress) < STALL_S:
            return rest + shown, summary, None
        said = tuple((r.host, r.at_s) for r in records) + tuple(
            (r.state.rank, freshness(r.state)) for r in rest
        )
        if said != self._stall[0]:
            read = rest + shown
            everyone = read if len(read) == world else self.ranks(now, world)
            self._stall = (said, verdict_words(everyone, now))
        stall = f"no progress for {fmt_seconds(now - max(progress))}: {self._stall[1]}"
        return rest + shown, summary, stall

    def summary(self, now: float, records: list[NodeRecord], rest: list[StoreRank]) -> StoreSummary:
        """The head: the records' ranks and those read one by one (``rest``); the rate is the
        slowest node's (its fewest steps since the previous frame; a node known by its first
        rank)."""
        rates = []
        for record in records:
            key = record.ranks[0]
            if key in self._node_before:
                then, steps = self._node_before[key]
                if now > then:
                    rates.append((record.steps_min - steps) / (now - then))
            self._node_before[key] = (now, record.steps_min)
        rates += [r.steps_per_s for r in rest if r.steps_per_s is not None]
        told = StoreSummary.of_ranks(rest)
        steps = [(r.steps_min, r.steps_max) for r in records]
        steps += [(told.steps_min, told.steps_max)] if rest else []
        return StoreSummary(
            reporting=told.reporting + sum(len(r.ranks) for r in records),
            nodes=len({r.host for r in records} | {r.host for r in rest if r.host}),
            steps_min=min((s for s, _ in steps), default=0),
            steps_max=max((s for _, s in steps), default=0),
            steps_per_s=min(rates) if rates else None,
            starting=told.starting + sum(r.starting for r in records),
            ended=self.channel.ended_count(),
        )  # fmt: skip


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
