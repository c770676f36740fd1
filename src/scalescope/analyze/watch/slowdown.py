"""A job that slows down while it trains: the onset found online, named, and its recovery.

Fed the ranks' live states as a watcher reads them (``SlowdownDetector.observe``, every half
second or so), from their running totals (events/live_state.py ``LiveTotals``). Between two
reads each rank did some steps; the job's step over them is the mean over ranks of the step
time less the phases that are meant to pause training (evaluation, checkpoints), so a
periodic evaluation the probe names is no slowdown.

Detection is a one-sided CUSUM on the log of the job's step against its baseline:

- the first ``warmup_steps`` steps and ``warmup_s`` seconds are left out, then the baseline is
  the median of ``baseline_reads`` reads (and at least ``baseline_steps`` steps), with the
  reads' noise (1.4826 x the median absolute deviation of their logs);
- each read adds ``min(log(step / baseline), clip) - k`` to the sum, floored at 0, with k half
  the smallest change worth an alert (``min_change``, 10 %) or half the noise if larger; one
  long read (a pause the probe does not name, a GC) adds at most ``clip``, a third of ``h``;
- the sum passing ``h`` (``h_min``, or ``h_noise`` times the noise) with at least
  ``confirm_reads`` reads and ``confirm_steps`` steps since it last stood at 0 (the onset)
  raises an alert if the median of those reads is ``min_change`` or more above the baseline
  (a smaller drift that crossed ``h`` is not one);
- the same sum on the other side (the job faster than its baseline: a warm-up longer than
  ``warmup_steps``, or a job that sped up) learns the baseline again;
- an active alert recovers once the median of the last ``confirm_reads`` reads is within half
  of ``min_change`` of the baseline.

A maintained library was weighed (river's PageHinkley, ruptures): neither takes the clipping,
the size gate and the onset's totals this needs, and river would bring pandas and scipy to
the ranks' launcher for a dozen lines of arithmetic.

Who and what (``attribute``): each rank's own time per step (the step less its pauses and
its waiting: the larger of ``comm_wait`` and its time in collectives, since DDP's wait lies
inside its gradients' collectives), before the onset and since. The ranks
whose own time grew by at least half of the job's growth caused it; all ranks of a node among
them, and none elsewhere, make it the node's. None of them: the collectives got slower
(communication). Then a group smaller than the world whose transfer grew apart from the
groups of its shape names a link (analyze/watch/slowdown_link.py, from the live state's time per
group); where none does, the alert is every rank's collectives and names the nodes whose
ranks waited the most.
The phase is the one of the cause's phases (or of ``other``: host work outside them) that
grew the most.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from scalescope.analyze.watch.slowdown_link import group_field, slow_link
from scalescope.events.files import ALERTS_FILE
from scalescope.events.live_state import TOTAL_PHASES, LiveState

PAUSE_PHASES = ("eval", "checkpoint")
"""Phases that stop training on purpose: not part of the step the detector follows."""
INPUT_PHASES = ("data", "to_device")
WAIT_PHASE = "comm_wait"
OTHER = "other"
OWN_PHASES = tuple(p for p in TOTAL_PHASES if p not in (*PAUSE_PHASES, WAIT_PHASE)) + (OTHER,)
"""The phases a rank spends on its own work, where a cause can sit."""
FIELDS = ("steps", "step_ns", "samples", "collective_ns", *TOTAL_PHASES)
_COL = {name: i for i, name in enumerate(FIELDS)}
MAX_WINDOW = 64
"""Reads kept since a candidate onset, for the attribution's medians."""


@dataclass(frozen=True)
class DetectorConfig:
    min_change: float = 0.10
    warmup_steps: int = 5
    warmup_s: float = 3.0
    baseline_reads: int = 12
    baseline_steps: int = 20
    clip_share: float = 1 / 3
    h_min: float = 0.45
    h_noise: float = 8.0
    confirm_reads: int = 5
    confirm_steps: int = 5


