"""``Recording``: the one entry point to a run's analysis (HTA's ``TraceAnalysis``). It loads
what the run directory holds (the events, the slowdown alerts), builds the analysis on first
use, each part of it once (analyze/summary.py), then the diagnosis and the one verdict that
every surface renders. tune, predict, calibrate, live, scale and suite use it; api/recording.py
adds the tables and writers of the public API."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from scalescope.analyze.model.whatif import WhatIf, every_cause_replayed, what_if
from scalescope.analyze.summary import RunAnalysis
from scalescope.analyze.verdict import Verdict
from scalescope.analyze.watch.slowdown_alerts import Alert, read_alerts
from scalescope.diagnose.engine import diagnose, diagnose_run
from scalescope.diagnose.findings import Diagnosis, Finding
from scalescope.diagnose.rules_input import DiagnosisInput
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events import Run, load_run


class Recording:
    """A loaded run: its analysis, diagnosis and verdict, each computed when first asked for
    and kept."""

    def __init__(
        self,
        run: Run,
        alerts: tuple[Alert, ...] = (),
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        window: bool = False,
    ) -> None:
        self.run = run
        self.window = window
        """A live window of a run in progress: judged without the bench's files and the
        model's FLOPs (counting them builds the model: torch in the watcher)."""
        self.alerts = alerts
        """The slowdown alerts the launcher's watch wrote (``alerts.jsonl``), read by
        ``load``."""
        self.thresholds = thresholds

    @classmethod
    def load(cls, run_dir: Path | str, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Recording:
        """The run directory ``run_dir``; RunDirError (one line) when it is not a run."""
        return cls.of(load_run(Path(run_dir)), thresholds)

    @classmethod
    def of(cls, run: Run, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Recording:
        """A run already loaded (an ingested trace, a live window): its alerts read beside it."""
        return cls(run, tuple(read_alerts(run.path)), thresholds)

    @property
    def path(self) -> Path:
        return self.run.path

    @cached_property
    def analysis(self) -> RunAnalysis:
        """The run's analysis; each of its parts is computed on first use."""
        return RunAnalysis(self.run, self.alerts)

    @cached_property
    def diagnosis(self) -> Diagnosis:
        if self.window:
            ctx = DiagnosisInput(
                analysis=self.analysis, meta=self.run.meta, ranks=dict(self.run.ranks),
                bench=None, thresholds=self.thresholds,
            )  # fmt: skip
            return diagnose(ctx)
        return diagnose_run(self.run, self.analysis, self.thresholds)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Warnings first, then information; each group by estimated saving, largest first."""
        return self.diagnosis.findings

    @property
    def verdict(self) -> Verdict:
        """The run's one verdict: the top cause, its culprit and cost."""
        return self.diagnosis.verdict

    def what_if(self, causes: Iterable[str] | None = None) -> WhatIf | None:
        """The measured steps replayed as measured and with each cause fixed (``rank:N``,
        ``node:HOST``, ``phase:NAME``, ``compute:X``, ``comm:X``, ``comm:hidden``; ``A+B``
        together; default: the engine's candidates), as ``scalescope whatif`` prints it; None
        when no step can be replayed; ValueError (one line) for a bad cause named here (of
        the engine's own, one the model refuses is a line of ``WhatIf.refused``)."""
        a = self.analysis
        if causes is None:
            return what_if(self.run, a.warmup_steps, clocks=a.clocks)
        named = what_if(self.run, a.warmup_steps, list(causes), clocks=a.clocks)
        return every_cause_replayed(named)
