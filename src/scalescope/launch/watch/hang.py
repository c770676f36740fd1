"""Beside the launcher: notice when no rank progresses, say which is stuck where, and
(only with ``--hang-action kill``) stop the ranks. Each read of the states also goes to the
slowdown watch (launch/watch/slowdown.py) and the metrics endpoint (launch/metrics/endpoint.py).

Reads the ranks' live states twice a second: the state files of this node's ranks
(events/live_state.py), or, for a world srun or mpirun started, the job's store
(launch/channel/store.py). When no rank has
finished a step or a collective for ``--hang-after`` seconds (default: 10 typical steps, at
least 30 s), it asks every rank to flush its events, has each write its Python stacks
(faulthandler on ``STACK_SIGNAL``), and writes ``hang.json`` and ``hang.txt`` to the run
directory. A run that progresses again may hang again later: the files then describe the
latest hang.

Through the store, where the relays publish their nodes' records, a poll reads the records
and the states of the ranks none covers (launch/watch/sources.py ``StoreSource.read``): the
latest progress of the records is every rank's. Only when that is older than the threshold
(or, before any progress, the records' ranks longest in a collective entered before it) are
every rank's states read, for the verdict as from a whole read, and again only once what the
records say of progress changes. The slowdown watch gets every rank's states at most
``SLOWDOWN_SHARE`` of the time (``slowdown_due``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from scalescope.analyze.watch.hang import (
    HangReport,
    hang_threshold_s,
    rank_hang,
    verdicts,
)
from scalescope.analyze.watch.ring_calls import read_last_calls
from scalescope.analyze.watch.ring_hang import ring_verdicts
from scalescope.events.files import HANG_FILE, HANG_TEXT
from scalescope.events.live_state import (
    LiveState,
)
from scalescope.events.run import events_path, write_json_atomic
from scalescope.events.schema import Kind
from scalescope.events.tail import StreamTail
from scalescope.events.watch_stops import record_stop
from scalescope.launch.channel.node_record import NodeRecord, NodesRead
from scalescope.launch.channel.store import freshness
from scalescope.launch.metrics.endpoint import MetricsEndpoint
from scalescope.launch.metrics.labels import visible_gpus
from scalescope.launch.options.groups import HangOptions
from scalescope.launch.watch.slowdown import SlowdownWatch
from scalescope.launch.watch.sources import FileSource, WatchRead

POLL_S = 0.5
NODE_DEFER_S = 10.0
"""How much later than node 0's watch the other nodes' watches act."""
MEDIAN_EVERY_S = 10.0
SLOWDOWN_SHARE = 0.08
"""The slowdown watch reads every rank's state when the last such read took at most this
share of the time since (wall-clock: the watch's CPU and the store's answers): every poll up
to ~2,000 ranks, every ~6-8 s at 16,384, where the watch's polls of the records add ~2 % of
a core (benchmarks/hang_watch_poll.py, docs/many-ranks.md)."""
LAUNCHER_GRACE_S = 20.0
"""After killing hung ranks, how long torch's agent gets to return; it may wait on the
rendezvous store of a node that cannot be reached, and then the launcher ends itself."""


class StepTimes:
    """Rank 0's step durations so far, read incrementally from its event stream (only what
    was appended since the last call), for the default --hang-after."""

    def __init__(self, run_dir: Path) -> None:
        self.tail = StreamTail(events_path(run_dir, 0))
        self.durs_ns: list[np.ndarray] = []

    def median_s(self) -> float | None:
        for batch in self.tail.read_new():
            kinds = batch.column("kind").to_numpy()
            self.durs_ns.append(batch.column("dur_ns").to_numpy()[kinds == Kind.STEP])
        durs = np.concatenate(self.durs_ns) if self.durs_ns else np.empty(0)
        return float(np.median(durs)) / 1e9 if durs.size else None


class HangWatch(threading.Thread):
    def __init__(
        self,
        run_dir: Path,
        world_size: int,
        options: HangOptions,
        source: Any = None,
        defer_s: float = 0.0,
        metrics: MetricsEndpoint | None = None,
    ) -> None:
        super().__init__(daemon=True, name="scalescope-hang-watch")
        self.run_dir, self.world_size, self.options = Path(run_dir), world_size, options
        self.source = source or FileSource(self.run_dir, world_size)
        """Where the states come from and requests go: this node's files (FileSource) or
        the job's store (StoreSource)."""
        self.defer_s = defer_s
        """Added to the threshold: a node other than 0 leaves the hang to node 0's watch,
        which sees every rank, and acts itself only if that one did not (a node cut off)."""
        self.done = threading.Event()
        self.report: HangReport | None = None
        self.killed = False
        self._median: float | None = None
        self._steps = StepTimes(self.run_dir)
        self._median_at = 0.0
        self._reported_progress: float | None = None
        self._said: tuple[tuple, float | None] = ((), None)
        """What the records said of progress at the last read of every rank at a stall, and
        the latest progress (``progress_times``) that read found."""
        self._whole: tuple[float, float] = (-float("inf"), 0.0)
        """When every rank's state was last read for the slowdown watch, and how long it took."""
        self.metrics = metrics
        """The run's metrics endpoint (launch/metrics/endpoint.py), fed each read; None without."""
        self.slowdown = None
        if options.slowdown_pct > 0 and defer_s == 0:  # node 0's watch, which sees every rank
            self.slowdown = SlowdownWatch(
                self.run_dir, self.source.host, options.slowdown_pct, options.on_slowdown,
                flush=self.source.flush,
            )  # fmt: skip
        if metrics is not None:
            metrics.latest.watching("hang")
            if self.slowdown is not None:
                metrics.latest.watching("slowdown")
        self.on_stuck: Callable[[], None] | None = None
        """Called when the launcher has not returned ``LAUNCHER_GRACE_S`` after the ranks
        were killed: it must record the run's end and exit the process."""

    def threshold_s(self) -> float:
        if self.options.after_s is not None:
            return self.options.after_s + self.defer_s
        if time.monotonic() - self._median_at > MEDIAN_EVERY_S:
            self._median_at = time.monotonic()
            with suppress(Exception):
                self._median = self._steps.median_s() or self._median
        return hang_threshold_s(self._median) + self.defer_s

    def run(self) -> None:
        try:
            self.watch()
        except Exception as exc:  # said where its silence would be read as "no hang"
            self.watch_stopped("hang", exc)

    def watch(self) -> None:
        while not self.done.wait(POLL_S):
            self.check()

    def check(self) -> None:
        """One poll: the slowdown watch and the metrics fed, and a hang reported when no
        rank progressed for the threshold."""
        try:
            read = self.poll()
        except Exception:  # the store went away with rank 0: nothing left to watch
            return
        if read.whole:
            self.watch_speed(read.states)
        if self.metrics is not None:
            self.metrics.latest.observe(read.states, self.metric_nodes(read.nodes))
        states = read.states if read.whole else self.stalled(read)
        progress = progress_times(states or {})
        if states is None or not progress or max(progress) == self._reported_progress:
            return
        idle = time.time() - max(progress)
        threshold = self.threshold_s()
        if idle >= threshold:
            self._reported_progress = max(progress)
            try:
                self.on_hang(states, idle, threshold)
            except Exception as exc:  # the watch must outlive one bad read; say it once
                print(f"scalescope: the hang watch failed: {exc!r}", file=sys.stderr)

    def poll(self) -> WatchRead:
        """One read: every rank's state for the metrics per rank and the slowdown watch's
        turn; else what the source reads of its own (StoreSource: the nodes' records)."""
        per_rank = self.metrics is not None and self.metrics.collector.per == "rank"
        if per_rank or not self.slowdown_due():
            return self.source.read(per_rank)
        start = time.perf_counter()
        read = self.source.read(True)
        end = time.perf_counter()
        self._whole = (end, end - start)
        return read

    def slowdown_due(self) -> bool:
        """The slowdown watch's turn for every rank's state (``SLOWDOWN_SHARE``)."""
        at, took = self._whole
        return self.slowdown is not None and time.perf_counter() - at >= took / SLOWDOWN_SHARE

    def stalled(self, read: WatchRead) -> dict[int, LiveState] | None:
        """Every rank's state when the records and the ranks read may show no progress for
        the threshold; None when they cannot, or said the same at the last such read and
        that read's progress was reported or is not that old yet."""
        latest = records_latest(read.nodes.records, read.states)
        if latest is None or latest == self._reported_progress:
            return None
        threshold = self.threshold_s()
        if time.time() - latest < threshold:
            return None
        said = records_said(read.nodes.records, read.states)
        found = self._said[1] if said == self._said[0] else None
        if found is not None and (
            found == self._reported_progress or time.time() - found < threshold
        ):
            return None
        states = self.source.read(True).states
        progress = progress_times(states)
        self._said = (said, max(progress) if progress else None)
        return states

    def watch_speed(self, states: dict[int, LiveState]) -> None:
        if self.slowdown is None:
            return
        try:
            alerts = self.slowdown.observe(time.time(), states)
        except Exception as exc:  # never the hang watch's end; said once, then off
            self.slowdown = None
            self.watch_stopped("slowdown", exc)
            return
        if alerts and self.metrics is not None:
            self.metrics.latest.alerted(tuple(self.slowdown.alerts))
        channel = getattr(self.source, "channel", None)
        for alert in alerts if channel is not None else ():
            with suppress(Exception):  # the store gone with rank 0: the files still have it
                channel.put_alert(alert.message)

    def watch_stopped(self, name: str, exc: Exception) -> None:
        """``name``'s watch stopped on ``exc``: said in the log, the run directory, the
        store (``top``) and the metrics (events/watch_stops.py)."""
        error = f"{type(exc).__name__}: {exc}"
        print(f"scalescope: the {name} watch stopped: {exc!r}", file=sys.stderr, flush=True)
        record_stop(self.run_dir, name, error)
        if self.metrics is not None:
            self.metrics.latest.watching(name, up=False)
        channel = getattr(self.source, "channel", None)
        if channel is not None:
            with suppress(Exception):  # the store gone: the file and the metrics have it
                channel.put_watch_stop(name, error)

    def metrics_final(self) -> None:
        """The states as the ranks left them, for the endpoint's last push."""
        if self.metrics is None:
            return
        with suppress(Exception):  # the store gone with rank 0: the last read stands
            read = self.source.read(True)
            self.metrics.latest.observe(read.states, self.metric_nodes(read.nodes))

    def metric_nodes(self, nodes: NodesRead) -> NodesRead:
        """The nodes' records for the metrics per node (none per rank: the states then are
        every rank's)."""
        per_node = self.metrics is not None and self.metrics.collector.per == "node"
        return nodes if per_node else NodesRead()

    def on_hang(self, states: dict[int, LiveState], idle: float, threshold: float) -> None:
        """Flush, stacks, hang.json; the ranks stopped with ``--hang-action kill`` only when
        every rank's state is known: one whose state someone without the key hid may be
        the rank that is not stuck."""
        unknown = tuple(sorted(self.source.unknown()))
        action = self.options.action
        if action == "kill" and unknown:
            action = "withheld"
        self.source.flush(states)
        stacks = self.source.stacks()
        now = time.time()
        ranks = []
        for rank, state in sorted(states.items()):
            ended = self.source.ended(rank, state)
            hang = rank_hang(state, now, alive=not ended, ended=ended)
            calls, note = read_last_calls(self.run_dir, rank)
            if not calls and not note:  # no ring here: its node's relay may have sent it
                calls, note = self.source.last_calls(rank)
            ranks.append(replace(hang, stack=stacks.get(rank, ""), host=self.source.host(rank),
                                 last_calls=calls, ring_note=note))  # fmt: skip
        report = HangReport(
            detected_at=now, idle_s=idle, hang_after_s=threshold, source="live",
            ranks=tuple(ranks), verdicts=(*verdicts(ranks), *ring_verdicts(ranks)), action=action,
            unknown=unknown,
        )  # fmt: skip
        self.report = report
        if self.metrics is not None:
            self.metrics.latest.hung()
        write_json_atomic(self.run_dir / HANG_FILE, report)
        if self.options.render is not None:
            text = self.options.render(report)
            (self.run_dir / HANG_TEXT).write_text(text + "\n")
            print(text, file=sys.stderr, flush=True)
        if action == "kill":
            self.killed = True
            self.source.stop()
            if not self.done.wait(LAUNCHER_GRACE_S) and self.on_stuck is not None:
                self.on_stuck()


