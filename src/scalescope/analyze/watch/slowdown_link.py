"""Which link a slowdown of the collectives sits on, told live from the ranks' time in the
collectives of each process group smaller than the world (the live state's group slots,
events/live_state.py): pipeline or tensor-parallel pairs, a mesh dimension, per-node groups.

A slow link lengthens the time in the collectives of the groups that cross it: for every
member of a collective (the bytes move slower once all are there), for the receiver of a
point-to-point transfer (a sender's ``isend`` completes once the kernel holds its bytes, then
the receiver waits for them to cross). A group's *growth* is therefore the most that any of
its members' time per step in its collectives grew. Only slowdowns of the collectives come
here (no rank's own work grew), so a rank that arrived late to a group was itself held in
another group, which grew at least as much. Groups are compared as analyze/ranks/links.py
compares them, within classes of the same size and number of hosts spanned (a pair inside a
host is never compared with a pair across two): the group that grew the most is on the slow
link when it grew ``SLOW_RATIO`` times as much as any other group of its class, and by at
least ``JOB_SHARE`` of the job's step growth. Its hosts name the link: two, the path between
them; one, that host's inside.

A class of one group tells nothing (a slower network would slow it as much): where every
collective spans the world or no groups share a shape, no link is named and the alert names
the nodes whose ranks waited the most.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

GROUP_PREFIX = "group:"
"""The per-step fields of a group's time (``per_step_ms``): ``group:FIRST:STRIDE:SIZE``."""
SLOW_RATIO = 2.0
"""The slow group grew at least this many times as much as any other of its class."""
JOB_SHARE = 0.25
"""... and by at least this share of the job's step growth."""


def group_field(key: tuple[int, int, int]) -> str:
    return GROUP_PREFIX + ":".join(map(str, key))


def group_members(name: str) -> np.ndarray:
    first, stride, size = (int(x) for x in name.removeprefix(GROUP_PREFIX).split(":"))
    return first + stride * np.arange(size, dtype=np.int64)


@dataclass(frozen=True)
class LinkCause:
    hosts: tuple[str, ...]
    """Two: the ends of the link; one: the host whose inside it is."""
    ranks: tuple[int, ...]
    """The slow group's members."""
    grew_ms: float
    """Its growth per step (ms): the most any member's time in its collectives grew."""
    before_ms: float
    """That member's time per step in its collectives before (ms)."""


@dataclass(frozen=True)
class _Group:
    shape: tuple[int, int]
    """(members, hosts spanned)."""
    growth: float
    before: float
    members: tuple[int, ...]
    hosts: tuple[str, ...]


def slow_link(
    ranks: np.ndarray,
    before: Mapping[str, np.ndarray],
    after: Mapping[str, np.ndarray],
    hosts: Mapping[int, str],
    grew_ms: float,
) -> LinkCause | None:
    """The link of the group whose time grew apart from its class' (``before`` and
    ``after``: per-rank ms per step of each field, aligned with ``ranks``); None when no
    group stands out or none can be compared."""
    groups = [g for name in after if (g := _group(name, ranks, before, after, hosts))]
    best: _Group | None = None
    for shape in {g.shape for g in groups}:
        peers = sorted((g for g in groups if g.shape == shape), key=lambda g: -g.growth)
        if len(peers) < 2:
            continue
        top, runner_up = peers[0], max(peers[1].growth, 0.0)
        apart = top.growth >= SLOW_RATIO * runner_up and top.growth >= JOB_SHARE * grew_ms
        if apart and top.growth > 0 and (best is None or top.growth > best.growth):
            best = top
    if best is None:
        return None
    return LinkCause(best.hosts, best.members, round(best.growth, 3), round(best.before, 3))


def _group(name, ranks, before, after, hosts) -> _Group | None:
    if not name.startswith(GROUP_PREFIX) or name not in before:
        return None
    members = group_members(name)
    at = np.searchsorted(ranks, members)
    if (at >= len(ranks)).any() or (ranks[np.minimum(at, len(ranks) - 1)] != members).any():
        return None  # a member did no step in both windows
    b, a = before[name][at], after[name][at]
    if np.isnan(b).any() or np.isnan(a).any():
        return None
    names = {hosts.get(int(r), "") for r in members}
    if "" in names:
        return None
    shape = (len(members), len(names))
    most = int(np.argmax(a - b))
    growth, base = float(a[most] - b[most]), float(b[most])
    return _Group(shape, growth, base, tuple(map(int, members)), tuple(sorted(names)))
