"""Projections and validations for people (terminal, HTML) and programs (JSON)."""

from __future__ import annotations

from dataclasses import asdict

import msgspec
import plotly.graph_objects as go

from scalescope.predict.cores import CoreScaling
from scalescope.predict.project import ProjectedPoint, Projection
from scalescope.predict.stored import StoredProjection
from scalescope.predict.validate import Validation
from scalescope.report.document import Chart, Column, Document, Heading, Line, Table
from scalescope.report.media.charts import layout
from scalescope.report.views.project_section import TERM_COLORS, projection_chart

PROJECT_CHART_IDS = ("chart-project-throughput", "chart-project-terms")


def _batch(p: Projection) -> str:
    first = p.points[0]
    if p.mode == "strong":
        return f"global batch {first.global_batch:g}"
    return f"{first.per_rank_batch:g} samples per rank"


def _inputs_lines(p: Projection) -> list[str]:
    ref = p.reference
    lines = [
        f"run {p.run_dir}: {ref.world_size} ranks, {ref.per_rank_batch:g} samples per rank, "
        f"step {ref.step_ms:,.1f} ms (compute {ref.compute_ms:,.1f}, data {ref.data_ms:,.1f}, "
        f"exposed {ref.exposed_ms:,.1f}, waiting {ref.waiting_ms:,.1f}, other "
        f"{ref.other_ms:,.1f} ms), {ref.samples_per_s:,.1f} samples/s",
        f"gradients: {len(ref.buckets)} buckets, {sum(ref.buckets) / 1e6:,.2f} MB per step; "
        f"{p.algorithm} allreduce, hop α = {p.hop.alpha_s * 1e6:,.2f} µs, "
        f"β = {p.hop.beta_s_per_byte * 1e9:,.4f} ns/B from {p.hop.source}",
        f"hardware: {p.hardware}, {p.ranks_per_node} ranks per node; {p.mode} scaling, "
        f"{_batch(p)}; epoch = {p.epoch_samples:,} samples",
    ]
    if p.roofline is not None:
        r = p.roofline
        lines.append(
            f"roofline: {r.efficiency * 100:.1f}% of it reached here (peak "
            f"{r.here_peak_flops / 1e9:,.1f} GFLOP/s per rank); target rank "
            f"{r.share.peak_flops / 1e12:,.2f} TFLOP/s {r.share.precision}, "
            f"{r.share.memory_bw_bytes_per_s / 1e9:,.1f} GB/s: "
            f"{r.bound} bound"
        )
    return lines + [f"note: {n}" for n in p.notes]


def _banded(value: float, q: ProjectedPoint) -> str:
    """``value ± its band``: the step's relative band carried to a figure proportional (or
    inversely) to the step, to first order; --json has the exact range."""
    return f"{value:,.1f} ± {value * q.band_ms / q.terms.step_ms:,.1f}"


def projection_table(p: Projection) -> Table:
    cols = (
        Column("nodes"),
        Column("ranks"),
        Column("step", "ms"),
        Column("samples/s"),
        Column("epoch", "s"),
        Column("speedup"),
        Column("efficiency"),
        Column("compute", "ms"),
        Column("exposed", "ms"),
        Column("waiting", "ms"),
        Column("dominant", align="left"),
    )
    rows, values = [], []
    for q in p.points:
        t = q.terms
        rows.append(
            (
                str(q.nodes),
                str(q.ranks),
                f"{t.step_ms:,.1f} ± {q.band_ms:,.1f}",
                _banded(q.samples_per_s, q),
                _banded(q.epoch_s, q),
                f"{q.speedup:,.2f}×",
                f"{q.efficiency * 100:.0f}%",
                f"{t.compute_ms:,.1f}",
                f"{t.exposed_ms:,.1f}",
                f"{t.waiting_ms:,.1f}",
                q.dominant,
            )
        )
        values.append(
            (
                q.nodes,
                q.ranks,
                t.step_ms,
                q.samples_per_s,
                q.epoch_s,
                q.speedup,
                q.efficiency,
                t.compute_ms,
                t.exposed_ms,
                t.waiting_ms,
                q.dominant,
            )
        )
    title = "Projected step time, throughput and epoch time (± one standard deviation)"
    return Table(title, cols, tuple(rows), tuple(values), html_id="projection")


