"""Generated step streams replayed through the slowdown detector offline
(analyze/watch/slowdown.py), as the watcher would read them: false alarms per 10 hours of
steady steps, the share of 12 % slowdowns found, and how long after the onset a 30 % one is
named.

A stream is a synchronous data-parallel job (``Profile``): each rank's own work per step
(data, forward, backward, optimizer) drawn around ``step_ms`` with a per-step factor common to
the job (``job_noise``) and one per rank (``noise``, lognormal); the step ends when the last
rank has finished and the gradients moved (``comm_ms``), so every other rank waits in
``comm_wait``; its collectives take that wait plus the part of the transfer hidden behind
backward. Besides: a GC-like spike on one rank now and then (its own time x3 for one step), an
evaluation every ``eval_every`` steps (``eval_s`` in the probe's ``eval`` phase, or unnamed:
in the step's time), a checkpoint pause every ``checkpoint_every`` steps (likewise), warm-up
steps twice as long. A planted slowdown (``Plant``) makes the job's step ``change`` slower
from a step on (and no longer from ``until``), through one rank's or node's phase or the
collectives.

The watcher reads the ranks' running totals every ``poll_s``; a read sees the steps finished
by then. Targets: 0 alerts in >= 10 hours of steady steps (at most 1 per 10 hours: the
issue's), a 12 % slowdown found in >= 9 of 10 streams, a 30 % one named within 15 s (fast
steps) or 10 steps (slow steps) of its onset.

    .venv/bin/python benchmarks/slowdown_streams.py --hours 10 --seeds 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector  # noqa: E402
from scalescope.analyze.watch.slowdown_alerts import Alert  # noqa: E402
from scalescope.analyze.watch.slowdown_totals import FIELDS, TotalsRead  # noqa: E402

SHARES = {"data": 0.05, "forward": 0.3, "backward": 0.5, "optimizer": 0.15}
"""Each rank's own work per step, as shares of ``step_ms``."""
COL = {name: i for i, name in enumerate(FIELDS)}
CHUNK = 20_000


@dataclass(frozen=True)
class Plant:
    kind: str
    """``rank``, ``node`` or ``comm``."""
    at_step: int
    change: float
    """How much slower the job's step gets (0.3: 30 %)."""
    target: int = 0
    """The rank, or the node's index."""
    phase: str = "forward"
    until: int | None = None


@dataclass(frozen=True)
class Profile:
    ranks: int = 8
    per_node: int = 4
    step_ms: float = 200.0
    comm_ms: float = 20.0
    noise: float = 0.03
    job_noise: float = 0.03
    spike_every: int = 2_000
    eval_every: int = 2_500
    eval_s: float = 20.0
    eval_named: bool = True
    checkpoint_every: int = 9_000
    checkpoint_s: float = 45.0
    checkpoint_named: bool = False
    warmup_steps: int = 30
    poll_s: float = 0.5
    drift: float = 0.0
    """Slow drift: the step's amplitude (0.04: +-4 %) on a sine of period ``drift_h``."""
    drift_h: float = 6.0
    job_rho: float = 0.0
    """The shared factor's memory from step to step (AR(1); 0: independent steps)."""
    tail_df: float = 0.0
    """Heavy tails: the per-rank noise a Student t of these degrees of freedom (0: normal)."""
    period: int = 0
    """Periodic work: rank 0 does ``period_ms`` more (in ``other``) every ``period`` steps."""
    period_ms: float = 0.0

    def host(self, rank: int) -> str:
        return f"node{rank // self.per_node}"


