"""A ``--ranks`` value, read before anything is analysed: ``0,worst:8,best:4,5-7``.

A spec is a comma-separated list of items, each one of:

- ``N``: rank N;
- ``A-B``: ranks A to B, both included;
- ``worst:K``: the K slowest ranks, ``best:K``: the K fastest;
- ``all``: every rank.

report/views/rank_select.py picks the ranks of a run it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ITEM = re.compile(r"(?P<rank>\d+)|(?P<lo>\d+)-(?P<hi>\d+)|(?P<which>worst|best):(?P<k>\d+)|all")
SYNTAX = "a rank N, a range A-B, worst:K, best:K or all, separated by commas"


class RankSpecError(ValueError):
    """A ``--ranks`` value that cannot be read or names ranks the run does not have."""


@dataclass(frozen=True)
class RankSpec:
    text: str
    ranks: tuple[int, ...] = ()
    """Named ranks, ranges expanded, in the order given."""
    worst: int = 0
    best: int = 0
    every: bool = False


def parse_rank_spec(text: str) -> RankSpec:
    """Read a ``--ranks`` value; a RankSpecError names the item it cannot read."""
    ranks: list[int] = []
    worst = best = 0
    every = False
    items = [item.strip() for item in text.split(",")]
    for item in items:
        match = _ITEM.fullmatch(item)
        if match is None:
            what = f"{item!r} is not" if item else "an empty item is not"
            raise RankSpecError(f"--ranks {text!r}: {what} {SYNTAX}")
        if match["rank"] is not None:
            ranks.append(int(match["rank"]))
        elif match["lo"] is not None:
            lo, hi = int(match["lo"]), int(match["hi"])
            if lo > hi:
                raise RankSpecError(f"--ranks {text!r}: range {item} ends before it starts")
            ranks.extend(range(lo, hi + 1))
        elif match["which"] is not None:
            k = int(match["k"])
            if k < 1:
                raise RankSpecError(f"--ranks {text!r}: {item} selects no rank (K must be >= 1)")
            worst, best = (
                (max(worst, k), best) if match["which"] == "worst" else (worst, max(best, k))
            )
        else:
            every = True
    return RankSpec(text, tuple(ranks), worst, best, every)
