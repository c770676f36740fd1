"""The causes a what-if fixes, by name (``rank:N``, ``node:HOST``, ``link:HOST,HOST``,
``phase:NAME``, ``compute:X``, ``comm:X`` with its ``@dim:``/``@tag:`` scope, ``comm:fused``,
``comm:dropped@tag:``, ``ideal``; several joined by ``+``): each read and applied to the
model (fixes.py, unit_fuse.py, call_drop.py), and the ones tried when none is named."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.model.call_drop import ALL_PHASES, DROP_FORM, DROPPED, dropped, is_drop
from scalescope.analyze.model.fixes import fix_ranks, rank_index, scaled, without_phase
from scalescope.analyze.model.link_fix import ideal_with_links, without_link
from scalescope.analyze.model.pacing import slow_links, slow_ranks
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.unit_fuse import FUSED, fusable, fused
from scalescope.events.tags import ZERO_GATHER, ZERO_REDUCE, tag_kind

TOP_RANKS = 3
"""Ranks tried one at a time by ``what_if``: of those slower than their peers beyond the
steps' spread (``slow_ranks``), the ones with the most own time per step."""
TOP_LINKS = 2
"""Slow links tried one at a time by ``what_if``: the two that lose most."""
CAUSES_HELP = (
    "rank:N, node:HOST, link:HOST,HOST (or link:HOST, inside it), phase:NAME (data, forward, "
    "..., eval, checkpoint), eval, checkpoint, compute:X (X times faster), comm:X, comm:hidden "
    "(either one only on a mesh dimension's groups, comm:X@dim:NAME, or on the collectives of "
    "a tag, comm:X@tag:NAME; NAME[,NAME...]) or ideal (all of the slow ranks, nodes and links "
    "at once), comm:fused (FSDP's units merged into one: fewer, larger calls), "
    "comm:dropped@tag:NAME (a tag's calls gone, with the host work that builds them)"
)


TP_HIDDEN = "comm:hidden@dim:tp"
TP_FASTER = "comm:x2@dim:tp"
ZERO_GATHERS_HIDDEN = f"comm:hidden@tag:{ZERO_GATHER}"
ZERO_EXCHANGE_HIDDEN = f"comm:hidden@tag:{ZERO_REDUCE},{ZERO_GATHER}"
SCOPED_CANDIDATES = (TP_HIDDEN, TP_FASTER, ZERO_GATHERS_HIDDEN, ZERO_EXCHANGE_HIDDEN)
"""Communication fixes tried without ``--fix`` where their collectives have transfer time:
tensor parallelism's collectives hidden (overlapped on streams) or over a 2x faster link
(host-blocking backends), ZeRO's parameter gathers hidden (prefetch, ``overlap_comm``) and
its whole exchange hidden (the findings take their savings from these)."""
IDEAL_NOTE = (
    "no rank slower than the median of the others, no group's transfers than its kind's, "
    "beyond their step-to-step spread"
)
ALIASES = {"eval": "phase:eval", "checkpoint": "phase:checkpoint"}
"""Rank-only work by its own name: the phase of that name, on every rank that does it."""
CANDIDATE_PHASES = ("data", "to_device", "eval", "checkpoint")
"""Phases tried as causes without ``--fix``: input waits, copies of batches to the device and
work beside training."""
PHASE_CANDIDATE_SHARE = 0.05
"""...when they take at least this share of the ranks' own time."""