def projection_document(p: Projection) -> Document:
    """The projection once: the terminal prints its inputs and table, the page adds its charts."""
    return Document(
        f"scalescope projection {p.run_dir}",
        (
            Heading("scalescope projection", p.run_dir),
            *(Line(line) for line in _inputs_lines(p)),
            projection_table(p),
            throughput_chart(p),
            terms_chart(p),
        ),
    )


def _point_json(q: ProjectedPoint) -> dict:
    doc = asdict(q)
    doc["terms"] = q.terms.as_dict()
    doc["step_ms"] = q.terms.step_ms
    return doc


def projection_json(p: Projection) -> bytes:
    doc = {
        "schema": "scalescope.project/1",
        "run_dir": p.run_dir,
        "mode": p.mode,
        "hardware": p.hardware,
        "ranks_per_node": p.ranks_per_node,
        "algorithm": p.algorithm,
        "epoch_samples": p.epoch_samples,
        "hop": asdict(p.hop),
        "inputs": {k: v for k, v in asdict(p.reference).items() if k != "hardware"},
        "roofline": asdict(p.roofline) if p.roofline is not None else None,
        "points": [_point_json(q) for q in p.points],
        "notes": list(p.notes),
    }
    return msgspec.json.format(msgspec.json.encode(doc), indent=2)


def validation_document(v: Validation) -> Document:
    head = f"study {v.study_dir}: fitted on {list(v.fitted_ranks)} ranks; "
    head += f"transfers from {v.hop_source}"
    head += f"; {core_scaling_line(v.core_scaling)}"
    cols = (
        Column("ranks"),
        Column("reference"),
        Column("other threads"),
        Column("predicted step", "ms"),
        Column("±"),
        Column("measured step", "ms"),
        Column("predicted samples/s"),
        Column("measured samples/s"),
        Column("error"),
    )
    rows = tuple(
        (
            str(h.ranks),
            f"{h.reference_ranks} ranks",
            f"{h.other_threads:.1f}",
            f"{h.predicted_step_ms:,.1f}",
            f"{h.band_ms:,.1f}",
            f"{h.measured_step_ms:,.1f}",
            f"{h.predicted_samples_per_s:,.2f}",
            f"{h.measured_samples_per_s:,.2f}",
            f"{h.error_pct:+.1f}%",
        )
        for h in v.held_out
    )
    values = tuple(
        (
            h.ranks,
            h.reference_ranks,
            h.other_threads,
            h.predicted_step_ms,
            h.band_ms,
            h.measured_step_ms,
            h.predicted_samples_per_s,
            h.measured_samples_per_s,
            h.error_pct,
        )
        for h in v.held_out
    )
    table = Table("Held-out sizes: predicted vs measured", cols, rows, values)
    return Document(f"scalescope projection validation {v.study_dir}", (Line(head), table))


def core_scaling_line(c: CoreScaling) -> str:
    """The compute model's fit in words (predict/cores.py)."""
    if not c.fitted:
        return f"compute linear in a rank's cores ({c.note})"
    return (
        f"compute per sample {c.serial_ms:.3f} + {c.parallel_ms:.3f} / threads ms "
        f"({c.serial_fraction:.0%} serial at one thread; {c.note})"
    )


def validation_json(v: Validation) -> bytes:
    doc = {
        "schema": "scalescope.project-validation/1",
        "study_dir": v.study_dir,
        "fitted_ranks": list(v.fitted_ranks),
        "hop_source": v.hop_source,
        "core_scaling": asdict(v.core_scaling),
        "held_out": [
            asdict(h) | {"terms": h.terms.as_dict(), "error_pct": h.error_pct} for h in v.held_out
        ],
        "max_abs_error_pct": v.max_abs_error_pct,
    }
    return msgspec.json.format(msgspec.json.encode(doc), indent=2)


def throughput_chart(p: Projection) -> Chart:
    """The dashboard's projection chart, from the same JSON `project` stores in the run."""
    return projection_chart(
        msgspec.json.decode(projection_json(p), type=StoredProjection), PROJECT_CHART_IDS[0]
    )


def terms_chart(p: Projection) -> Chart:
    labels = [f"{q.nodes} node{'s' if q.nodes > 1 else ''}" for q in p.points]
    fig = go.Figure()
    for term, color in TERM_COLORS.items():
        values = [getattr(q.terms, f"{term}_ms") for q in p.points]
        fig.add_trace(go.Bar(x=labels, y=values, name=term, marker_color=color))
    layout(fig, barmode="stack", yaxis={"title": "ms per step"})
    return Chart(PROJECT_CHART_IDS[1], "Projected step time by term (ms)", fig)