def _steps(p: Profile, plant: Plant | None, first: int, n: int, rng, carry: dict) -> np.ndarray:
    """Per step and rank, the FIELDS' values of that step alone (ns; steps = 1); ``carry``
    holds what one chunk of steps leaves to the next."""
    idx = np.arange(first, first + n)
    job = _job_factor(p, idx, rng, carry)
    own = {ph: p.step_ms * share * job * _rank_noise(p, rng, n)
           for ph, share in SHARES.items()}  # fmt: skip
    warm = np.where(idx < p.warmup_steps, 2.0, 1.0)[:, None]
    spikes = rng.random((n, p.ranks)) < 1.0 / (p.spike_every * p.ranks)
    for ph in own:
        own[ph] = own[ph] * warm * np.where(spikes, 3.0, 1.0)
    comm = p.comm_ms * job[:, 0] * rng.lognormal(0.0, p.noise, n)
    if plant is not None:
        _plant(p, plant, idx, own, comm)
    mine = sum(own.values())
    step = mine.max(axis=1) + comm
    periodic = np.where(idx % p.period == 0, p.period_ms * job[:, 0], 0.0) if p.period else 0
    step = step + periodic
    pauses = {"eval": (p.eval_every, p.eval_s, p.eval_named),
              "checkpoint": (p.checkpoint_every, p.checkpoint_s, p.checkpoint_named)}  # fmt: skip
    out = np.zeros((n, p.ranks, len(FIELDS)))
    wait = step[:, None] - mine
    wait[:, 0] -= periodic  # rank 0's own work, outside the phases; the others wait for it
    for name, (every, seconds, named) in pauses.items():
        ms = np.where((idx > 0) & (idx % every == 0), seconds * 1e3, 0.0)[:, None]
        step = step + ms[:, 0]  # unnamed: in the step, outside every phase (other)
        if named:
            out[:, :, COL[name]] = ms
    out[:, :, COL["steps"]] = 1
    out[:, :, COL["step_ns"]] = step[:, None]
    out[:, :, COL["samples"]] = 32
    out[:, :, COL["comm_wait"]] = wait
    out[:, :, COL["collective_ns"]] = wait + 0.5 * own["backward"]
    for ph, ms in own.items():
        out[:, :, COL[ph]] = ms
    out[:, :, 1:] *= 1e6
    out[:, :, COL["samples"]] /= 1e6
    return out


def _job_factor(p: Profile, idx: np.ndarray, rng, carry: dict) -> np.ndarray:
    """The per-step factor every rank shares (n x 1): lognormal noise, AR(1) over steps when
    ``job_rho``, times the slow drift."""
    if not p.job_rho:
        job = rng.lognormal(0.0, p.job_noise, (len(idx), 1))
    else:
        shocks = rng.normal(0.0, p.job_noise * np.sqrt(1 - p.job_rho**2), len(idx))
        logs, last = np.empty(len(idx)), carry.get("job_log", 0.0)
        for i, e in enumerate(shocks.tolist()):
            last = logs[i] = p.job_rho * last + e
        carry["job_log"] = last
        job = np.exp(logs)[:, None]
    if p.drift:
        hours = idx * (p.step_ms + p.comm_ms) / 3.6e6
        job = job * (1 + p.drift * np.sin(2 * np.pi * hours / p.drift_h))[:, None]
    return job


def _rank_noise(p: Profile, rng, n: int) -> np.ndarray:
    if p.tail_df:
        return np.exp(p.noise * rng.standard_t(p.tail_df, (n, p.ranks)))
    return rng.lognormal(0.0, p.noise, (n, p.ranks))


def _plant(p: Profile, plant: Plant, idx: np.ndarray, own: dict, comm: np.ndarray) -> None:
    """Make the job's step ``plant.change`` slower from ``plant.at_step`` on: the collectives
    take that much longer, or the planted ranks' phase grows until they finish that much
    later than the last rank did (in place)."""
    on = (idx >= plant.at_step) & (idx < (plant.until or idx[-1] + 1))
    mine = sum(own.values())
    step = mine.max(axis=1) + comm
    if plant.kind == "comm":
        comm += np.where(on, plant.change * step, 0.0)
        return
    who = np.zeros(p.ranks, dtype=bool)
    if plant.kind == "rank":
        who[plant.target] = True
    else:
        who[plant.target * p.per_node : (plant.target + 1) * p.per_node] = True
    extra = ((1 + plant.change) * step - comm)[:, None] - mine
    own[plant.phase] += np.where(on[:, None] & who, np.maximum(extra, 0.0), 0.0)