def progress_times(states: dict[int, LiveState]) -> list[float]:
    """When each rank last finished a step or a collective; before any has, when each entered
    its first collective: a rank that waits there for a peer that never comes (stuck before
    its first step) is a hang too, while a slow start with no collective yet is not."""
    progress = [s.last_progress_s for s in states.values() if s.last_progress_s]
    return progress or [s.entered_s for s in states.values() if s.entered_s]


def records_latest(records: tuple[NodeRecord, ...], states: dict[int, LiveState]) -> float | None:
    """The latest progress of any rank, from the records and the states of the ranks they do
    not cover (as ``progress_times`` of every state); before any, the latest of the records'
    earliest entries into a collective and the states' entries: no later than the latest entry
    of every rank, so a stall it does not show, every rank's states would not show either."""
    done = [r.last_progress_s for r in records if r.last_progress_s]
    done += [s.last_progress_s for s in states.values() if s.last_progress_s]
    if done:
        return max(done)
    entered = [r.oldest.entered_s for r in records if r.oldest is not None]
    entered += [s.entered_s for s in states.values() if s.entered_s]
    return max(entered, default=None)


def records_said(records: tuple[NodeRecord, ...], states: dict[int, LiveState]) -> tuple:
    """What the records and the states they do not cover say of progress and collectives:
    unchanged, a read of every rank would find what the last one found."""
    nodes = tuple((r.ranks, r.last_progress_s, r.oldest, r.in_collective) for r in records)
    return nodes + tuple((rank, freshness(s)) for rank, s in sorted(states.items()))


def metrics_endpoint(
    options: HangOptions,
    job: str,
    host: Callable[[int], str] | None,
    run_dir: Path,
    world_size: int,
    hardware: dict[str, Any],
) -> MetricsEndpoint | None:
    """The run's metrics endpoint, listening already (a port in use: a one-line error), or
    None without ``--metrics-port`` and ``--metrics-push``. ``host``: a rank's host where its
    meta file may not be readable here (the job's store); ``hardware``: this node's facts,
    whose GPUs label the ranks by local rank."""
    if not options.metrics:
        return None
    endpoint = MetricsEndpoint(
        job, host, options.metrics_port, options.metrics_addr, options.metrics_push,
        options.metrics_push_every_s, options.metrics_per, run_dir, world_size,
        visible_gpus(hardware, os.environ),
    )  # fmt: skip
    endpoint.bind()
    endpoint.start()
    return endpoint
