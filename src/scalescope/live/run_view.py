"""A run directory watched while it trains.

``LiveTop`` polls it: each ``frame`` reads what the ranks appended (``events.tail``), analyses
the last steps of every rank as a ``Recording`` of the window, and every ``finding_every_s``
gives its verdict (``verdict_words``); report/views/live.py draws it.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import msgspec
import psutil
from rich.console import RenderableType

from scalescope.analyze.layouts.coordinates import RankPlace, pipeline_stages, rank_places
from scalescope.analyze.live import FRAME_PARTS, live_snapshot
from scalescope.analyze.summary import RunAnalysis
from scalescope.analyze.watch.slowdown_alerts import latest_alert, read_alerts
from scalescope.diagnose.recording import Recording
from scalescope.events.files import ALERTS_FILE
from scalescope.events.live_state import LiveState, read_live_states
from scalescope.events.run import RankMeta, Run, RunMeta, rank_meta_path
from scalescope.events.tail import RunTail
from scalescope.events.watch_stops import read_stops, stop_line
from scalescope.launch.channel.reach import connect, split_address
from scalescope.launch.channel.seals import load_key
from scalescope.launch.channel.store import STORE_OPTION, Channel, fresher_states
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import LiveExtras, LiveFrame

STORE_RETRY_S = 30.0
"""After the store did not answer, how long top reads only the files before trying again."""
OUTPUT_LINES = 6
FINDING_EVERY_S = 10.0


def pid_alive(meta: RankMeta | None, host: str) -> bool | None:
    """Whether the rank's process still runs; None when it runs on another node."""
    if meta is None or not meta.pid or meta.hostname != host:
        return None
    try:
        return psutil.Process(meta.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def verdict_words(rec: Recording) -> str:
    """The window's verdict in short (``Verdict.short``), as the report would give it.

    Without the model's FLOPs: counting them builds the model (seconds of CPU taken from the
    ranks, and torch imported in the watcher), so the achieved-FLOP/s check is left to
    ``scalescope report`` (``Recording(window=True)``); every other rule judges the window."""
    verdict = rec.verdict
    return verdict.short if verdict.causes else verdict.line


def last_output(
    run_dir: Path,
    local_rank: int = 0,
    lines: int = OUTPUT_LINES,
    names: tuple[str, ...] = ("stdout.log", "stderr.log"),
) -> list[str]:
    """The last lines a local rank wrote to its redirected output (``--live``, the output
    options); none when its output was not redirected."""
    found: list[str] = []
    for name in names:
        for path in sorted(Path(run_dir).glob(f"logs/*/attempt_*/{local_rank}/{name}")):
            with open(path, "rb") as f:
                f.seek(max(os.path.getsize(path) - 4096, 0))
                found += f.read().decode("utf-8", "replace").splitlines()[-lines:]
    return found[-lines:]


def with_last_words(run_dir: Path, meta: RankMeta | None, alive: bool | None) -> RankMeta | None:
    """A rank gone without writing its error (killed): its last stderr line as the error."""
    if meta is None or meta.error or alive is not False:
        return meta
    words = [line for line in last_output(run_dir, meta.local_rank, 3, ("stderr.log",)) if line]
    return msgspec.structs.replace(meta, error=words[-1]) if words else meta


class RankMetas:
    """The ranks' status files, each read again only when its inode, size or mtime changed (a
    rank writes it at its start and its end: at 1,024 ranks, 1,024 stats a frame instead of
    1,024 reads and decodes)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.paths: list[str] = []
        self.seen: dict[int, tuple[tuple[int, int, int], RankMeta | None]] = {}
        self.reads = 0
        """Files read and decoded so far (what the cache saved is the rest)."""

    def get(self, rank: int) -> RankMeta | None:
        while len(self.paths) <= rank:
            self.paths.append(os.fspath(rank_meta_path(self.run_dir, len(self.paths))))
        try:
            stat = os.stat(self.paths[rank])
        except OSError:
            self.seen.pop(rank, None)
            return None
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)  # replaced, grown or rewritten
        known = self.seen.get(rank)
        if known is not None and known[0] == key:
            return known[1]
        self.reads += 1
        try:
            with open(self.paths[rank], "rb") as f:
                meta = msgspec.json.decode(f.read(), type=RankMeta)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            meta = None  # as read_rank_meta: being replaced, or not one
        self.seen[rank] = (key, meta)
        return meta


ANALYSIS_SHARE = 0.3
"""The window is analysed again at most this share of the time: after an analysis that took
t seconds, not before t / ANALYSIS_SHARE (a small run's few ms: every frame; 1,024 ranks'
half second: every second or third frame, the totals still counted every frame)."""


class AlertsFile:
    """The slowdown watch's ``alerts.jsonl``, read again only when it grew."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ALERTS_FILE
        self._size = -1
        self._latest: str | None = None

    def latest(self) -> str | None:
        try:
            size = self.path.stat().st_size
        except OSError:
            return None
        if size != self._size:
            self._size = size
            alert = latest_alert(read_alerts(self.path.parent))
            self._latest = alert.message if alert is not None else None
        return self._latest


class LiveTop:
    """One run directory watched: each ``frame`` is the view of what was read so far."""

    def __init__(
        self, run_dir: Path, finding_every_s: float = 10.0, show_output: bool = False
    ) -> None:
        self.run_dir = Path(run_dir)
        self.tail = RunTail(self.run_dir)
        self.finding_every_s = finding_every_s
        self.show_output = show_output
        self.finding: str | None = None
        self.finding_at = 0.0
        self.finding_stale = False
        """The window changed since the finding was made."""
        self.host = socket.gethostname()
        self.ended = False
        self.note = ""
        self.run: Run | None = None
        self.rec: Recording | None = None
        """The window as a recording: analysed and diagnosed once each."""
        self.analysis_s = 0.0
        """What the last analysis of the window took (seconds of wall time)."""
        self.analysed_at = 0.0
        self.window_stale = False
        """Rows were read since the window was last analysed."""
        self.analyses = 0
        self.metas = RankMetas(self.run_dir)
        self.alerts = AlertsFile(self.run_dir)
        self.places: dict[int, RankPlace] = {}
        """Each rank's stage and mesh coordinates, worked out again only when an analysis
        finds other groups or stages than the last (in a run, once or twice)."""
        self._places_of: tuple = ((), {})
        self._channel: Channel | None = None
        self._store_retry_at = 0.0

    def frame(self) -> RenderableType:
        now = time.time()
        new_rows = self.tail.poll()
        meta = self.tail.meta
        assert meta is not None
        metas = {r: self.metas.get(r) or meta.ranks.get(str(r))
                 for r in range(meta.world_size)}  # fmt: skip
        running = meta.status == "running"
        ended_now = running == self.ended
        if new_rows > 0 or ended_now or self.analysis is None:
            self.window_stale = True
        wait_s = self.analysis_s / ANALYSIS_SHARE
        analyse_due = not running or ended_now or now - self.analysed_at >= wait_s
        if self.window_stale and analyse_due:
            self.analyse(meta, metas, now)
        alive = {r: pid_alive(m, self.host) for r, m in metas.items()} if running else {}
        metas = {r: with_last_words(self.run_dir, m, alive.get(r)) for r, m in metas.items()}
        silent = {r: self.tail.silent_for(r, now) for r in metas} if running else {}
        live = self.live_states(meta, now) if running else {}
        snap = live_snapshot(meta, self.analysis, self.tail.totals, metas, alive, silent, now,
                             live, self.places)  # fmt: skip
        due = now - self.finding_at >= self.finding_every_s or not running
        if self.finding_stale and due:
            self.update_finding(now)
        self.ended = not running
        output = last_output(self.run_dir) if self.show_output else ()
        stopped = [stop_line(w, e) for w, e in read_stops(self.run_dir).items()]
        extras = LiveExtras(finding=self.finding, output=output, note=self.note,
                            alert=self.alerts.latest(), stopped=stopped)  # fmt: skip
        return document_renderable(document(LiveFrame(snapshot=snap, extras=extras)))

    def analyse(self, meta: RunMeta, metas: dict[int, RankMeta | None], now: float) -> None:
        """The analysis of the window as read so far (timed, for ANALYSIS_SHARE)."""
        started = time.perf_counter()
        window = self.tail.window()
        self.run = Run(self.run_dir, meta, window, {r: m for r, m in metas.items() if m})
        self.rec = Recording(self.run, window=True) if len(window) else None
        if self.rec is not None:  # the parts the frame reads, inside the time ANALYSIS_SHARE bounds
            self.rec.analysis.compute(*FRAME_PARTS)
        self.update_places(metas)
        self.analysis_s, self.analysed_at = time.perf_counter() - started, now
        self.window_stale, self.finding_stale = False, True
        self.analyses += 1

    @property
    def analysis(self) -> RunAnalysis | None:
        """The window's analysis, its parts computed on first use."""
        return self.rec.analysis if self.rec is not None else None

    def update_places(self, metas: dict[int, RankMeta | None]) -> None:
        """The ranks' stages and coordinates from the analysis' groups and pipeline: the
        groups come from the window's collectives while the ranks run (their meta files name
        them only at their end), so they are compared with the last ones, not read once."""
        a = self.analysis
        if a is None:
            return
        found = (a.groups, pipeline_stages(a.pipeline, metas))
        if found != self._places_of:
            self._places_of, self.places = found, rank_places(*found)

    def live_states(self, meta: RunMeta, now: float) -> dict[int, LiveState]:
        """The state files here, and, for a run over several nodes or another launcher's
        world, the job's store named in run.json (fresher of the two per rank): the files
        of another node's ranks are not current here, if they are here at all."""
        files = read_live_states(self.run_dir, meta.world_size)
        address = (meta.options or {}).get(STORE_OPTION)
        if not address or now < self._store_retry_at:
            return files
        try:
            if self._channel is None:
                key = load_key(create=False)  # without it, nothing there can be checked
                store = connect(*split_address(address), timeout_s=2.0)
                self._channel = Channel(store, key=key, warn=None)
            stored = self._channel.states(list(range(meta.world_size)))
        except Exception:  # the store is gone (the run ended) or not reachable from here
            self._channel, self._store_retry_at = None, now + STORE_RETRY_S
            return files
        return fresher_states(stored, files)

    def update_finding(self, now: float) -> None:
        """The diagnosis of the window; at most every ``finding_every_s`` while running."""
        self.finding_at, self.finding_stale = now, False
        if self.rec is None:
            return
        try:
            self.finding, self.note = verdict_words(self.rec), ""
        except Exception as exc:  # a partial window the rules cannot judge yet
            self.note = f"diagnosis not available yet: {exc}"
