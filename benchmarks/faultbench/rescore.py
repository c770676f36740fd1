"""Scores again with this code, the gains measured when the runs were recorded kept: the
recorded subset (``run.py --rescore``, tests/data/faultbench) and a whole run's kept folders
(``run.py --rescore-kept``, docs/accuracy.md)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from cases import Case, Truth, matrix
from predicted import predicted_ms
from report import write_doc
from run import kept_pairs, score_folders
from score import Measured, Predicted, ToolCell, score, skip, thirds_recorded, totals

from scalescope.diagnose.recording import Recording

MEASURED_FIELDS = ("measured_ms", "spread_ms", "gain_ok", "alert_s", "alert_ok", "noisy")
"""What a rescore keeps: the gains measured when the runs were recorded, and the live alert."""


def rescore(recorded: Path) -> int:
    """The recorded subset's verdicts scored again (a change meant to move them); the gains
    measured when they were recorded are kept, and the predicted gain's interval, from the
    recorded run, is judged against them."""
    fixes = {c.name: c.fix for c in matrix(49) if c.fix}  # a cause that is not the culprit
    for path in sorted(recorded.glob("*/truth.json")):
        doc = json.loads(path.read_text())
        case = Case(doc["case"], "recorded", path.parent, (), (), Truth(**doc["truth"]))
        rec = Recording.load(path.parent / "run")
        cause = fixes.get(case.name, case.fixed)  # a straggler's: its recorded culprit
        doc["score"] = rescored(case, rec, doc["score"], cause, thirds_recorded(doc))
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{doc['case']}: {doc['score']['named']}, "
              f"{'pass' if doc['score']['passed'] else 'fail'}", file=sys.stderr)  # fmt: skip
    return 0


def rescored(
    case: Case, rec: Recording, was: dict[str, Any], cause: str | None,
    thirds: Mapping[str, list[Measured]] | None = None,
) -> dict:  # fmt: skip
    """A recorded case's score by this code: its verdict, the recorded predicted gain with
    the interval the what-if gives it now, the recorded measurements kept (``thirds``: a
    no-fault case's runs without one of its own costs, by class, as recorded)."""
    again = predicted_ms(rec, cause)
    low, high = (again.low_ms, again.high_ms) if again is not None else (None, None)
    predicted = None if was["predicted_ms"] is None else Predicted(was["predicted_ms"], low, high)
    now = asdict(score(case, rec.verdict, predicted, [], None, thirds))
    kept = {k: was[k] for k in MEASURED_FIELDS if k in was}
    measured = was.get("measured_ms")
    if now["gain_low_ms"] is not None and measured is not None:
        now["interval_ok"] = now["gain_low_ms"] <= measured <= now["gain_high_ms"]
    return now | kept


def rescore_kept(
    keep: Path,
    out: Path,
    note: str,
    drawn: dict[str, Case] | None = None,
    cell: Callable[[Case], ToolCell] | None = None,
    chosen: set[str] | None = None,
) -> int:
    """The doc's matrix scored again from its kept folders with this code (a change meant to
    move them; TraceML's cells kept; a case added since, from the pairs run into KEEP for
    it), the doc before beside it. ``drawn``: the cases by name (default: the doc's seed's
    matrix); ``cell``: TraceML's cell of a case run now, for the ``chosen`` cases (default:
    those that have none or were not run)."""
    previous = json.loads(out.with_suffix(".json").read_text())
    if previous["held_out"]:
        sys.exit("the held-out matrix is scored once: run --held-out again instead")
    if drawn is None:
        drawn = {c.name: c for c in matrix(previous["seed"], previous["steps"])}
    cells = {c["case"]: c.get("traceml") for c in previous["cases"]}
    scores = []
    for case in map(partial(as_kept, keep), drawn.values()):
        pairs = kept_pairs(case, keep, tidy=False)
        if pairs == 0:
            scores.append(skip(case, f"no kept run in {keep}"))
            continue
        kept = ToolCell(**cells[case.name]) if cells.get(case.name) else None
        if cell is not None and (case.name in chosen if chosen else _missing(kept)):
            print(f"TraceML: {case.name}", file=sys.stderr, flush=True)
            kept = cell(case)
        scores.append(replace(score_folders(case, keep, pairs), traceml=kept))
    total = totals(scores)
    doc = {**previous, "date": date.today().isoformat(), "note": note or previous.get("note"),
           "cases": [asdict(s) for s in scores], "totals": asdict(total)}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(out, [drawn[s.case] for s in scores], scores, total, doc, previous)
    print(f"rescored {out} from {keep}", file=sys.stderr)
    return 0


def as_kept(keep: Path, case: Case) -> Case:
    """The case as its kept runs were made: without the ``--preload`` arm where they were
    kept before it existed (session 13), scored as they were then."""
    if case.alone_input and not (keep / f"{case.name}-0-alone-input").is_dir():
        return replace(case, alone_input=())
    return case


def _missing(cell: ToolCell | None) -> bool:
    return cell is None or cell.named == "not run"