@dataclass(frozen=True)
class Alert:
    """One line of ``alerts.jsonl``: a slowdown's onset or its recovery."""

    event: str
    """``onset`` or ``recovery``."""
    id: int
    """The onset's number (from 1); a recovery carries its onset's."""
    subject: str
    """``rank``, ``node``, ``link`` (``nodes``: its two ends, or the one host it is inside;
    ``ranks``: the group whose collectives slowed) or ``world`` (every rank: its own work,
    or, for communication, its collectives)."""
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    phase: str
    category: str
    """``input``, ``compute`` or ``communication``."""
    change_pct: float
    """The job's step since the onset against the baseline (%, + slower)."""
    phase_change_pct: float | None
    """The cause's phase since the onset against its baseline (% of the phase)."""
    baseline_ms: float
    now_ms: float
    since_step: int
    detected_step: int
    detected_at: float
    """Wall-clock seconds."""
    message: str


@dataclass(frozen=True)
class Attribution:
    subject: str
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    phase: str
    category: str
    phase_change_pct: float | None


@dataclass
class TotalsRead:
    """The ranks' running totals as one read found them."""

    at_s: float
    ranks: np.ndarray
    values: np.ndarray
    """Ranks x FIELDS."""
    groups: dict[tuple[int, int, int], np.ndarray] = field(default_factory=dict)
    """Each group's (first, stride, size of its members) time in its collectives per rank,
    aligned with ``ranks`` (ns; NaN: not a member, or no slot for it)."""


@dataclass
class _State:
    baseline: list[float] = field(default_factory=list)
    baseline_steps: int = 0
    base_ms: float | None = None
    k: float = 0.0
    h: float = 0.0
    base_reads: list = field(default_factory=list)
    """``per_step_ms`` of each baseline read."""
    cusum: float = 0.0
    faster: float = 0.0
    """The CUSUM of the other side: the job running faster than its baseline."""
    onset: TotalsRead | None = None
    since: list[tuple[float, int]] = field(default_factory=list)
    """(step ms, steps) of each read since the onset."""
    since_reads: list = field(default_factory=list)
    """``per_step_ms`` of the reads since the onset (the last MAX_WINDOW)."""
    active: Alert | None = None
    alerts: int = 0


def read_totals(at_s: float, states: Mapping[int, LiveState]) -> TotalsRead:
    rows = []
    ranks = []
    groups: dict[tuple[int, int, int], dict[int, int]] = {}
    for rank, s in sorted(states.items()):
        t = s.totals
        if t is None:
            continue
        ranks.append(rank)
        rows.append(
            [s.steps_done, t.step_ns, t.samples, t.collective_ns]
            + [t.phase_ns[p] for p in TOTAL_PHASES]
        )
        for key, ns in t.group_ns.items():
            groups.setdefault(key, {})[len(ranks) - 1] = ns
    values = np.array(rows, dtype=np.float64).reshape(len(rows), len(FIELDS))
    per_group = {}
    for key, at in groups.items():
        column = per_group[key] = np.full(len(ranks), np.nan)
        column[list(at)] = list(at.values())
    return TotalsRead(at_s, np.array(ranks, dtype=np.int64), values, per_group)


def per_step_ms(start: TotalsRead, end: TotalsRead) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The ranks present in both and each field per step between them: times in ms (under
    their FIELDS names), samples as a count; ranks that did no step left out."""
    common, a, b = np.intersect1d(start.ranks, end.ranks, return_indices=True)
    delta = end.values[b] - start.values[a]
    steps = delta[:, _COL["steps"]]
    keep = steps > 0
    delta, steps = delta[keep], steps[keep]
    out = {name: delta[:, i] / steps / 1e6 for i, name in enumerate(FIELDS) if name != "steps"}
    out["samples"] = delta[:, _COL["samples"]] / steps  # a count, not a time
    phases = sum(out[p] for p in TOTAL_PHASES)
    out[OTHER] = np.maximum(out["step_ns"] - phases, 0.0)
    out["steps"] = steps
    for key in start.groups.keys() & end.groups.keys():
        grown = end.groups[key][b] - start.groups[key][a]
        out[group_field(key)] = grown[keep] / steps / 1e6
    return common[keep], out


def job_step_ms(ms: dict[str, np.ndarray]) -> float:
    """The mean over ranks of the step less the pauses."""
    step = ms["step_ns"] - sum(ms[p] for p in PAUSE_PHASES)
    return float(np.mean(step))


def _own_ms(ms: dict[str, np.ndarray]) -> np.ndarray:
    """The step less its pauses and its waiting: DDP's ``comm_wait`` lies inside its
    gradients' collectives, so the larger of the two."""
    waiting = np.maximum(ms[WAIT_PHASE], ms["collective_ns"])
    return ms["step_ns"] - sum(ms[p] for p in PAUSE_PHASES) - waiting


