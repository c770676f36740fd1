"""The run's live metrics for a cluster's Prometheus (``--metrics-port``) and Pushgateway
(``--metrics-push``), from what the watch beside the launcher reads every half second.

Counters from the ranks' running totals (events/live_state.py ``LiveTotals``), so that
Prometheus' ``rate()`` gives step time, samples/s and phase shares over any window:

- ``scalescope_steps_total``, ``scalescope_step_seconds_total``, ``scalescope_samples_total``,
  ``scalescope_collective_seconds_total`` (time in collectives, issue to completion: waiting
  and transfer) and ``scalescope_phase_seconds_total{phase=...}``;
- ``scalescope_slowdown_alerts_total``, ``scalescope_slowdown_active{subject,phase,category}``
  (1 while a slowdown is open, launch/slowdown_watch.py) and ``scalescope_hang`` (1 once the
  hang watch named a hang);
- labels ``job`` (the run's id), ``rank`` and ``Hostname`` (DCGM exporter's name for the
  node, so that the two join); ``--metrics-per node`` sums the ranks of each node instead
  (``rank`` then absent), for very large jobs; ``auto`` (the default) does so beyond
  PER_RANK_UP_TO ranks.

A scrape costs the watch's process a walk over the states it already holds (no rank is asked
anything): ``benchmarks/metrics_scrape.py`` measures it at 1,024 ranks: 31.5 ms of CPU per
node, 149 ms per rank (prometheus_client formats each of the 12,290 samples in Python).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scalescope.analyze.slowdown import Alert
from scalescope.events.live_state import TOTAL_PHASES, LiveState

PREFIX = "scalescope_"
PER_RANK_UP_TO = 256
"""``--metrics-per auto``: series per rank up to this many ranks, per node beyond."""


@dataclass
class Latest:
    """What the watch saw last: filled by its thread, read by a scrape."""

    states: Mapping[int, LiveState] = field(default_factory=dict)
    alerts: tuple[Alert, ...] = ()
    hang: bool = False


class RunCollector:
    """A prometheus_client collector over ``Latest`` (``collect`` builds each scrape)."""

    def __init__(self, job: str, latest: Latest, host: Callable[[int], str], per: str = "rank"):
        self.job, self.latest, self.host, self.wanted = job, latest, host, per
        self._hosts: dict[int, str] = {}

    @property
    def per(self) -> str:
        if self.wanted != "auto":
            return self.wanted
        return "rank" if len(self.latest.states) <= PER_RANK_UP_TO else "node"

    def _host(self, rank: int) -> str:
        known = self._hosts.get(rank)
        if not known:
            known = self._hosts[rank] = self.host(rank)
        return known

    def _keys(self, states: Mapping[int, LiveState]) -> dict[tuple[str, ...], list[LiveState]]:
        groups: dict[tuple[str, ...], list[LiveState]] = {}
        for rank, state in sorted(states.items()):
            key = (self._host(rank),) if self.per == "node" else (str(rank), self._host(rank))
            groups.setdefault(key, []).append(state)
        return groups

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        latest = self.latest
        labels = ["job", "Hostname"] if self.per == "node" else ["job", "rank", "Hostname"]
        groups = self._keys({r: s for r, s in latest.states.items() if s.totals is not None})

        def family(name: str, doc: str, extra: tuple[str, ...] = ()) -> CounterMetricFamily:
            return CounterMetricFamily(PREFIX + name, doc, labels=[*labels, *extra])

        steps = family("steps", "Steps done")
        step_s = family("step_seconds", "Time in steps (s)")
        samples = family("samples", "Training samples")
        colls = family("collective_seconds", "Time in collectives, issue to completion (s)")
        phases = family("phase_seconds", "Time in each phase (s)", ("phase",))
        for key, members in groups.items():
            values = [self.job, *key]
            steps.add_metric(values, sum(s.steps_done for s in members))
            step_s.add_metric(values, sum(s.totals.step_ns for s in members) / 1e9)
            samples.add_metric(values, sum(s.totals.samples for s in members))
            colls.add_metric(values, sum(s.totals.collective_ns for s in members) / 1e9)
            for phase in TOTAL_PHASES:
                total = sum(s.totals.phase_ns[phase] for s in members) / 1e9
                phases.add_metric([*values, phase], total)
        yield from (steps, step_s, samples, colls, phases)
        yield from self._alerts(GaugeMetricFamily, CounterMetricFamily)

    def _alerts(self, gauge, counter) -> Iterator[Any]:
        alerts = self.latest.alerts
        onsets = counter(PREFIX + "slowdown_alerts", "Slowdowns named", labels=["job"])
        onsets.add_metric([self.job], sum(1 for a in alerts if a.event == "onset"))
        active = gauge(PREFIX + "slowdown_active", "1 while a slowdown is open",
                       labels=["job", "subject", "phase", "category"])  # fmt: skip
        recovered = {a.id for a in alerts if a.event == "recovery"}
        for a in alerts:
            if a.event == "onset" and a.id not in recovered:
                active.add_metric([self.job, a.subject, a.phase, a.category], 1)
        hang = gauge(PREFIX + "hang", "1 once the watch named a hang", labels=["job"])
        hang.add_metric([self.job], int(self.latest.hang))
        yield from (onsets, active, hang)


class MetricsEndpoint:
    """The HTTP endpoint and the pushes of one run's metrics."""

    def __init__(
        self, job: str, host: Callable[[int], str], port: int | None = None,
        addr: str = "127.0.0.1", push: str | None = None, push_every_s: float = 15.0,
        per: str = "auto",
    ) -> None:  # fmt: skip
        from prometheus_client import CollectorRegistry

        self.latest = Latest()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RunCollector(job, self.latest, host, per))
        self.job, self.port, self.addr = job, port, addr
        self.push_url, self.push_every_s = push, push_every_s
        self._server: Any = None
        self._done = threading.Event()
        self._pusher: threading.Thread | None = None

    def bind(self) -> None:
        """Listen now (before any rank starts): a port in use is a one-line error."""
        if self.port is None:
            return
        from prometheus_client import start_http_server

        try:
            self._server, _ = start_http_server(self.port, self.addr, registry=self.registry)
        except OSError as exc:
            raise ValueError(
                f"--metrics-port {self.port}: cannot listen on {self.addr}:{self.port}: "
                f"{exc.strerror or exc}"
            ) from None

    def start(self) -> None:
        if self.push_url is not None:
            self._pusher = threading.Thread(target=self._push_loop, daemon=True,
                                            name="scalescope-metrics-push")  # fmt: skip
            self._pusher.start()

    def _push_loop(self) -> None:
        while not self._done.wait(self.push_every_s):
            self.push()

    def push(self) -> bool:
        from prometheus_client import push_to_gateway

        try:
            push_to_gateway(self.push_url, job=self.job, registry=self.registry, timeout=5)
        except Exception as exc:  # a gateway down must not stop the run; said each time
            print(f"scalescope: --metrics-push {self.push_url}: {exc}", file=sys.stderr)
            return False
        return True

    def close(self) -> None:
        """The last push, then stop serving."""
        self._done.set()
        if self.push_url is not None:
            self.push()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
