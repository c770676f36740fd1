"""``scalescope tune`` for people and programs: a progress bar per trial and confirmation
run; the study as one document (the table of trials ranked by median samples/s, the verdict:
the best configuration as a command, or keep the one given; charts per trial and per knob)
for the terminal and the HTML page; and the JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import msgspec
import plotly.graph_objects as go
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from scalescope.report.document import Block, Chart, Column, Document, Line, Preformatted, Table
from scalescope.report.media.charts import layout, plotly_text
from scalescope.tune.result import ConfirmRun, TrialRecord, TuneResult
from scalescope.tune.space import Config, format_value

STOPPED = {
    "finished": "all trials ran",
    "budget": "the time budget ran out",
    "exhausted": "every configuration of the space was measured",
    "interrupted": "interrupted: the table holds the trials that finished",
}


def config_text(config: Config) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in config.items()) or "(as given)"


def last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def rate_text(rate: float | None, unit: str = "samples/s") -> str:
    return "-" if rate is None else f"{rate:,.1f} {unit}"


class TuneProgress:
    """The study's listener: one rich progress bar per trial (trial i/N, config, samples/s)."""

    def __init__(self, console: Console, trial_seconds: float) -> None:
        self.console = console
        self.trial_seconds = trial_seconds
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task: Any = None

    def __enter__(self) -> TuneProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def trial_starts(self, done: int, total: int, config: Config, baseline: bool) -> None:
        what = "baseline (as given)" if baseline else config_text(config)
        label = f"trial {done + 1}/{total} {escape(what)}"
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(label, total=self.trial_seconds, rate="")

    def progress(self, elapsed_s: float, samples_per_s: float | None) -> None:
        self.bar.update(self.task, completed=elapsed_s, rate=rate_text(samples_per_s))

    def trial_ends(self, record: TrialRecord) -> None:
        what = "baseline" if record.baseline else config_text(record.config)
        outcome = rate_text(record.samples_per_s, record.unit)
        if record.status == "pruned":
            outcome = f"pruned at {outcome}"
        elif record.status != "ok":
            outcome = f"{record.status}: {last_line(record.error)}"
        self.console.print(Text(f"trial {record.number}: {what} -> {outcome}"))

    def confirm_starts(self, done: int, total: int, round_: int, record: TrialRecord) -> None:
        what = "baseline" if record.baseline else f"trial {record.number}"
        label = f"confirm {done + 1}/{total} (round {round_}) {what}"
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(label, total=self.trial_seconds, rate="")

    def confirm_ends(self, run: ConfirmRun) -> None:
        outcome = rate_text(run.samples_per_s, run.unit)
        if run.status != "ok":
            outcome = f"{run.status}: {last_line(run.error)}"
        self.console.print(Text(f"confirm trial {run.trial} round {run.round} -> {outcome}"))


TABLE_COLUMNS = (
    Column("trial"),
    Column("configuration", align="left"),
    Column("runs"),
    Column("median", align="left"),
    Column("vs baseline"),
    Column("status", align="left"),
    Column("note", align="left"),
)
NO_GAIN = "no significant gain: keep the configuration as given"
NONE_CONFIRMED = "no configuration has every measurement: nothing is recommended"


def trial_note(result: TuneResult, r: TrialRecord) -> str:
    note = "; ".join(f"changes {s}" for s in result.semantics(r))
    if r.seeded_by:
        note = "; ".join(filter(None, [f"from diagnosis {r.seeded_by}", note]))
    if r.status == "failed" and r.error:
        note = last_line(r.error)
    return note


def trial_what(r: TrialRecord) -> str:
    what = "baseline (as given)" if r.baseline and not r.config else config_text(r.config)
    return f"{what} [baseline]" if r.baseline and r.config else what


def trials_table(result: TuneResult) -> Table:
    rows, values = [], []
    for r in result.ranked():
        speedup, median = result.speedup(r), result.median(r) or r.samples_per_s
        runs = len(result.measurements(r))
        rows.append(
            (
                str(r.number),
                trial_what(r),
                str(runs),
                rate_text(median, r.unit),
                "-" if speedup is None else f"{speedup:.2f}x",
                r.status,
                trial_note(result, r),
            )
        )
        values.append(
            (r.number, trial_what(r), runs, median, speedup, r.status, trial_note(result, r))
        )
    title = f"tune {result.target}: trials by median {result.unit}"
    return Table(title, TABLE_COLUMNS, tuple(rows), tuple(values), html_id="trials")


def verdict(result: TuneResult) -> list[Block]:
    """The study's end, the best, an unconfirmed leader, and what to do."""
    lines: list[Block] = [Line(f"study: {STOPPED.get(result.stopped, result.stopped)}")]
    lines += [Line(note, "note:", "yellow") for note in result.notes]
    best = result.best
    if best is None:
        return [*lines, Line("no trial was measured" if not result.by_median() else NONE_CONFIRMED)]
    lines.append(Line(best_text(result, best)))
    leader = result.unconfirmed_leader
    if leader is not None:
        lines.append(Line(unconfirmed_text(result, leader)))
    if result.recommended is None:
        return [*lines, Line(NO_GAIN)]
    flagged = result.semantics(best)
    if flagged:
        changes = f"the best configuration changes {', '.join(flagged)}"
        lines.append(Line(changes, "note:", "yellow"))
    if result.reuse:
        lines += [Line("reuse it with:"), Preformatted((result.reuse,))]
    return lines