def attribute(
    before: tuple[np.ndarray, dict[str, np.ndarray]],
    after: tuple[np.ndarray, dict[str, np.ndarray]],
    hosts: Mapping[int, str],
) -> Attribution:
    """Which ranks (or node, or the communication) and which phase made the job slower
    between the ``before`` and ``after`` windows (``per_step_ms`` of each)."""
    ranks, b, a = _aligned(before, after)
    grew = job_step_ms(a) - job_step_ms(b)
    own = _own_ms(a) - _own_ms(b)
    causes = own >= 0.5 * max(grew, 1e-9)
    if not causes.any():
        waited = (a[WAIT_PHASE] + a["collective_ns"]) - (b[WAIT_PHASE] + b["collective_ns"])
        top = ranks[waited >= 0.5 * waited.max()] if waited.size else ranks
        link = slow_link(ranks, b, a, hosts, grew)
        if link is not None:
            change = round(100 * link.grew_ms / link.before_ms, 1) if link.before_ms > 0 else None
            return Attribution(
                "link", link.ranks, link.hosts, "collectives", "communication", change
            )
        nodes = tuple(sorted({hosts.get(int(r), "") for r in top} - {""}))
        change = _pct(a["collective_ns"], b["collective_ns"], b["step_ns"])
        everyone = tuple(int(r) for r in ranks)
        return Attribution("world", everyone, nodes, "collectives", "communication", change)
    cause_ranks = ranks[causes]
    growth = {p: float(np.sum(a[p][causes] - b[p][causes])) for p in OWN_PHASES}
    phase = max(growth, key=growth.get)
    category = "input" if phase in INPUT_PHASES else "compute"
    nodes = tuple(sorted({hosts.get(int(r), "") for r in cause_ranks} - {""}))
    subject = "rank"
    if causes.all() and len(cause_ranks) > 1:
        subject = "world"
    elif nodes and len(cause_ranks) > 1:
        on_nodes = np.array([hosts.get(int(r), "") in nodes for r in ranks])
        if (on_nodes == causes).all():
            subject = "node"
    change = _pct(a[phase][causes], b[phase][causes], b["step_ns"][causes])
    return Attribution(subject, tuple(int(r) for r in cause_ranks), nodes, phase, category, change)


def window(reads: list[tuple[np.ndarray, dict[str, np.ndarray]]]):
    """The median over reads of each rank's ms per step (``per_step_ms`` of each read), for
    the ranks in every read: one read holding a pause does not move it."""
    ranks = reads[0][0]
    for r, _ in reads[1:]:
        ranks = np.intersect1d(ranks, r)
    stacked: dict[str, list[np.ndarray]] = {}
    for r, ms in reads:
        keep = np.isin(r, ranks)
        for name, values in ms.items():
            stacked.setdefault(name, []).append(values[keep])
    return ranks, {name: np.median(np.stack(v), axis=0) for name, v in stacked.items()}


def _aligned(before, after):
    ranks, i, j = np.intersect1d(before[0], after[0], return_indices=True)
    return ranks, {k: v[i] for k, v in before[1].items()}, {k: v[j] for k, v in after[1].items()}


def _pct(now: np.ndarray, then: np.ndarray, step: np.ndarray) -> float | None:
    """The change of a phase in % of itself; None when it was under 1 % of the step."""
    base = float(np.sum(then))
    if base <= 0.01 * float(np.sum(step)):
        return None
    return round(100 * (float(np.sum(now)) / base - 1), 1)


