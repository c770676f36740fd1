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
  of ``min_change`` of the baseline;
- an active alert that holds ``rebaseline_s`` (10 minutes) and ``rebaseline_reads`` reads
  with steps (20 times the onset's ``confirm_reads``) is the new normal: one ``rebaseline``
  note, then the baseline is learnt again from the reads that follow, so a later slowdown on
  top of it is an onset of its own. Ten minutes is longer than any evaluation or checkpoint
  pause the streams hold and than the recorded slowdowns, so a slowdown that ends is still
  a recovery; one that outlasts it is the job's new step, not an alarm to hold open.

A maintained library was weighed (river's PageHinkley, ruptures): neither takes the clipping,
the size gate and the onset's totals this needs, and river would bring pandas and scipy to
the ranks' launcher for a dozen lines of arithmetic.

Who and what made an onset: slowdown_cause.py; the reads per step: slowdown_totals.py; the
alerts, their words and ``alerts.jsonl`` read back: slowdown_alerts.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scalescope.analyze.watch.slowdown_alerts import Alert, with_message
from scalescope.analyze.watch.slowdown_cause import attribute, window
from scalescope.analyze.watch.slowdown_totals import (
    TotalsRead,
    job_step_ms,
    min_steps,
    per_step_ms,
    read_totals,
)
from scalescope.events.live_state import LiveState

MAX_WINDOW = 64
"""Reads kept since a candidate onset, for the attribution's medians."""
MAX_HELD = 256
"""Reads kept while an alert is active, for the level a re-baseline notes."""


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
    rebaseline_s: float = 600.0
    rebaseline_reads: int = 100


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
    held: list[float] = field(default_factory=list)
    """The job's step of each read since the active alert (the last MAX_HELD)."""
    held_reads: int = 0
    alerts: int = 0


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
        """The alerts this read raised: an onset, a recovery or a re-baseline."""
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
        steps = min_steps(now)
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
            st.held = (st.held + [value])[-MAX_HELD:]
            st.held_reads += 1
            held_s = now.at_s - st.active.detected_at
            if held_s >= c.rebaseline_s and st.held_reads >= c.rebaseline_reads:
                return [self._rebaseline(now)]
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
            now_ms=round(level, 3), since_step=min_steps(st.onset),
            detected_step=min_steps(now), detected_at=now.at_s, message="",
        )  # fmt: skip
        alert = with_message(alert)
        st.active, st.since, st.since_reads = alert, [], []
        st.held, st.held_reads = [], 0
        return alert

    def _rebaseline(self, now: TotalsRead) -> Alert:
        """The active alert's level is the new normal: noted once, then learnt again."""
        st = self._state
        level = float(np.median(st.held))
        alert = self._closing("rebaseline", now, level)
        self._state = _State(alerts=st.alerts)
        return alert

    def _recover(self, now: TotalsRead, level: float) -> Alert:
        st = self._state
        alert = self._closing("recovery", now, level)
        st.active, st.cusum, st.since, st.onset = None, 0.0, [], now
        return alert

    def _closing(self, event: str, now: TotalsRead, level: float) -> Alert:
        """The active onset's recovery or re-baseline, at ``level``."""
        st = self._state
        onset = st.active
        return with_message(
            Alert(
                event=event,
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
                detected_step=min_steps(now),
                detected_at=now.at_s,
                message="",
            )  # fmt: skip
        )
