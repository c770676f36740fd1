"""Beside the hang watch: each read of the ranks' live states goes to the slowdown detector
(analyze/watch/slowdown.py), and each alert it raises goes out at once:

- a line in the launcher's log (its stderr): ``scalescope: slowdown: rank 3 on node c3: ...``;
- a line of ``RUN_DIR/alerts.jsonl`` (``report`` and ``top`` read it);
- ``--on-slowdown CMD``: run by the shell, not waited for, with the alert as JSON in
  ``SCALESCOPE_ALERT`` and the run directory in ``SCALESCOPE_RUN_DIR`` (a scheduler's drain
  script).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector
from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.events.files import ALERTS_FILE
from scalescope.events.live_state import LiveState
from scalescope.events.ring_rows import write_windows
from scalescope.events.units import first_few

Flush = Callable[[dict[int, LiveState], float], set[int]]
"""A watch source's ``flush``: the ranks asked, how long to wait; those that did not answer."""
HOSTS_EVERY_S = 10.0
"""How often the ranks whose node is not known yet are asked again (a rank names its host
in its meta file once it has started)."""


class SlowdownWatch:
    def __init__(
        self,
        run_dir: Path,
        host: Callable[[int], str],
        threshold_pct: float = 10.0,
        on_slowdown: str | None = None,
        flush: Flush | None = None,
    ) -> None:
        self.run_dir, self.host, self.command = Path(run_dir), host, on_slowdown
        self.flush = flush
        self._states: Mapping[int, LiveState] = {}
        self.detector = SlowdownDetector(DetectorConfig(min_change=threshold_pct / 100))
        self.alerts: list[Alert] = []
        self._children: list[subprocess.Popen] = []
        self._hosts_at = -HOSTS_EVERY_S

    def observe(self, at_s: float, states: Mapping[int, LiveState]) -> list[Alert]:
        hosts = self.detector.hosts
        unknown = [r for r in states if not hosts.get(r)]
        if unknown and at_s - self._hosts_at >= HOSTS_EVERY_S:
            self._hosts_at = at_s
            hosts.update((rank, self.host(rank)) for rank in unknown)
        self._states = states
        alerts = self.detector.observe(at_s, states)
        for alert in alerts:
            self.raise_alert(alert)
        return alerts

    def raise_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)
        line = json.dumps(asdict(alert))
        with open(self.run_dir / ALERTS_FILE, "a") as f:
            f.write(line + "\n")
        print(f"scalescope: {alert.message}", file=sys.stderr, flush=True)
        if alert.event == "onset":
            self.keep_window(alert)
        if self.command:
            self._run_hook(line)

    def keep_window(self, alert: Alert) -> None:
        """Each ring's rows of the onset and of as many steps before it (at least the
        detector's baseline) into ``events/window-<onset step>-rank-N.arrows``."""
        span = max(self.detector.config.baseline_steps, alert.detected_step - alert.since_step)
        first = max(0, alert.since_step - span)
        try:
            kept = write_windows(self.run_dir, first, alert.detected_step, alert.since_step)
        except OSError as exc:  # a full disk: the alert stands without its rows
            print(f"scalescope: slowdown {alert.id}: window not kept: {exc}", file=sys.stderr)
            return
        self._flush_elsewhere(alert, set(kept.rows))
        for note in kept.notes:
            print(f"scalescope: slowdown {alert.id}: flight recorder not read ({note})",
                  file=sys.stderr)  # fmt: skip
        if kept.rows:
            print(
                f"scalescope: slowdown {alert.id}: steps {first}-{alert.detected_step} of "
                f"{len(kept.rows)} ranks kept from their flight recorders "
                f"({sum(kept.rows.values()):,} rows) in events/window-{alert.since_step:06d}-*",
                file=sys.stderr, flush=True,
            )  # fmt: skip

    def _flush_elsewhere(self, alert: Alert, kept: set[int]) -> None:
        """The alert's ranks whose rings are on other nodes asked to keep theirs themselves
        (a flush: probe/ring_flush.py writes ``events/window-*`` where the rank runs); not for
        an alert on every rank (every ring in the job). Asked, not waited for: the watch's
        next poll is due."""
        others = {r: self._states[r] for r in alert.ranks if r not in kept and r in self._states}
        if self.flush is None or not others or alert.subject == "world":
            return
        self.flush(others, 0.0)
        print(f"scalescope: slowdown {alert.id}: ranks {first_few(sorted(others))} on other nodes "
              "asked to keep their flight recorders' steps (events/window-* where they run)",
              file=sys.stderr, flush=True)  # fmt: skip

    def _run_hook(self, line: str) -> None:
        env = {**os.environ, "SCALESCOPE_ALERT": line, "SCALESCOPE_RUN_DIR": str(self.run_dir)}
        try:
            child = subprocess.Popen(self.command, shell=True, env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            print(f"scalescope: --on-slowdown could not start: {exc}", file=sys.stderr)
            return
        self._children.append(child)
        threading.Thread(target=child.wait, daemon=True, name="scalescope-on-slowdown").start()
