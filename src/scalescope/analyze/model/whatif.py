"""What fixing a cause would buy: the measured steps replayed (replay.py) with some of the
durations of the model (step_grid.py) replaced. A rank at the pace of the ranks doing the same
work (the median of the others, step by step), or, where its extra time began mid-run, the
steps before it; a phase taken out; faster compute, faster communication; several at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.model.pacing import at_peers_pace, ideal, link_classes
from scalescope.analyze.model.replay import Prediction, ReplayTimes, predict, replay
from scalescope.analyze.model.step_grid import StepGrid, build_grid
from scalescope.events import Run
from scalescope.events.tags import ZERO_GATHER, ZERO_REDUCE, tag_kind

TOP_RANKS = 3
"""Ranks tried one at a time by ``what_if``: those with the most own time per step."""


@dataclass(frozen=True)
class Fix:
    cause: str
    """``rank:N``, ``compute:x1.5``, ``comm:x2``, ``comm:hidden``, ``comm:hidden@dim:tp``, or
    several joined by ``+``."""
    prediction: Prediction
    gain_ms: float
    """The mean replayed step as measured minus the mean step with the cause fixed."""
    gain_pct: float
    samples_per_s: float | None
    """Training samples per second after the fix (None when steps count no samples)."""
    note: str = ""


@dataclass(frozen=True)
class WhatIf:
    measured_step_ms: float
    replayed: Prediction
    """The measured durations replayed: within a few % of ``measured_step_ms`` when the
    model fits the run; the fixes' gains are counted from it."""
    fixes: tuple[Fix, ...]
    steps: int
    ranks: int
    collectives_per_step: int
    left_out: tuple[str, ...] = ()
    ideal: Prediction | None = None
    """The step with every slow rank, node and link fixed at once (``ideal``, pacing.py)."""

    @property
    def slowdown(self) -> float | None:
        """S = the replay as measured / the ideal step (mean steps)."""
        if self.ideal is None or self.ideal.mean_ms <= 0:
            return None
        return self.replayed.mean_ms / self.ideal.mean_ms

    @property
    def best(self) -> Fix | None:
        """The fix with the largest gain; None without fixes."""
        return max(self.fixes, key=lambda f: f.gain_ms, default=None)


# --- counterfactuals -----------------------------------------------------------------------

ONSET_MIN_STEPS = 3
"""Steps on each side of a cause that began mid-run, at least."""


def rank_index(grid: StepGrid, ranks: list[int]) -> np.ndarray:
    missing = sorted(set(ranks) - set(grid.ranks.tolist()))
    if missing:
        known = describe_ranks(grid.ranks)
        raise ValueError(f"rank {', '.join(map(str, missing))} is not in the model (ranks {known})")
    return np.searchsorted(grid.ranks, ranks)


def onset(grid: StepGrid, idx: np.ndarray) -> int | None:
    """The row from which the ranks ``idx`` do clearly more own work than the others, when
    they did not before it (a cause that began mid-run); None otherwise."""
    own = grid.own_ns()
    others = np.ones(len(grid.ranks), dtype=bool)
    others[idx] = False
    if not others.any() or len(own) < 2 * ONSET_MIN_STEPS:
        return None
    excess = own[:, idx].mean(axis=1) - np.median(own[:, others], axis=1)
    splits = range(ONSET_MIN_STEPS, len(own) - ONSET_MIN_STEPS + 1)
    x = min(splits, key=lambda i: _spread(excess[:i]) + _spread(excess[i:]))
    before, after = np.median(excess[:x]), np.median(excess[x:])
    floor = 0.05 * float(np.median(grid.step_ns))
    return x if after > floor and before < 0.25 * after else None


def _spread(a: np.ndarray) -> float:
    """Absolute deviations from the median, summed: the split of a series into the two
    parts that spread least is where it changed level (robust to one-off slow steps)."""
    return float(np.abs(a - np.median(a)).sum())


