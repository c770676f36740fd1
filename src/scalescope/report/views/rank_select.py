"""Which ranks a timeline shows: ``--ranks 0,worst:8,best:4,5-7`` (report/rank_spec.py),
``worst:K`` and ``best:K`` by busy time per step from the cross-rank analysis, else by mean
step time (``RunAnalysis.slowest_first``).

Without ``--ranks``, a run of up to ``RANK_ROWS_LIMIT`` ranks shows every rank and a larger one
``DEFAULT_SPEC`` (rank 0, the 8 slowest and the 4 fastest), so the trace stays small enough
for Perfetto to open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from scalescope.analyze import RunAnalysis
from scalescope.analyze.rank_spread import RankOrder
from scalescope.events import Run
from scalescope.report.media.timeline import chrome_trace
from scalescope.report.rank_spec import RankSpec, RankSpecError, parse_rank_spec
from scalescope.report.subjects import RunReport
from scalescope.report.views.collectives import full_windows
from scalescope.report.views.rank_summary import RANK_ROWS_LIMIT

DEFAULT_SPEC = "0,worst:8,best:4"
DASHBOARD_SPEC = "0,worst:4,best:3"
"""The dashboard's own timeline beyond RANK_ROWS_LIMIT ranks: 8 ranks at most."""


def _span(present: Sequence[int]) -> str:
    return f"{present[0]}-{present[-1]}" if present else "none"


def select_ranks(spec: RankSpec, present: Sequence[int], order: RankOrder | None) -> list[int]:
    """The ranks of ``spec`` among ``present`` (sorted), sorted; worst/best need ``order``."""
    if spec.every:
        return sorted(present)
    known = set(present)
    missing = [r for r in spec.ranks if r not in known]
    if missing:
        raise RankSpecError(
            f"--ranks {spec.text!r}: rank {missing[0]} is not in this run "
            f"(ranks {_span(sorted(present))})"
        )
    chosen = set(spec.ranks)
    if spec.worst or spec.best:
        if order is None:
            raise RankSpecError(
                f"--ranks {spec.text!r}: worst/best need step times, and this run has none"
            )
        ranked = [r for r in order.ranks if r in known]
        chosen.update(ranked[: spec.worst])
        chosen.update(ranked[len(ranked) - spec.best :] if spec.best else ())
    return sorted(chosen)


def run_ranks(run: Run) -> list[int]:
    """Every rank that recorded events or wrote a meta file."""
    return sorted(set(run.events.ranks()) | set(run.ranks))


def timeline_ranks(analysis: RunAnalysis, run: Run, text: str | None) -> list[int] | None:
    """The ranks of ``--ranks text``; without it, None (every rank) up to RANK_ROWS_LIMIT ranks
    and DEFAULT_SPEC beyond (rank 0 alone when the run has no step times)."""
    present = run_ranks(run)
    if text is None and len(present) <= RANK_ROWS_LIMIT:
        return None
    order = analysis.slowest_first
    if text is None and order is None:
        return present[:1]
    return select_ranks(parse_rank_spec(text or DEFAULT_SPEC), present, order)


def selection_metadata(
    analysis: RunAnalysis, run: Run, ranks: list[int] | None, text: str | None
) -> dict[str, Any]:
    """What the trace's metadata says about its ranks: which, of how many, chosen how."""
    present = run_ranks(run)
    order = analysis.slowest_first
    return {
        "shown": present if ranks is None else ranks,
        "of": len(present),
        "selection": text or ("all" if ranks is None else DEFAULT_SPEC),
        "order": None if order is None else order.metric,
    }


def selected_trace(report: RunReport) -> dict[str, Any]:
    """``chrome_trace`` of the ranks of ``report.ranks`` (default: ``timeline_ranks``), with
    the selection in its metadata (``ranks``)."""
    analysis, run, text = report.analysis, report.run, report.ranks
    ranks = timeline_ranks(analysis, run, text)
    windows = full_windows(analysis)
    trace = chrome_trace(run, dict(report.offsets_ns), report.steps, ranks, windows)
    trace["metadata"]["ranks"] = selection_metadata(analysis, run, ranks, text)
    return trace


def timeline_bytes(report: RunReport) -> bytes:
    """The selected trace as compact JSON (the ``--timeline`` file)."""
    return msgspec.json.encode(selected_trace(report))