def tune_document(result: TuneResult) -> Document:
    """The study once: the terminal prints the table and the verdict, the page adds charts."""
    return Document(
        f"scalescope tune {result.target}",
        (trials_table(result), *verdict(result), trials_chart(result), knobs_chart(result)),
    )


def unconfirmed_text(result: TuneResult, leader: TrialRecord) -> str:
    runs = len(result.measurements(leader))
    return (
        f"not recommended: trial {leader.number} has a higher median "
        f"({rate_text(result.median(leader), result.unit)}) but {runs} of "
        f"{result.required_runs} measurements (its confirmation did not finish)"
    )


def best_text(result: TuneResult, best: TrialRecord) -> str:
    """The best trial's median over its runs, against the baseline's median and spread."""
    runs = len(result.measurements(best))
    text = f"best: trial {best.number}, median {rate_text(result.median(best), best.unit)}"
    text += f" of {runs} run{'s' if runs != 1 else ''}"
    base, speedup = result.baseline, result.speedup(best)
    if base is not None and speedup is not None and base.number != best.number:
        n = len(result.measurements(base))
        spread = rate_text(result.baseline_spread(), base.unit)
        text += f" ({speedup:.2f}x the baseline's median; baseline spread {spread} over {n} runs)"
    return text


COLORS = {"ok": "#4878a8", "pruned": "#c9a227", "failed": "#b22222", "interrupted": "#888"}


def trials_chart(result: TuneResult) -> Chart:
    records = sorted(result.records, key=lambda r: r.number)
    measured = [r for r in records if r.samples_per_s is not None]
    if not measured:
        return Chart("chart-trials", "Samples/s per trial", None, "No trial was measured.")
    fig = go.Figure(
        go.Bar(
            x=[f"#{r.number}" for r in measured],
            y=[r.samples_per_s for r in measured],
            marker_color=[COLORS.get(r.status, "#888") for r in measured],
            hovertext=[plotly_text(config_text(r.config)) for r in measured],
            name="samples/s",
        )
    )
    base = result.baseline
    if base is not None and base.samples_per_s:
        fig.add_hline(y=base.samples_per_s, line_dash="dash", annotation_text="baseline")
    unit = measured[0].unit
    layout(fig, xaxis_title="trial", yaxis_title=unit, height=360)
    return Chart("chart-trials", f"{unit} per trial (pruned in yellow)", fig)


def knobs_chart(result: TuneResult) -> Chart:
    effects = result.effects
    if not effects:
        return Chart("chart-knobs", "Samples/s per knob value", None, "No trial was measured.")
    fig = go.Figure()
    for effect in effects:
        fig.add_trace(
            go.Bar(
                x=[plotly_text(f"{effect.name}={value}") for value, _, _ in effect.means],
                y=[mean for _, mean, _ in effect.means],
                hovertext=[f"{n} trials" for _, _, n in effect.means],
                name=plotly_text(f"{effect.name} (spread {effect.spread_pct:.0f}%)"),
            )
        )
    layout(fig, yaxis_title=f"mean {result.unit}", height=380)
    title = f"Mean {result.unit} per knob value (knobs by spread: the most important first)"
    return Chart("chart-knobs", title, fig)


def tune_json(result: TuneResult) -> bytes:
    """Every trial with its configuration, samples/s, runs, median, speedup and outcome, and
    the confirmation runs."""
    best, chosen = result.best, result.recommended
    doc = {
        "schema": "scalescope.tune/1",
        "target": result.target,
        "stopped": result.stopped,
        "unit": result.unit,
        "space": {k.name: list(k.values) for k in result.space},
        "notes": list(result.notes),
        "required_runs": result.required_runs,
        "best_trial": best.number if best else None,
        "recommended_trial": chosen.number if chosen else None,
        "recommended_runs": len(result.measurements(chosen)) if chosen else 0,
        "recommended_speedup": result.speedup(chosen) if chosen else None,
        "baseline_spread": result.baseline_spread(),
        "reuse": result.reuse,
        "trials": [trial_json(result, r) for r in result.ranked()],
        "confirmations": [asdict(c) for c in result.confirmations],
        "knob_effects": [
            {"knob": e.name, "spread_pct": e.spread_pct, "means": [list(m) for m in e.means]}
            for e in result.effects
        ],
    }
    return msgspec.json.format(msgspec.json.encode(doc), indent=2)


def trial_json(result: TuneResult, r: TrialRecord) -> dict[str, Any]:
    return asdict(r) | {
        "measurements": result.measurements(r),
        "median": result.median(r),
        "speedup": result.speedup(r),
        "changes": result.semantics(r),
    }