class SlowdownDetector:
    """Online: ``observe`` each read of the ranks' live states; it returns the alerts that
    read raised (an onset or a recovery), with ``hosts`` naming each rank's node."""

    def __init__(self, config: DetectorConfig | None = None, hosts: Mapping[int, str] = ()):
        self.config = config or DetectorConfig()
        self.hosts = dict(hosts)
        self._last: TotalsRead | None = None
        self._start_s: float | None = None
        self._state = _State()

    @property
    def active(self) -> Alert | None:
        return self._state.active

    def observe(self, at_s: float, states: Mapping[int, LiveState]) -> list[Alert]:
        return self.observe_read(read_totals(at_s, states))

    def observe_read(self, now: TotalsRead) -> list[Alert]:
        at_s = now.at_s
        last, self._last = self._last, now
        if self._start_s is None:
            self._start_s = at_s
        if last is None or not now.ranks.size:
            return []
        ranks, ms = per_step_ms(last, now)
        if not ranks.size:
            return []
        value, steps = job_step_ms(ms), int(np.min(ms["steps"]))
        if not self._ready(now, at_s):
            return []
        st = self._state
        if st.base_ms is None:
            self._learn((ranks, ms), now, value, steps)
            return []
        return self._step(now, (ranks, ms), value, steps)

    def _ready(self, now: TotalsRead, at_s: float) -> bool:
        c = self.config
        steps = int(np.min(now.values[:, _COL["steps"]])) if now.values.size else 0
        start = at_s if self._start_s is None else self._start_s
        return steps >= c.warmup_steps and at_s - start >= c.warmup_s

    def _learn(self, read, now: TotalsRead, value: float, steps: int) -> None:
        st, c = self._state, self.config
        st.base_reads.append(read)
        st.baseline.append(value)
        st.baseline_steps += steps
        if len(st.baseline) < c.baseline_reads or st.baseline_steps < c.baseline_steps:
            return
        st.base_ms = float(np.median(st.baseline))
        logs = np.log(np.array(st.baseline) / st.base_ms)
        noise = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
        st.k = max(math.log1p(c.min_change / 2), noise / 2)
        st.h = max(c.h_min, c.h_noise * noise)
        st.onset = now

    def _step(self, now: TotalsRead, read, value: float, steps: int) -> list[Alert]:
        st, c = self._state, self.config
        if st.active is not None:
            st.since = (st.since + [(value, steps)])[-c.confirm_reads :]
            level = float(np.median([v for v, _ in st.since]))
            enough = len(st.since) >= c.confirm_reads
            if enough and level <= st.base_ms * (1 + c.min_change / 2):
                return [self._recover(now, level)]
            return []
        clip = st.h * c.clip_share
        x = max(min(math.log(max(value, 1e-9) / st.base_ms), clip), -clip)
        st.faster = max(0.0, st.faster - x - st.k)
        if st.faster >= st.h:  # warm-up outlasted the baseline, or the job sped up
            self._state = _State(alerts=st.alerts)
            return []
        st.cusum = max(0.0, st.cusum + x - st.k)
        if st.cusum == 0.0:
            st.onset, st.since, st.since_reads = now, [], []
            return []
        st.since.append((value, steps))
        st.since_reads = (st.since_reads + [read])[-MAX_WINDOW:]
        reads, n = len(st.since), sum(s for _, s in st.since)
        if st.cusum < st.h or reads < c.confirm_reads or n < c.confirm_steps:
            return []
        level = float(np.median([v for v, _ in st.since]))
        if level < st.base_ms * (1 + c.min_change):
            return []
        return [self._onset(now, level)]

    def _onset(self, now: TotalsRead, level: float) -> Alert:
        st = self._state
        who = attribute(window(st.base_reads), window(st.since_reads), self.hosts)
        st.alerts += 1
        change = round(100 * (level / st.base_ms - 1), 1)
        alert = Alert(
            event="onset", id=st.alerts, subject=who.subject, ranks=who.ranks, nodes=who.nodes,
            phase=who.phase, category=who.category, change_pct=change,
            phase_change_pct=who.phase_change_pct, baseline_ms=round(st.base_ms, 3),
            now_ms=round(level, 3), since_step=_min_steps(st.onset),
            detected_step=_min_steps(now), detected_at=now.at_s, message="",
        )  # fmt: skip
        alert = _with_message(alert)
        st.active, st.since, st.since_reads = alert, [], []
        return alert

    def _recover(self, now: TotalsRead, level: float) -> Alert:
        st = self._state
        onset = st.active
        alert = _with_message(
            Alert(
                event="recovery",
                id=onset.id,
                subject=onset.subject,
                ranks=onset.ranks,
                nodes=onset.nodes,
                phase=onset.phase,
                category=onset.category,
                change_pct=round(100 * (level / st.base_ms - 1), 1),
                phase_change_pct=None,
                baseline_ms=onset.baseline_ms,
                now_ms=round(level, 3),
                since_step=onset.since_step,
                detected_step=_min_steps(now),
                detected_at=now.at_s,
                message="",
            )  # fmt: skip
        )
        st.active, st.cusum, st.since, st.onset = None, 0.0, [], now
        return alert