def before_onset(x: int) -> slice:
    """The rows a cause that began at row ``x`` is judged by: the steps before it, less
    their first quarter (a run's first steps carry its start-up: first iterations, the
    allocator growing)."""
    return slice(x // 4, x)


def fix_ranks(grid: StepGrid, idx: np.ndarray) -> tuple[StepGrid, str, slice | None]:
    """The ranks ``idx`` fixed. Where their extra work began mid-run, the steps before it
    are the run without it: the rows to replay instead (what the others lost since, caches
    cold after waiting, cores shared differently, goes with the cause). Otherwise those
    ranks work at the pace of the others, step by step."""
    x = onset(grid, idx)
    if x is None:
        return at_peers_pace(grid, idx), "at the pace of the other ranks", None
    rows = before_onset(x)
    first, last = int(grid.steps[rows.start]), int(grid.steps[x - 1])
    return grid, f"began at step {int(grid.steps[x])}: as in steps {first}-{last}", rows


def scaled(
    grid: StepGrid, compute: float = 1.0, comm: float = 1.0, only: np.ndarray | None = None
) -> StepGrid:
    """Own time divided by ``compute``, transfers by ``comm`` (``inf``: no transfer time);
    with ``only`` ((ranks, collectives) of bool), only those collectives' transfers."""
    if compute <= 0 or comm <= 0:
        raise ValueError("speed-ups must be positive")
    transfer = grid.transfer_ns / comm
    if only is not None:
        transfer = np.where(only, transfer, grid.transfer_ns)
    return replace(
        grid, work_ns=grid.work_ns / compute, prejoin_ns=grid.prejoin_ns / compute,
        post_ns=grid.post_ns / compute, transfer_ns=transfer,
    )  # fmt: skip


def with_delay(grid: StepGrid, rank: int, delay_ns: float, at: int = 0) -> StepGrid:
    """``rank`` slower by ``delay_ns`` per step, in its own time before collective ``at``
    (``at`` = the number of collectives: after the join)."""
    i = int(rank_index(grid, [rank])[0])
    if at >= grid.shape[2]:
        post = grid.post_ns.copy()
        post[:, i] += delay_ns
        return replace(grid, post_ns=post)
    work = grid.work_ns.copy()
    work[:, i, at] += delay_ns
    return replace(grid, work_ns=work)


def describe_ranks(ranks: np.ndarray) -> str:
    return f"{int(ranks[0])}-{int(ranks[-1])}" if len(ranks) > 1 else str(int(ranks[0]))


# --- what fixing a cause buys --------------------------------------------------------------

CAUSES_HELP = (
    "rank:N, node:HOST, link:HOST,HOST (or link:HOST, inside it), phase:NAME (data, forward, "
    "..., eval, checkpoint), eval, checkpoint, compute:X (X times faster), comm:X, comm:hidden "
    "(either one only on a mesh dimension's groups, comm:X@dim:NAME, or on the collectives of "
    "a tag, comm:X@tag:NAME; NAME[,NAME...]) or ideal (all of the slow ranks, nodes and links "
    "at once)"
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
IDEAL_NOTE = "no rank slower than the median of the others, no group's transfers than its kind's"
ALIASES = {"eval": "phase:eval", "checkpoint": "phase:checkpoint"}
"""Rank-only work by its own name: the phase of that name, on every rank that does it."""
CANDIDATE_PHASES = ("data", "to_device", "eval", "checkpoint")
"""Phases tried as causes without ``--fix``: input waits, copies of batches to the device and
work beside training."""
PHASE_CANDIDATE_SHARE = 0.05
"""...when they take at least this share of the ranks' own time."""


def apply_fix(
    grid: StepGrid, cause: str, hosts: dict[int, str]
) -> tuple[StepGrid, str, slice | None]:
    """The grid with ``cause`` fixed (several joined by ``+``, fixed together: the ranks
    named are paced by the ranks not named), how, and the rows to judge it by when the
    fixed ranks' cause began mid-run (``fix_ranks``)."""
    ranks: list[int] = []
    speeds: list[tuple[str, float, Scope | None]] = []
    phases: list[str] = []
    links: list[str] = []
    whole = False
    for part in cause.split("+"):
        kind, _, value = ALIASES.get(part, part).partition(":")
        if kind in ("rank", "node"):
            ranks += _ranks_of(part, kind, value, hosts)
        elif kind == "link":
            grid = without_link(grid, part, value, hosts)
            links.append(value)
        elif kind == "phase":
            phases.append(_phase_of(grid, part, value))
        elif kind in ("compute", "comm"):
            speeds.append(_speed_of(grid, part, kind, value))
        elif kind == "ideal" and not value:
            whole = True
        else:
            raise ValueError(f"unknown cause {part!r}: use {CAUSES_HELP}")
    notes, rows = [], None
    if whole:
        grid = ideal(grid, hosts)
        notes.append(IDEAL_NOTE)
    if ranks:
        grid, note, rows = fix_ranks(grid, rank_index(grid, sorted(set(ranks))))
        notes.append(note)
    for name in phases:
        grid = without_phase(grid, name)
        notes.append(f"no {name} time")
    notes += [f"the link {v.replace(',', '-')} as fast as the others" for v in links]
    for kind, speed, scope in speeds:
        grid = scaled(grid, **{kind: speed}, only=scope.mask if scope else None)
        note = "no transfer time" if speed == np.inf else f"{kind} {speed:g}x faster"
        notes.append(f"{note} ({scope.label})" if scope else note)
    return grid, "; ".join(notes), rows


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
    """The phases the grid needs: those the causes name, and the ones tried by default."""
    named = [
        ALIASES.get(part, part).partition(":")[2]
        for cause in causes or ()
        for part in cause.split("+")
        if ALIASES.get(part, part).startswith("phase:")
    ]
    return tuple(dict.fromkeys((*CANDIDATE_PHASES, *named)))


def _phase_of(grid: StepGrid, part: str, name: str) -> str:
    if name not in grid.phase_ns:
        known = ", ".join(sorted(grid.phase_ns)) or "none"
        raise ValueError(f"bad cause {part!r}: no {name!r} phase was recorded (phases: {known})")
    return name


def without_phase(grid: StepGrid, name: str) -> StepGrid:
    """Every rank's own time less the phase ``name`` (input waits gone, no evaluation)."""
    parts = grid.phase_ns[name]
    k = grid.shape[2]
    return replace(
        grid,
        work_ns=np.maximum(grid.work_ns - parts[:, :, :k], 0.0),
        prejoin_ns=np.maximum(grid.prejoin_ns - parts[:, :, k], 0.0),
        post_ns=np.maximum(grid.post_ns - parts[:, :, k + 1], 0.0),
    )


def without_link(grid: StepGrid, part: str, value: str, hosts: dict[int, str]) -> StepGrid:
    """Transfers over the link between two nodes (or inside one) as fast as over the others:
    each transfer of a group smaller than the world that spans exactly ``value``'s nodes
    takes at most the median, step by step, of the groups of its shape (op, size, ranks,
    nodes spanned) elsewhere, as analyze/links.py compares them. Collectives over all ranks
    cross every link: that is ``comm:X``."""
    ends = frozenset(h for h in value.split(",") if h)
    if not 1 <= len(ends) <= 2:
        raise ValueError(f"bad cause {part!r}: link:HOST,HOST (two nodes) or link:HOST")
    for end in sorted(ends):
        _ranks_of(part, "node", end, hosts)
    if grid.op_names is None or grid.nbytes is None:
        raise ValueError(f"bad cause {part!r}: the model has no message sizes")
    cls, on_link, subgroup = link_classes(grid, hosts, ends)
    if not on_link.any():
        raise ValueError(
            f"no group smaller than the world ran over the link {value!r}: a link is told "
            "apart only where groups of the same shape cross other links"
        )
    transfer = grid.transfer_ns.copy()
    for c in np.unique(cls[on_link]):
        mine, peers = on_link & (cls == c), ~on_link & subgroup & (cls == c)
        if not peers.any():
            raise ValueError(f"the link {value!r}: no other group of the same shape to pace it")
        pace = np.median(grid.transfer_ns[:, peers], axis=1, keepdims=True)
        transfer[:, mine] = np.minimum(transfer[:, mine], pace)
    return replace(grid, transfer_ns=transfer)


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


def candidate_causes(grid: StepGrid, hosts: dict[int, str], limit: int = TOP_RANKS) -> list[str]:
    """The node whose ranks have the most own time per step (with several nodes), the ranks
    with the most, input waits and rank-only work (when they take 5 % of the own time),
    exposed transfers, and the first two of these together."""
    own = grid.own_ns().mean(axis=0)
    causes = []
    by_host: dict[str, list[int]] = {}
    for i, rank in enumerate(grid.ranks.tolist()):
        by_host.setdefault(hosts.get(rank, ""), []).append(i)
    if len(by_host) > 1 and "" not in by_host:
        host = max(sorted(by_host), key=lambda h: float(own[by_host[h]].mean()))
        causes.append(f"node:{host}")
    order = np.argsort(-own, kind="stable")[: min(limit, len(grid.ranks) - 1)]
    causes += [f"rank:{int(grid.ranks[i])}" for i in order]
    own_total = float(grid.own_ns().sum())
    for name in CANDIDATE_PHASES:
        if name in grid.phase_ns and grid.phase_ns[name].sum() >= PHASE_CANDIDATE_SHARE * own_total:
            causes.append(ALIASES.get(name, f"phase:{name}"))
    if grid.transfer_ns.any():
        causes.append("comm:hidden")
    if len(causes) >= 2:
        causes.append(f"{causes[0]}+{causes[-1]}")
    return causes + [c for c in SCOPED_CANDIDATES if _has_transfers(grid, c)]


def _has_transfers(grid: StepGrid, cause: str) -> bool:
    """Whether ``cause``'s scope holds collectives with transfer time."""
    try:
        scope = scope_of(grid, cause, cause.partition("@")[2])
    except ValueError:
        return False
    return bool(grid.transfer_ns[:, scope.mask].any())


def hosts_of(run: Run) -> dict[int, str]:
    return {r: m.hostname for r, m in run.ranks.items()}


def measured_rows(grid: StepGrid, warmup_steps: int) -> tuple[np.ndarray, list[str]]:
    """The rows past the warm-up (every row when none is), and a note when none was."""
    rows = grid.steps >= warmup_steps
    if rows.any():
        return rows, []
    return np.ones_like(rows), ["no step after the warm-up: every step counted"]


def what_if(
    run: Run, warmup_steps: int = 1, causes: list[str] | None = None, last: int | None = None,
    extra: tuple[str, ...] = (),
) -> WhatIf | None:  # fmt: skip
    """The measured steps (``step >= warmup_steps``; every step when none is) replayed as
    measured and with each cause fixed (default: ``candidate_causes`` and ``extra``, largest
    gain first). The replay runs over every recorded step, so a cause that began in the
    warm-up is seen beginning. None when the run gives no model (``build_grid``). ``last``:
    replay only the last that many steps (the report's bound on a long run's cost)."""
    grid, left = build_grid(run, last=last, phases=phases_named(causes))
    if grid is None:
        return None
    return what_if_of(grid, left, hosts_of(run), warmup_steps, causes, extra)


def what_if_of(
    grid: StepGrid, left: list[str], hosts: dict[int, str], warmup_steps: int,
    causes: list[str] | None = None, extra: tuple[str, ...] = (),
) -> WhatIf:  # fmt: skip
    """``what_if`` on a grid already built (``left``: what building it left out)."""
    rows, none_measured = measured_rows(grid, warmup_steps)
    base = predict(grid, "as measured", rows)
    samples = float(np.median(grid.samples[rows].sum(axis=1)))
    chosen = causes is None
    if causes is None:
        found = candidate_causes(grid, hosts)
        causes = found + [c for c in dict.fromkeys(extra) if c not in found]
    fixes = []
    for cause in causes:
        fixed, note, before = apply_fix(grid, cause, hosts)
        after = predict(fixed, cause, rows if before is None else before)
        gain = base.mean_ms - after.mean_ms
        rate = samples / after.mean_ms * 1e3 if samples > 0 and after.mean_ms > 0 else None
        pct = 100.0 * gain / base.mean_ms if base.mean_ms > 0 else 0.0
        fixes.append(Fix(cause, after, gain, pct, rate, note))
    if chosen:
        fixes.sort(key=lambda f: -f.gain_ms)
    ideal_step = predict(ideal(grid, hosts), "ideal", rows)
    return WhatIf(
        measured_step_ms=float(np.median(np.median(grid.step_ns[rows], axis=1))) / 1e6,
        replayed=base, fixes=tuple(fixes), steps=int(rows.sum()), ranks=grid.shape[1],
        collectives_per_step=grid.shape[2], left_out=(*left, *none_measured),
        ideal=ideal_step,
    )  # fmt: skip


# --- a timeline of the replay --------------------------------------------------------------

TIMELINE_STEPS = 5
TIMELINE_RANKS = 16


@dataclass(frozen=True)
class WhatIfTimeline:
    """A few steps replayed as measured and with ``cause`` fixed, for a Chrome trace."""

    cause: str
    note: str
    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    """The step numbers shown, as measured (the fixed replay's rows may be earlier steps:
    ``note`` says so when the cause began mid-run)."""
    ops: tuple[str, ...]
    measured: ReplayTimes
    fixed: ReplayTimes


def _window(times: ReplayTimes, rows: np.ndarray, ranks: np.ndarray) -> ReplayTimes:
    """``times`` of ``rows`` x ``ranks``, from 0 at the first row's earliest start."""
    t0 = times.start_ns[rows[0]].min()
    pick = np.ix_(rows, ranks)
    return ReplayTimes(
        times.start_ns[pick] - t0, times.end_ns[pick] - t0,
        times.issue_ns[rows][:, ranks] - t0, times.done_ns[rows][:, ranks] - t0,
    )  # fmt: skip


def replay_timeline(
    grid: StepGrid, hosts: dict[int, str], warmup_steps: int, cause: str,
    steps: int = TIMELINE_STEPS,
) -> WhatIfTimeline:  # fmt: skip
    """The last ``steps`` measured steps of ``grid`` replayed as measured, and the same
    number replayed with ``cause`` fixed (from the steps it is judged by), on up to 16 ranks."""
    fixed, note, before = apply_fix(grid, cause, hosts)
    measured = np.flatnonzero(measured_rows(grid, warmup_steps)[0])
    fixed_rows = measured if before is None else np.arange(grid.shape[0])[before]
    ranks = np.arange(min(len(grid.ranks), TIMELINE_RANKS))
    a = _window(replay(grid, keep_times=True).times, measured[-steps:], ranks)
    b = _window(replay(fixed, keep_times=True).times, fixed_rows[-steps:], ranks)
    return WhatIfTimeline(
        cause=cause, note=note, ranks=tuple(int(r) for r in grid.ranks[ranks]),
        steps=tuple(int(s) for s in grid.steps[measured[-steps:]]), ops=grid.ops,
        measured=a, fixed=b,
    )  # fmt: skip