def apply_fix(
    grid: StepGrid, cause: str, hosts: dict[int, str], rows: np.ndarray | None = None
) -> tuple[StepGrid, str, slice | None]:
    """The grid with ``cause`` fixed (several joined by ``+``, fixed together: the ranks
    named are paced by the ranks not named), how, and the rows to judge it by when the
    fixed ranks' cause began mid-run (``fix_ranks``). ``rows``: the measured steps, that
    ``ideal`` tells the slow ranks by and ``comm:fused`` fits a call's host cost over (default:
    all). ``comm:fused`` and ``comm:dropped`` change the collectives themselves (unit_fuse.py,
    call_drop.py), so they are applied first: the other fixes then see the calls left."""
    parts = [ALIASES.get(p, p) for p in cause.split("+")]
    notes: list[str] = []
    if FUSED in parts:
        grid, note = fused(grid, rows)
        parts = [p for p in parts if p != FUSED]
        notes.append(note)
    for part in [p for p in parts if is_drop(p)]:
        grid, note = _dropped(grid, part, rows)
        notes.append(note)
    parts = [p for p in parts if not is_drop(p)]
    ranks: list[int] = []
    speeds: list[tuple[str, float, Scope | None]] = []
    phases: list[str] = []
    links: list[str] = []
    whole = False
    for part in parts:
        kind, _, value = part.partition(":")
        if kind in ("rank", "node"):
            ranks += _ranks_of(part, kind, value, hosts)
        elif kind == "link":
            grid = without_link(grid, part, _check_link(part, value, hosts), hosts)
            links.append(value)
        elif kind == "phase":
            phases.append(_phase_of(grid, part, value))
        elif kind in ("compute", "comm"):
            speeds.append(_speed_of(grid, part, kind, value))
        elif kind == "ideal" and not value:
            whole = True
        else:
            raise ValueError(f"unknown cause {part!r}: use {CAUSES_HELP}")
    before = None
    if whole:
        grid = ideal_with_links(grid, hosts)
        notes.append(IDEAL_NOTE)
    if ranks:
        grid, note, before = fix_ranks(grid, rank_index(grid, sorted(set(ranks))), rows)
        notes.append(note)
    for name in phases:
        grid = without_phase(grid, name)
        notes.append(f"no {name} time")
    notes += [f"the link {v.replace(',', '-')} as fast as the others" for v in links]
    for kind, speed, scope in speeds:
        grid = scaled(grid, **{kind: speed}, only=scope.mask if scope else None)
        note = "no transfer time" if speed == np.inf else f"{kind} {speed:g}x faster"
        notes.append(f"{note} ({scope.label})" if scope else note)
    return grid, "; ".join(notes), before


def _dropped(grid: StepGrid, part: str, rows: np.ndarray | None) -> tuple[StepGrid, str]:
    """``comm:dropped@tag:NAME``: a tag's calls gone (call_drop.py)."""
    where = part.removeprefix(f"{DROPPED}@")
    if where == part or not where.startswith("tag:"):
        raise ValueError(f"bad cause {part!r}: {DROP_FORM}")
    scope = scope_of(grid, part, where)
    return dropped(grid, scope.mask, scope.label, part, rows)


@dataclass(frozen=True)
class Scope:
    """The collectives a communication fix is restricted to (``@dim:`` or ``@tag:``)."""

    label: str
    """``dim tp``, ``tag zero_gather_params``: for the fix's note."""
    mask: np.ndarray
    """(ranks, collectives) of bool."""


SCOPE_FORM = "comm:X@dim:NAME or comm:X@tag:NAME (NAME[,NAME...])"


def _speed_of(grid: StepGrid, part: str, kind: str, value: str) -> tuple[str, float, Scope | None]:
    """``compute:X``, ``comm:X``, ``comm:hidden``, each of the latter two with a scope."""
    value, at, where = value.partition("@")
    if at and kind != "comm":
        raise ValueError(f"bad cause {part!r}: only comm takes a scope ({SCOPE_FORM})")
    speed = np.inf if (kind, value) == ("comm", "hidden") else _speed(part, value)
    return kind, speed, scope_of(grid, part, where) if at else None


def scope_of(grid: StepGrid, part: str, where: str) -> Scope:
    """The collectives on the mesh dimensions (``dim:A,B``) or of the tags (``tag:A,B``; a
    tag's kind, ``unshard``, takes in every ``unshard:UNIT``) ``where`` names."""
    what, _, listed = where.partition(":")
    names = [n for n in listed.split(",") if n]
    if what not in ("dim", "tag") or not names:
        raise ValueError(f"bad cause {part!r}: {SCOPE_FORM}")
    have = grid.dims if what == "dim" else grid.tags
    if have is None:
        raise ValueError(f"bad cause {part!r}: the model has no {what}s of its collectives")
    unique, inverse = np.unique(have, return_inverse=True)
    kinds = np.array([tag_kind(str(t)) for t in unique])[inverse].reshape(have.shape)
    mask = np.zeros(have.shape, dtype=bool)
    for name in names:
        mine = (have == name) | (kinds == name if what == "tag" else False)
        if not mine.any():
            known = ", ".join(sorted(set(have.ravel().tolist()) - {""})) or "none"
            raise ValueError(
                f"bad cause {part!r}: no replayed collective has the {what} {name!r} "
                f"({what}s: {known})"
            )
        mask |= mine
    return Scope(f"{what} {','.join(names)}", mask)


