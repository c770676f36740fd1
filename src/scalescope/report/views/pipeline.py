"""The run report's pipeline section: each stage's compute per microbatch, its bubble
against the schedule's theory, the bound stage and the proposed block move
(analyze/layouts/pipeline.py); only in a run with pipeline stages."""

from __future__ import annotations

from scalescope.analyze import RunAnalysis
from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.report.document import Column, Line, Section, Table
from scalescope.report.views.rank_summary import limited_table

COLUMNS = (
    Column("rank", align="left"),
    Column("stage", align="left"),
    Column("forward", "ms/microbatch"),
    Column("backward", "ms/microbatch"),
    Column("transfer", "ms/step"),
    Column("bubble", "% of step"),
    Column("peak memory", "MB"),
)
MEANING = (
    "bubble: the step's time in which the stage neither computes (forward, backward, "
    "optimizer) nor moves data; waiting for the peer is bubble; measured steps"
)


def pipeline_section(a: RunAnalysis) -> Section | None:
    p = a.pipeline
    if p is None:
        return None
    head = (
        f"{p.shape}, {p.schedule}, {p.microbatches} microbatches; the schedule's "
        f"bubble in theory {p.theory_bubble_pct:.1f}% of the step; stage {p.bound_stage} "
        f"bounds the pipeline (step {p.step_ms:,.1f} ms)"
    )
    lines = [Line(head)]
    if p.move is not None:
        m = p.move
        lines.append(
            Line(f"move {m.blocks} block(s) ({', '.join(m.names)}) from stage {m.source} to "
                 f"stage {m.target}: predicted step {m.predicted_step_ms:,.1f} ms, the schedule "
                 f"replayed (now {m.replayed_step_ms:,.1f} ms: {m.replay_error_pct:+.0f}% off "
                 "the measured step)")
        )  # fmt: skip
    return Section("Pipeline stages", (*lines, _table(p)))


def _table(p: PipelineAnalysis) -> Table:
    values = tuple(
        (f.rank, ", ".join(map(str, f.held or (f.stage,))), f.forward_ms_per_microbatch,
         f.backward_ms_per_microbatch, f.transfer_ms, f.bubble_pct,
         f.peak_memory_bytes / 1e6 if f.peak_memory_bytes is not None else None)
        for f in p.ranks
    )  # fmt: skip
    rows = tuple(
        (str(v[0]), str(v[1]), f"{v[2]:,.2f}", f"{v[3]:,.2f}", f"{v[4]:,.2f}", f"{v[5]:,.1f}",
         "-" if v[6] is None else f"{v[6]:,.1f}")
        for v in values
    )  # fmt: skip
    return limited_table("Pipeline stages", COLUMNS, rows, values, MEANING)
