"""The one verdict of a run: its top cause (two when their costs cannot be told apart), the
culprit, the cost and how it was had. diagnose/verdict.py makes it from the findings and the
what-if; every surface (terminal, dashboard, JSON, ``top``) renders this object and computes
no headline of its own. It lives here, below launch, so that the live side can take it."""

from __future__ import annotations

from dataclasses import dataclass

STATES = ("bottleneck", "no bottleneck", "failed", "hung", "probe off", "no steps")
"""What a verdict can be about: a cause named, none beyond the noise, a run that failed or
hung (its cause first), a run recorded without the probe, a run with no step to judge."""


@dataclass(frozen=True)
class Culprit:
    """Who or what the cause is in: ``rank``, ``node``, ``link``, ``stage``, ``dim`` or
    ``schedule`` (a pipeline's bubble that no stage bounds: its microbatches)."""

    kind: str
    name: str
    """``2``, ``node-a``, ``node-a,node-b``, ``2``, ``tp``, ``ScheduleGPipe``."""
    ranks: tuple[int, ...] = ()

    @property
    def words(self) -> str:
        if self.kind == "stage":
            held = ", ".join(map(str, self.ranks))
            return f"stage {self.name} (rank {held})" if self.ranks else f"stage {self.name}"
        if self.kind == "schedule":
            return f"the {self.name} schedule"
        return f"dim {self.name}" if self.kind == "dim" else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Cost:
    """What fixing a cause buys per step, with the range it is known to."""

    ms_per_step: float
    low_ms: float
    high_ms: float
    replayed: bool
    """True: the what-if's replay of the steps without the cause; False: the finding's own
    estimate (or measurement of a part), marked as one."""
    share_pct: float | None = None
    """Of the step time, as the finding puts it."""
    since_step: int | None = None
    """The step its cause began at, where it began mid-run: the cost is per step since."""

    @property
    def words(self) -> str:
        how = "replayed" if self.replayed else "estimate"
        since = f" since step {self.since_step}" if self.since_step is not None else ""
        return f"~{self.ms_per_step:.0f} ms/step to gain{since}, {how}"


@dataclass(frozen=True)
class Cause:
    code: str
    """The finding's code (``STRAGGLER``, ``OVERSUBSCRIBED``, ...)."""
    bottleneck: str
    summary: str
    culprit: Culprit | None
    cost: Cost | None
    """None when the finding puts no figure on its fix (memory size, a build)."""

    @property
    def short(self) -> str:
        """Its bottleneck, culprit and cost, without the sentence."""
        who = f" [{self.culprit.words}]" if self.culprit is not None else ""
        return f"{self.bottleneck}{who}{self._cost}"

    @property
    def words(self) -> str:
        """Its bottleneck, the culprit where the sentence does not name it, the sentence and
        the cost."""
        named = self.culprit is None or self.culprit.words in self.summary
        who = "" if named else f" [{self.culprit.words}]"  # type: ignore[union-attr]
        return f"{self.bottleneck}{who}: {self.summary}{self._cost}"

    @property
    def _cost(self) -> str:
        return f" ({self.cost.words})" if self.cost is not None else ""


@dataclass(frozen=True)
class Verdict:
    state: str
    """One of ``STATES``."""
    causes: tuple[Cause, ...] = ()
    """The top cause; two, ordered by their costs' lower bounds, when the top two costs'
    ranges overlap."""
    note: str = ""
    """What the state adds: the failed rank, the hang, why nothing is judged."""
    source: str = "scalescope"
    """Who recorded the run: ``scalescope``, or the tool whose trace was ingested."""
    noise_ms: float | None = None
    """The replayed step's own spread (ms): a cost within it is no cause."""

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {self.state!r}")

    @property
    def top(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    @property
    def culprit(self) -> Culprit | None:
        return self.top.culprit if self.top is not None else None

    @property
    def short(self) -> str:
        """The causes without their sentences: ``top``'s line."""
        return "; beside it, ".join(c.short for c in self.causes) or self.line

    @property
    def line(self) -> str:
        """The verdict in one line, as every surface prints it (``NO_CLEAR_BOTTLENECK``'s words
        for a run with no cause beyond the noise)."""
        named = "; beside it, ".join(c.words for c in self.causes)
        if self.state in ("bottleneck", "hung"):
            return named
        lead = {"no bottleneck": "no clear bottleneck"}.get(self.state, self.state)
        parts = [p for p in (self.note, named) if p]
        return f"{lead}: {'; '.join(parts)}" if parts else lead
