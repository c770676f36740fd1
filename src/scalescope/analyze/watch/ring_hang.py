"""A hang's culprit from the ranks' flight recorders (events/flight_ring.py), beside the
verdicts of their live states (analyze/watch/hang.py).

A ring holds a rank's calls as they complete. Every rank of a group completes its calls in
the group's order, so a rank whose last completed call on a group is behind the latest its
peers completed there did not complete the next one: the call it is stuck in, or stopped
before. Where every rank's last completed call is the same, the rings name nothing (the
ranks wait in the same call, or one never entered it: the live states tell those apart).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scalescope.analyze.watch.hang import RankHang, Verdict
from scalescope.analyze.watch.ring_calls import RingCall

UNFINISHED = "unfinished"
"""The verdict's kind: ``ranks`` have not completed the call that ``waiting`` completed."""


def last_on_groups(ranks: Iterable[RankHang]) -> dict[str, dict[int, RingCall]]:
    """Per group, each rank's last completed call on it among its ring's last calls."""
    last: dict[str, dict[int, RingCall]] = defaultdict(dict)
    for r in ranks:
        for call in r.last_calls:  # the latest first
            if call.seq >= 0 and call.dur_s is not None:
                last[call.group].setdefault(r.rank, call)
    return last


def ring_verdicts(ranks: Iterable[RankHang]) -> list[Verdict]:
    """Per group and call: the ranks whose rings stop before it while a peer's holds it."""
    ranks = list(ranks)
    calls: dict[tuple[str, int], RingCall] = {}
    for r in ranks:
        for call in r.last_calls:
            if call.dur_s is not None:
                calls.setdefault((call.group, call.seq), call)
    out = []
    for group, by_rank in sorted(last_on_groups(ranks).items()):
        front = max(c.seq for c in by_rank.values())
        behind: dict[int, list[int]] = defaultdict(list)
        for rank, call in by_rank.items():
            if call.seq < front:
                behind[call.seq + 1].append(rank)
        for seq, stuck in sorted(behind.items()):
            named = calls.get((group, seq))
            done = tuple(sorted(r for r, c in by_rank.items() if c.seq >= seq))
            out.append(
                Verdict(
                    UNFINISHED,
                    tuple(sorted(stuck)),
                    waiting=done,
                    group=group,
                    seq=seq,
                    op=named.op if named else "",
                    nbytes=named.nbytes if named else 0,
                )  # fmt: skip
            )
    return out
