"""The run's live metrics for a cluster's Prometheus (``--metrics-port``) and Pushgateway
(``--metrics-push``), from what the watch beside the launcher reads every half second.

Counters from the ranks' running totals (events/live_state.py ``LiveTotals``), so that
Prometheus' ``rate()`` gives step time, samples/s and phase shares over any window:

- ``scalescope_steps_total``, ``scalescope_step_seconds_total``, ``scalescope_samples_total``,
  ``scalescope_collective_seconds_total`` (time in collectives, issue to completion: waiting
  and transfer) and ``scalescope_phase_seconds_total{phase=...}``;
- per op, gauges of the last completed collective of each op and group a read of the watch
  caught (a state holds the last collective a rank entered): ``scalescope_collective_bytes``,
  ``…_bytes_per_second`` (algbw) and ``…_bus_bytes_per_second`` (nccl-tests' factor for the
  group's size), labelled ``op``, ``group`` and ``dim`` (its mesh dimension or role,
  launch/metrics/labels.py);
- ``scalescope_step``, a gauge of the steps each rank has done (per node, its slowest rank's);
- ``scalescope_world_size`` (the ranks the run has) and ``scalescope_ranks_reporting`` (those
  whose live state the watch read last, or that a node record it read covers): fewer
  reporting than the world is a rank that has not started, or whose state is unknown; per
  node, ``scalescope_node_records_unknown`` (node records in the job's store that did not
  open with the job's seal);
- ``scalescope_slowdown_alerts_total``, ``scalescope_slowdown_active{subject,phase,category}``
  (1 while a slowdown is open, launch/watch/slowdown.py) with
  ``scalescope_slowdown_change_ratio`` (the job's step since its onset against the baseline:
  0.25 is 25 % slower), and ``scalescope_hang`` (1 once the hang watch named a hang);
- ``scalescope_watch_up{watch="hang"|"slowdown"}``: 1 while that watch runs, 0 once it stopped
  on an error (launch/watch/hang.py ``watch_stopped``): its silence then says nothing;
- labels ``job`` (the run's id), ``rank``, ``Hostname`` and ``gpu`` (DCGM exporter's names,
  so that the two join); ``--metrics-per node`` sums the ranks of each node instead (``rank``
  and ``gpu`` then absent), for very large jobs; ``auto`` (the default) does so beyond
  PER_RANK_UP_TO ranks. Per node, a node whose relay publishes its record in the job's store
  (launch/channel/node_record.py) is read from it, not from its ranks' states
  (launch/metrics/node_records.py).

A scrape costs the watch's process the formatting of the states it already holds (no rank is
asked anything), written by launch/metrics/text.py rather than by ``prometheus_client``,
whose ~12 µs per sample made a scrape of 1,024 ranks' series 149 ms
(benchmarks/metrics_scrape.py; docs/metrics.md has today's figures).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scalescope.analyze.watch.slowdown_alerts import CLOSING, Alert
from scalescope.events.live_state import LiveState
from scalescope.launch.channel.node_record import NodesRead
from scalescope.launch.metrics.http import bind, push
from scalescope.launch.metrics.labels import RankLabels
from scalescope.launch.metrics.node_records import record_rows, uncovered_records
from scalescope.launch.metrics.rows import (
    PREFIX,
    Rows,
    emit,
    node_rows,
    op_rows,
    rank_rows,
)
from scalescope.launch.metrics.text import (
    COUNTER,
    GAUGE,
    Family,
    joined,
    label_text,
    openmetrics_text,
    prometheus_text,
)

CHANGE_HELP = (
    "An open slowdown's change: the job's step since its onset against the baseline "
    "(0.25: 25 % slower)"
)
NODES_UNKNOWN_HELP = (
    "Node records in the job's store that did not open with the job's seal (written without "
    "the user's key, another job's, a replay): their ranks are read one by one"
)
PER_RANK_UP_TO = 256
"""``--metrics-per auto``: series per rank up to this many ranks, per node beyond."""

OpsSeen = dict[int, dict[tuple[str, str], tuple[int, float]]]
"""rank -> (op, group) -> (bytes, seconds) of the last completed collective seen."""


class Latest:
    """What the watch saw last: filled by its thread, read by a scrape."""

    def __init__(self) -> None:
        self.states: Mapping[int, LiveState] = {}
        self.nodes = NodesRead()
        """The nodes' records read with the states (only through the job's store)."""
        self.reporting = 0
        """The ranks whose state was read, or that a record covers
        (``scalescope_ranks_reporting``)."""
        self.ops: OpsSeen = {}
        self.alerts: tuple[Alert, ...] = ()
        self.hang = False
        self.watches: dict[str, bool] = {}
        """Each watch feeding this endpoint, and whether it still runs."""
        self.version = 0
        """Raised at each change: a scrape between two reads reuses the last text."""
        self.lock = threading.Lock()

    def observe(self, states: Mapping[int, LiveState], nodes: NodesRead | None = None) -> None:
        """One read of the watch: the states, the nodes' records, and each rank's collective
        if it completed. With records the states may be only those of the ranks no record
        covers (launch/watch/sources.py ``StoreSource.read``)."""
        nodes = nodes or NodesRead()
        covered = {r for record in nodes.records for r in record.ranks}
        with self.lock:
            self.states, self.nodes = states, nodes
            self.reporting = len(covered.union(states))
            for rank, s in states.items():
                if (done := s.completed) is not None:
                    self.ops.setdefault(rank, {})[(s.op, s.group)] = done
            self.version += 1

    def alerted(self, alerts: tuple[Alert, ...]) -> None:
        with self.lock:
            self.alerts, self.version = alerts, self.version + 1

    def hung(self) -> None:
        with self.lock:
            self.hang, self.version = True, self.version + 1

    def watching(self, name: str, up: bool = True) -> None:
        """``name``'s watch runs (``up``), or stopped on an error."""
        with self.lock:
            self.watches[name], self.version = up, self.version + 1