def phases_named(causes: list[str] | None) -> tuple[str, ...]:
    """The phases the grid needs: those the causes name, and the ones tried by default;
    every phase for ``comm:dropped`` (the host work it takes is the time outside them)."""
    parts = [part for cause in causes or () for part in cause.split("+")]
    drops = ALL_PHASES if any(is_drop(p) for p in parts) else ()
    named = [
        ALIASES.get(p, p).partition(":")[2] for p in parts if ALIASES.get(p, p).startswith("phase:")
    ]
    return tuple(dict.fromkeys((*CANDIDATE_PHASES, *named, *drops)))


def _phase_of(grid: StepGrid, part: str, name: str) -> str:
    if name not in grid.phase_ns:
        known = ", ".join(sorted(grid.phase_ns)) or "none"
        raise ValueError(f"bad cause {part!r}: no {name!r} phase was recorded (phases: {known})")
    return name


def _check_link(part: str, value: str, hosts: dict[int, str]) -> str:
    """``value`` of ``link:HOST,HOST`` (or ``link:HOST``), each a node some rank ran on."""
    ends = {h for h in value.split(",") if h}
    if not 1 <= len(ends) <= 2:
        raise ValueError(f"bad cause {part!r}: link:HOST,HOST (two nodes) or link:HOST")
    for end in sorted(ends):
        _ranks_of(part, "node", end, hosts)
    return value


def _ranks_of(part: str, kind: str, value: str, hosts: dict[int, str]) -> list[int]:
    if kind == "rank":
        if not value.isdigit():
            raise ValueError(f"bad cause {part!r}: rank:N takes a rank number")
        return [int(value)]
    ranks = [r for r, h in sorted(hosts.items()) if h == value]
    if not ranks:
        known = ", ".join(sorted(set(hosts.values()))) or "none recorded"
        raise ValueError(f"no rank ran on node {value!r} (nodes: {known})")
    return ranks


def _speed(part: str, value: str) -> float:
    try:
        speed = float(value.removeprefix("x"))
    except ValueError:
        raise ValueError(f"bad cause {part!r}: the speed-up must be a number") from None
    if not speed > 0 or not np.isfinite(speed):
        raise ValueError(f"bad cause {part!r}: the speed-up must be positive")
    return speed


def candidate_causes(
    grid: StepGrid, hosts: dict[int, str], limit: int = TOP_RANKS, rows: np.ndarray | None = None
) -> list[str]:
    """The node and the ranks slower than their peers beyond the steps' spread over ``rows``
    (``slow_ranks``; the node with the most own time per step, the ranks with the most),
    input waits and rank-only work (when they take 5 % of the own time), the links whose
    groups transfer slower than the others of their shape beyond the spread (``slow_links``),
    exposed transfers, and the first two of these together; the scoped transfers, and FSDP's
    units merged into one where a pass has calls of several (``comm:fused``). A rank within
    the spread is no candidate: fixing it would only take its jitter away (the what-if's
    ``jitter_ms``)."""
    own = grid.own_ns().mean(axis=0)
    slow, slow_nodes = slow_ranks(grid, hosts, rows)
    causes = []
    if len(slow_nodes):
        host_of = np.array([hosts.get(int(r), "") for r in grid.ranks])
        host = max(sorted(slow_nodes), key=lambda h: float(own[host_of == h].mean()))
        causes.append(f"node:{host}")
    order = [i for i in np.argsort(-own, kind="stable") if slow[i]]
    causes += [f"rank:{int(grid.ranks[i])}" for i in order[: min(limit, len(grid.ranks) - 1)]]
    own_total = float(grid.own_ns().sum())
    for name in CANDIDATE_PHASES:
        if name in grid.phase_ns and grid.phase_ns[name].sum() >= PHASE_CANDIDATE_SHARE * own_total:
            causes.append(ALIASES.get(name, f"phase:{name}"))
    links = slow_links(grid, hosts, rows)[:TOP_LINKS]
    causes += [f"link:{','.join(ends)}" for ends in links]
    if grid.transfer_ns.any():
        causes.append("comm:hidden")
    if len(causes) >= 2:
        causes.append(f"{causes[0]}+{causes[-1]}")
    causes += [c for c in SCOPED_CANDIDATES if _has_transfers(grid, c)]
    return causes + ([FUSED] if fusable(grid) else [])


def _has_transfers(grid: StepGrid, cause: str) -> bool:
    """Whether ``cause``'s scope holds collectives with transfer time."""
    try:
        scope = scope_of(grid, cause, cause.partition("@")[2])
    except ValueError:
        return False
    return bool(grid.transfer_ns[:, scope.mask].any())
