"""The words for a hang's verdicts (analyze/watch/hang.py): the HANG finding's summary and the
launcher's and report's hang section use the same sentences."""

from __future__ import annotations

from scalescope.analyze.watch.hang import RankHang, Verdict
from scalescope.events.units import fmt_bytes_brief, fmt_seconds
from scalescope.events.units import number_ranges as rank_ranges

PHASE_WORDS = {
    "outside": "in host work (outside the recorded phases)",
    "data": "waiting for its DataLoader",
    "forward": "in forward",
    "backward": "in backward",
    "comm_wait": "waiting for its gradient buckets",
    "optimizer": "in the optimizer step",
}


def _ranks(ranks: tuple[int, ...]) -> str:
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {rank_ranges(ranks)}"


def _where(r: RankHang) -> str:
    if not r.phase:
        return f"ended after step {r.steps_done} (its phase then was not recorded)"
    return f"is {PHASE_WORDS.get(r.phase, 'in ' + r.phase)} since step {r.steps_done}"


def _coll(v: Verdict) -> str:
    return f"{v.op} #{v.seq} (group {v.group}, {fmt_bytes_brief(v.nbytes)})"


def on_hosts(picked: tuple[int, ...], ranks: dict[int, RankHang]) -> str:
    """ " on HOST" (or " on HOST1, HOST2") when the run spans nodes; "" on one node."""
    if len({r.host for r in ranks.values() if r.host}) < 2:
        return ""
    hosts = sorted({ranks[r].host for r in picked if r in ranks and ranks[r].host})
    return f" on {', '.join(hosts)}" if hosts else ""


def verdict_line(v: Verdict, ranks: dict[int, RankHang]) -> str:
    waits = f"{_ranks(v.waiting)} {'waits' if len(v.waiting) == 1 else 'wait'} in"
    if v.kind == "missing":
        where = "; ".join(f"rank {r} {_where(ranks[r])}" for r in v.ranks)
        verb = "has" if len(v.ranks) == 1 else "have"
        who = _ranks(v.ranks) + on_hosts(v.ranks, ranks)
        waited = fmt_seconds(v.waited_s)
        return f"{who} {verb} not entered {_coll(v)} that {waits} for {waited}; {where}"
    if v.kind == "mismatch":
        return (
            f"{_ranks(v.waiting)} called {v.op}, {_ranks(v.ranks)} called {v.other_op} with "
            f"the same sequence number (#{v.seq}, group {v.group}): the ranks do not issue "
            "the same collectives in the same order"
        )
    if v.kind == "behind":
        return (
            f"{_ranks(v.ranks)} {'waits' if len(v.ranks) == 1 else 'wait'} in {v.other_op} "
            f"#{v.other_seq} (group {v.group}) while {waits} {_coll(v)}: one side issued "
            "more collectives than the other"
        )
    if v.kind == "ended":
        status = ", ".join(
            f"rank {r}{on_hosts((r,), ranks)}: {ranks[r].ended or 'gone'}" for r in v.ranks
        )
        tail = f" while {waits} {_coll(v)} for {fmt_seconds(v.waited_s)}" if v.waiting else ""
        return (
            f"{_ranks(v.ranks)} no longer {'runs' if len(v.ranks) == 1 else 'run'} ({status}){tail}"
        )
    if v.kind == "unfinished":
        call = _coll(v) if v.op else f"call #{v.seq} (group {v.group})"
        verb = "has" if len(v.ranks) == 1 else "have"
        who = _ranks(v.ranks) + on_hosts(v.ranks, ranks)
        return (
            f"{who} {verb} not completed {call} that {_ranks(v.waiting)} completed (their "
            "flight recorders)"
        )
    if v.kind == "all_waiting":
        return (
            f"{_ranks(v.waiting)} all wait in {_coll(v)} for {fmt_seconds(v.waited_s)}: the "
            "collective itself does not complete (the network between the ranks, or a peer "
            "that cannot be reached)"
        )
    where = "; ".join(f"rank {r} {_where(ranks[r])}" for r in v.ranks)
    return f"no rank is in a collective: {where}"
