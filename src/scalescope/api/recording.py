"""``Recording``: a run loaded and analysed, as a notebook uses it (docs/api.md). Its tables are
Arrow (``steps()``, ``phases()``, ``collectives()``, ``waits()``, ``ranks()``), its findings
the diagnosis', and it writes what ``scalescope report`` writes; ``report`` and ``analyze`` are
thin calls of it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.api import tables
from scalescope.api.reporting import ReportFiles, print_run_report, run_report, write_outputs
from scalescope.diagnose import recording as diagnose_recording
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events import Run

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from scalescope.ingest import IngestResult

TABLES = ("steps", "phases", "collectives", "waits", "ranks")
"""The table names ``Recording.frame`` takes."""
ThresholdsLike = Thresholds | Mapping[str, float] | Iterable[str] | None
"""Diagnosis thresholds: a ``Thresholds``, ``{NAME: VALUE}``, or ``report --threshold``'s
``NAME=VALUE`` strings; None: the defaults."""


def as_thresholds(value: ThresholdsLike) -> Thresholds:
    """``value`` as Thresholds; ValueError with the one-line reason for a bad name or value."""
    from scalescope.diagnose.calibrate import parse_overrides

    if value is None:
        return DEFAULT_THRESHOLDS
    if isinstance(value, Thresholds):
        return value
    if isinstance(value, str):
        raise TypeError("thresholds: give NAME=VALUE strings as a list, or a mapping")
    items = [f"{k}={v}" for k, v in value.items()] if isinstance(value, Mapping) else list(value)
    return parse_overrides(items)


class Recording(diagnose_recording.Recording):
    """A loaded run (diagnose/recording.py: its analysis, diagnosis and verdict, each computed
    when first asked for), with its Arrow tables and the report's writers."""

    def __init__(
        self,
        run: Run,
        alerts: tuple[Alert, ...] = (),
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        ingest: IngestResult | None = None,
    ) -> None:
        super().__init__(run, alerts, thresholds)
        self.ingest = ingest
        """What ingesting another tool's trace found (``analyze_traces``); None for a run."""
        self._tables: dict[str, pa.Table] = {}

    @classmethod
    def of(
        cls, run: Run, thresholds: ThresholdsLike = None, ingest: IngestResult | None = None
    ) -> Recording:
        recording = super().of(run, as_thresholds(thresholds))
        recording.ingest = ingest
        return recording

    def steps(self) -> pa.Table:
        """One row per rank and recorded step: ``start_ns``, ``dur_ns``, each phase's
        ``*_ns``, ``other_ns``, ``samples``, ``measured``."""
        return self._table("steps", lambda: tables.steps_table(self.run, self.analysis))

    def phases(self) -> pa.Table:
        """Long form: ``rank``, ``step``, ``phase``, ``dur_ns`` (its rows summed), ``rows``."""
        return self._table("phases", lambda: tables.phases_table(self.run))

    def collectives(self) -> pa.Table:
        """One row per rank and collective call as recorded."""
        return self._table("collectives", lambda: tables.collectives_table(self.run))

    def waits(self) -> pa.Table:
        """One row per matched collective instance and rank: waiting versus transfer."""
        return self._table("waits", lambda: tables.waits_table(self.run, self.analysis))

    def ranks(self) -> pa.Table:
        """One row per rank of the world: how it ended and its per-step figures."""
        return self._table("ranks", lambda: tables.ranks_table(self.analysis, self.steps()))

    def frame(self, name: str) -> pd.DataFrame:
        """The table ``name`` (one of TABLES) as a pandas DataFrame (``scalescope[notebook]``)."""
        if name not in TABLES:
            raise ValueError(f"no table {name!r}: choose one of {', '.join(TABLES)}")
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError(
                "Recording.frame needs pandas: pip install 'scalescope[notebook]'"
            ) from None
        return getattr(self, name)().to_pandas()

    def _table(self, name: str, build: Callable[[], pa.Table]) -> pa.Table:
        if name not in self._tables:
            self._tables[name] = build()
        return self._tables[name]

    def print_report(self, console: Console | None = None) -> None:
        """Print what ``scalescope report`` prints (``analyze`` for an ingested trace)."""
        from scalescope.report.formatting import report_console

        print_run_report(run_report(self), console or report_console())

    def write_json(self, path: Path | str) -> Path:
        """The report JSON (docs/report-schema.md): analysis, diagnosis, and ``ingest``."""
        return self.write(ReportFiles(json=Path(path)))[0]

    def write_dashboard(self, path: Path | str, steps: int | None = None) -> Path:
        """The HTML dashboard; ``steps``: steps in its timeline (default: a few)."""
        return self.write(ReportFiles(html=Path(path), steps=steps))[0]

    def write_timeline(
        self, path: Path | str, steps: int | None = None, ranks: str | None = None
    ) -> Path:
        """A Chrome/Perfetto trace of ``steps`` steps after warm-up (default: a few) and the
        ranks ``ranks`` (``report --ranks``' syntax, ``"0-3,8"``; default: up to 16)."""
        return self.write(ReportFiles(timeline=Path(path), steps=steps, ranks=ranks))[0]

    def write(self, files: ReportFiles) -> list[Path]:
        """Every view ``files`` asks for, as ``report``'s options write them."""
        return write_outputs(run_report(self, files, printed=False), files)


def load(run_dir: Path | str, thresholds: ThresholdsLike = None) -> Recording:
    """Load and analyse a run directory; RunDirError (one line) when it is not a run."""
    return Recording.load(run_dir, as_thresholds(thresholds))


def analyze_traces(path: Path | str, thresholds: ThresholdsLike = None) -> Recording:
    """Ingest a torch.profiler (Kineto) trace file or per-rank directory, or a Horovod
    timeline, and analyse it as a run; IngestError (one line) when nothing can be read."""
    from scalescope.ingest import ingest

    return from_ingest(ingest(Path(path)), thresholds)


def from_ingest(result: IngestResult, thresholds: ThresholdsLike = None) -> Recording:
    return Recording.of(result.run, thresholds, ingest=result)