class RunCollector:
    """The families of a scrape or a push, from ``Latest``."""

    def __init__(
        self, job: str, latest: Latest, labels: RankLabels, per: str = "rank", world_size: int = 0
    ) -> None:
        self.job, self.latest, self.labels, self.wanted = job, latest, labels, per
        self.world_size = world_size
        self._text: dict[bool, tuple[int, bytes]] = {}

    @property
    def per(self) -> str:
        if self.wanted != "auto":
            return self.wanted
        return "rank" if self.latest.reporting <= PER_RANK_UP_TO else "node"

    def text(self, openmetrics: bool = False) -> bytes:
        """The scrape's text, written once per read of the watch."""
        version, text = self._text.get(openmetrics, (-1, b""))
        if version != self.latest.version:
            version = self.latest.version
            families = self.families()
            text = openmetrics_text(families) if openmetrics else prometheus_text(families)
            self._text[openmetrics] = (version, text)
        return text

    def families(self) -> list[Family]:
        with self.latest.lock:
            states, alerts, hang = self.latest.states, self.latest.alerts, self.latest.hang
            watches, nodes = dict(self.latest.watches), self.latest.nodes
            reporting = self.latest.reporting
            by_records = bool(nodes.records or nodes.unknown) and self.per == "node"
            covered = {r for record in nodes.records for r in record.ranks} if by_records else ()
            ops = {r: dict(seen) for r, seen in self.latest.ops.items() if r not in covered}
        if by_records:
            records = nodes.records
            rows = record_rows([*records, *uncovered_records(states, ops, self.labels, records)],
                               self.labels)  # fmt: skip
        else:
            rows = self.rows(states, ops)
        return [
            *self.world_families(reporting), *self.node_families(nodes), *emit(rows),
            *self.alert_families(alerts, hang), *self.watch_families(watches),
        ]  # fmt: skip

    def node_families(self, nodes: NodesRead) -> list[Family]:
        """Per node, the records that did not open with the job's seal (their ranks' series
        come from their states); none without records (a run on one node, older relays)."""
        if not (nodes.records or nodes.unknown):
            return []
        unknown = Family(PREFIX + "node_records_unknown", GAUGE, NODES_UNKNOWN_HELP)
        unknown.add(self.labels.job_text, len(nodes.unknown))
        return [unknown]

    def world_families(self, reporting: int) -> list[Family]:
        job = self.labels.job_text
        out = []
        if self.world_size:
            world = Family(PREFIX + "world_size", GAUGE, "Ranks in the run")
            world.add(job, self.world_size)
            out.append(world)
        seen = Family(PREFIX + "ranks_reporting", GAUGE, "Ranks whose live state was read last")
        seen.add(job, reporting)
        return [*out, seen]

    def watch_families(self, watches: dict[str, bool]) -> list[Family]:
        up = Family(
            PREFIX + "watch_up", GAUGE, "1 while the watch runs, 0 once it stopped on an error"
        )
        for name, running in sorted(watches.items()):
            up.add(joined(self.labels.job_text, label_text((("watch", name),))), int(running))
        return [up] if watches else []

    def rows(self, states: Mapping[int, LiveState], ops: OpsSeen) -> Rows:
        shown, labels, hosts = [], [], []
        for rank, state in sorted(states.items()):
            stepping = state.steps_done > 0
            known = self.labels.rank(rank, stepping) if state.totals is not None else None
            if known is not None:
                shown.append(state)
                labels.append(known[0])
                hosts.append(known[1])
        rows = rank_rows(shown, labels)
        for row, state in enumerate(shown):
            seen = ops.get(state.rank, {})
            groups = {g: self.labels.group(state.rank, g) for _, g in seen}
            rows.ops.extend(op_rows(row, seen, groups))
        return node_rows(rows, hosts, self.labels.job_text) if self.per == "node" else rows

    def alert_families(self, alerts: tuple[Alert, ...], hang: bool) -> list[Family]:
        job = self.labels.job_text
        onsets = Family(PREFIX + "slowdown_alerts", COUNTER, "Slowdowns named")
        onsets.add(job, sum(1 for a in alerts if a.event == "onset"))
        active = Family(PREFIX + "slowdown_active", GAUGE, "1 while a slowdown is open")
        change = Family(PREFIX + "slowdown_change_ratio", GAUGE, CHANGE_HELP)
        recovered = {a.id for a in alerts if a.event in CLOSING}
        for a in alerts:
            if a.event == "onset" and a.id not in recovered:
                what = (("subject", a.subject), ("phase", a.phase), ("category", a.category))
                active.add(joined(job, label_text(what)), 1)
                change.add(joined(job, label_text(what)), a.change_pct / 100)
        hung = Family(PREFIX + "hang", GAUGE, "1 once the watch named a hang")
        hung.add(job, int(hang))
        return [onsets, active, change, hung]