def reads(p: Profile, hours: float, seed: int, plant: Plant | None = None) -> Iterator[TotalsRead]:
    """The watcher's reads of a generated job over ``hours`` of its time."""
    rng, carry = np.random.default_rng(seed), {}
    ranks = np.arange(p.ranks)
    totals = np.zeros((p.ranks, len(FIELDS)))
    clock_s, next_poll, first, end_s = 0.0, p.poll_s, 0, hours * 3600
    while clock_s < end_s:
        steps = _steps(p, plant, first, CHUNK, rng, carry)
        ends = clock_s + np.cumsum(steps[:, 0, COL["step_ns"]]) / 1e9
        running = totals + np.cumsum(steps, axis=0)
        polls = np.arange(next_poll, min(ends[-1], end_s), p.poll_s)
        done = np.searchsorted(ends, polls, side="right")
        for at, n in zip(polls.tolist(), done.tolist(), strict=True):
            values = running[n - 1] if n else totals
            yield TotalsRead(at, ranks, values.copy())
        totals, clock_s, first = running[-1], float(ends[-1]), first + CHUNK
        next_poll = float(polls[-1]) + p.poll_s if polls.size else next_poll


def replay(p: Profile, hours: float, seed: int, plant: Plant | None = None,
           config: DetectorConfig | None = None) -> list[Alert]:  # fmt: skip
    hosts = {r: p.host(r) for r in range(p.ranks)}
    detector = SlowdownDetector(config, hosts)
    return [a for read in reads(p, hours, seed, plant) for a in detector.observe_read(read)]


def onset_time_s(p: Profile, seed: int, step: int) -> float:
    """When step ``step`` began in the stream of ``seed`` (the same draws as ``reads``)."""
    rng, carry = np.random.default_rng(seed), {}
    clock, first = 0.0, 0
    while True:
        steps = _steps(p, None, first, CHUNK, rng, carry)
        ends = clock + np.cumsum(steps[:, 0, COL["step_ns"]]) / 1e9
        if step < first + CHUNK:
            return clock if step == first else float(ends[step - first - 1])
        clock, first = float(ends[-1]), first + CHUNK


PROFILES = {
    "fast steps (200 ms), named evals, unnamed checkpoints": Profile(),
    "noisy fast steps (8 % per rank)": Profile(noise=0.08, job_noise=0.05),
    "slow steps (3 s), unnamed evals": Profile(step_ms=3000.0, comm_ms=200.0, eval_named=False,
                                               eval_every=300, checkpoint_every=1000),
}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=10.0, help="steady hours per profile")
    ap.add_argument("--seeds", type=int, default=10, help="streams per planted slowdown")
    args = ap.parse_args()
    from results import record

    failed = 0
    for name, profile in PROFILES.items():
        started = time.perf_counter()
        alerts = [a for a in replay(profile, args.hours, seed=1) if a.event == "onset"]
        per10 = len(alerts) * 10 / args.hours
        print(f"steady, {name}: {len(alerts)} alerts in {args.hours:g} h "
              f"({time.perf_counter() - started:.0f} s to replay)", flush=True)  # fmt: skip
        for a in alerts[:3]:
            print(f"  {a.message}")
        met = per10 <= 1
        failed += not met
        record(f"slowdown: false alarms per 10 h of steady steps ({name})", per10, "alerts",
               "<= 1", met, f"{len(alerts)} in {args.hours:g} h, one 8-rank stream")  # fmt: skip
    for change, label in ((0.12, "12 %"), (0.30, "30 %")):
        found, latency = 0, []
        base = Profile()
        for seed in range(args.seeds):
            at = 3_000 + 37 * seed
            plant = Plant("rank", at, change, target=seed % base.ranks)
            alerts = [a for a in replay(base, 0.5, seed, plant) if a.event == "onset"]
            hit = [a for a in alerts if a.ranks == (plant.target,) and a.phase == "forward"]
            if hit:
                found += 1
                latency.append(hit[0].detected_at - onset_time_s(base, seed, at))
        lat = statistics.median(latency) if latency else float("nan")
        print(f"rank {label} slower in forward: named in {found} of {args.seeds} streams, "
              f"median {lat:.1f} s after the onset", flush=True)  # fmt: skip
        if change < 0.2:
            met = found >= 0.9 * args.seeds
            record("slowdown: 12 % slowdowns of one rank named (rank and phase)", found, "streams",
                   f">= {0.9 * args.seeds:g} of {args.seeds}", met, "")  # fmt: skip
        else:
            met = found == args.seeds and lat <= 15.0
            record("slowdown: a 30 % slowdown named after its onset (median, 200 ms steps)", lat,
                   "s", "<= 15", met, f"named in {found} of {args.seeds}")  # fmt: skip
        failed += not met
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main())