def _min_steps(snap: TotalsRead) -> int:
    return int(np.min(snap.values[:, _COL["steps"]])) if snap.values.size else 0


def _who(a: Alert) -> str:
    if a.subject == "link":
        ranks = ", ".join(map(str, a.ranks[:8])) + (", ..." if len(a.ranks) > 8 else "")
        where = " <-> ".join(a.nodes) if len(a.nodes) == 2 else f"inside {a.nodes[0]}"
        return f"link {where} (the collectives of ranks {ranks})"
    if a.subject == "world" and a.category == "communication":
        where = f"waiting most: {', '.join(a.nodes)}; " if a.nodes else ""
        return f"collectives on every rank ({where}no link told apart)"
    if a.subject == "world":
        return f"every rank ({len(a.ranks)})"
    if a.subject == "node":
        return f"node {', '.join(a.nodes)} ({len(a.ranks)} ranks)"
    shown = ", ".join(map(str, a.ranks[:8])) + (", ..." if len(a.ranks) > 8 else "")
    node = f" on node {', '.join(a.nodes)}" if len(a.nodes) == 1 else ""
    return f"rank{'s' if len(a.ranks) > 1 else ''} {shown}{node}"


def _with_message(a: Alert) -> Alert:
    if a.event == "recovery":
        text = (f"slowdown {a.id} recovered at step {a.detected_step:,}: step {a.now_ms:.1f} ms "
                f"against {a.baseline_ms:.1f} ms before it ({_who(a)}, {a.phase})")  # fmt: skip
        return replace(a, message=text)
    phase = f"{a.phase} {a.phase_change_pct:+.0f} %" if a.phase_change_pct is not None else a.phase
    step = f"{a.baseline_ms:.1f} -> {a.now_ms:.1f} ms ({a.change_pct:+.0f} %, {a.category})"
    text = f"slowdown: {_who(a)}: {phase} since step {a.since_step:,}; the step {step}"
    return replace(a, message=text)


def read_alerts(run_dir: Path) -> list[Alert]:
    """The alerts a run's watch wrote (none when it wrote no file); a torn last line (the
    launcher killed mid-write) is left out."""
    path = Path(run_dir) / ALERTS_FILE
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
            out.append(Alert(**{**doc, "ranks": tuple(doc["ranks"]), "nodes": tuple(doc["nodes"])}))
        except (ValueError, TypeError, KeyError):
            continue
    return out


def latest_alert(alerts: list[Alert]) -> Alert | None:
    """The last onset still open, else the last recovery (None without alerts)."""
    recovered = {a.id for a in alerts if a.event == "recovery"}
    open_ = [a for a in alerts if a.event == "onset" and a.id not in recovered]
    return open_[-1] if open_ else (alerts[-1] if alerts else None)