class MetricsEndpoint:
    """The HTTP endpoint and the pushes of one run's metrics."""

    def __init__(
        self, job: str, host: Callable[[int], str] | None = None, port: int | None = None,
        addr: str = "127.0.0.1", push: str | None = None, push_every_s: float = 15.0,
        per: str = "auto", run_dir: Path | None = None, world_size: int = 0,
        gpus: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.latest = Latest()
        labels = RankLabels(job, host, run_dir, world_size, gpus)
        self.collector = RunCollector(job, self.latest, labels, per, world_size)
        self.job, self.port, self.addr = job, port, addr
        self.push_url, self.push_every_s = push, push_every_s
        self._server: Any = None
        self._done = threading.Event()
        self._pusher: threading.Thread | None = None

    def bind(self) -> None:
        """Listen now (before any rank starts): a port in use is a one-line error."""
        if self.port is None:
            return
        self._server = bind(self.addr, self.port, self.collector.text)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True, name="scalescope-metrics-http").start()  # fmt: skip

    def start(self) -> None:
        if self.push_url is not None:
            self._pusher = threading.Thread(target=self._push_loop, daemon=True,
                                            name="scalescope-metrics-push")  # fmt: skip
            self._pusher.start()

    def _push_loop(self) -> None:
        while not self._done.wait(self.push_every_s):
            self.push()

    def push(self) -> bool:
        try:
            push(self.push_url or "", self.job, self.collector.text())
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
