"""Diagnose a run: gather its inputs, run the rules, rank the findings.

``diagnose_run(run, analysis)`` is the entry point of ``report``, ``run``, ``bench`` and
``analyze``; ``diagnose(ctx)`` is the pure part (tests build ``DiagnosisInput`` by hand).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from scalescope.analyze.model.whatif import Fix
from scalescope.analyze.summary import RunAnalysis
from scalescope.bench.flops import count_model_flops
from scalescope.diagnose.consistency import unexplained
from scalescope.diagnose.dimensions import with_dims
from scalescope.diagnose.findings import LEVELS, Diagnosis, Evidence, Finding
from scalescope.diagnose.replayed import ASSUMED, COMM_CODES, SCOPED_CAUSES, replayed_cause
from scalescope.diagnose.rules import RULES, Rule, evaluate_rules
from scalescope.diagnose.rules_input import DataFiles, DiagnosisInput
from scalescope.diagnose.rules_links import explained_by_links
from scalescope.diagnose.rules_placement import TIME_SLICED_PCT, TimeSlicing, time_slicing
from scalescope.diagnose.rules_ranks import straggler_does_own_work
from scalescope.diagnose.rules_stages import REPLICA_CODES, different_stages
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.diagnose.verdict import verdict_of
from scalescope.events import Run
from scalescope.events.files import BENCH_FILE

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
MAX_FILES_SCANNED = 100_000
"""Files of an image folder looked at for their count and mean size (a sample beyond)."""
COMPUTE_CAUSES = (
    "OVERSUBSCRIBED",
    "IDLE_CORES",
    "UNBOUND",
    "NUMA_SPAN",
    "BUILD_NO_ONEDNN",
    "BUILD_ISA_UNDERUSED",
    "BUILD_SLOW_BLAS",
    "BUILD_OPENMP_RUNTIMES",
)
"""Findings that explain low compute FLOP/s: when one fires, the compute finding's shortfall
is theirs, not a separate saving."""
FIRST_CODES = ("TIMELINE_INCONSISTENT", "HANG", "INDEPENDENT_REPLICAS")
"""Findings about the job itself: whatever else was measured comes after them."""
SHARED_CORES = ("OVERSUBSCRIBED", "UNBOUND")
"""Findings of ranks sharing cores: which of them is late is then a consequence."""


def _bench(run: Run) -> dict[str, Any] | None:
    path = Path(run.path) / BENCH_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _data_files(options: dict[str, Any]) -> DataFiles | None:
    root = Path(str(options.get("data") or ""))
    if not options.get("data") or not root.is_dir():
        return None
    sizes = []
    for path in root.rglob("*"):
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            sizes.append(path.stat().st_size)
            if len(sizes) >= MAX_FILES_SCANNED:
                break
    if not sizes:
        return None
    return DataFiles(
        path=str(root),
        files=len(sizes),
        mean_bytes=sum(sizes) / len(sizes),
        complete=len(sizes) < MAX_FILES_SCANNED,
    )


def diagnosis_input(
    run: Run, analysis: RunAnalysis, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> DiagnosisInput:
    """Everything the rules read, from a loaded run and its analysis."""
    meta = run.meta
    bench_run = meta.workload != "script"
    return DiagnosisInput(
        analysis=analysis,
        meta=meta,
        ranks=dict(run.ranks),
        bench=_bench(run) if bench_run else None,
        model_flops=count_model_flops(meta.workload, meta.options) if bench_run else None,
        data_files=_data_files(meta.options) if bench_run else None,
        thresholds=thresholds,
    )


def _explained(finding: Finding, causes: list[str]) -> Finding:
    return replace(
        finding, level="info", saved_ms_per_step=None, basis=f"explained by {', '.join(causes)}"
    )


def _time_sliced(finding: Finding, ts: TimeSlicing) -> Finding:
    """Exposed communication that is mostly ranks waiting for descheduled peers."""
    pct = ts.comm_explained_pct or 0.0
    basis = (
        f"explained by OVERSUBSCRIBED: time-slicing, not the network: the ranks' run-queue "
        f"wait ({ts.wait_ms:.1f} ms/step) accounts for {pct:.0f}% of the exposed "
        f"communication ({ts.comm_ms or 0.0:.1f} ms/step)"
    )
    evidence = Evidence(
        "exposed communication the run-queue wait accounts for",
        round(pct, 1),
        "%",
        TIME_SLICED_PCT,
        ">=",
    )
    return replace(
        finding,
        level="info",
        saved_ms_per_step=None,
        basis=basis,
        evidence=(*finding.evidence, evidence),
    )


def attribute(
    findings: list[Finding], sliced: TimeSlicing | None = None, own_work: bool = False
) -> list[Finding]:
    """Give symptoms to their cause, so one loss is not counted twice: low compute FLOP/s
    to a placement or build finding, a straggler or imbalance to ranks sharing cores
    (not a straggler whose own CPU facts clear the cores: ``own_work``), and exposed
    communication to an oversubscribed host whose ranks' run-queue wait (``sliced``)
    accounts for most of it."""
    codes = [f.code for f in findings]
    compute_causes = [c for c in codes if c in COMPUTE_CAUSES]
    shared = [c for c in codes if c in SHARED_CORES]
    time_sliced = sliced is not None and sliced.explains_comm and "OVERSUBSCRIBED" in codes
    out = []
    for f in findings:
        if f.code == "COMPUTE" and compute_causes:
            f = _explained(f, compute_causes)
        elif (
            f.code in ("STRAGGLER", "LOAD_IMBALANCE")
            and shared
            and not (own_work and f.code == "STRAGGLER")
        ):
            f = _explained(f, shared)
        elif f.code in COMM_CODES and time_sliced and sliced is not None:
            f = _time_sliced(f, sliced)
        elif f.code == "SLOW_LINK" and "OVERSUBSCRIBED" in codes and _sliced_link(f, sliced):
            f = _link_time_sliced(f, sliced)
        out.append(f)
    return out


def _evidence(f: Finding, name: str) -> float | str | None:
    return next((e.value for e in f.evidence if e.name == name), None)


def _sliced_link(f: Finding, sliced: TimeSlicing | None) -> bool:
    """A slow link inside one oversubscribed host whose ranks wait longer for a cpu than the
    link's excess: a rank descheduled inside a collective stretches its transfer."""
    cost = _evidence(f, "cost")
    return (
        sliced is not None
        and _evidence(f, "hosts") == sliced.load.host
        and isinstance(cost, int | float)
        and cost <= sliced.wait_ms
    )


def _link_time_sliced(f: Finding, sliced: TimeSlicing) -> Finding:
    basis = (
        f"explained by OVERSUBSCRIBED: time-slicing, not the link: the ranks of "
        f"{sliced.load.host} wait {sliced.wait_ms:.1f} ms/step for a cpu, more than the "
        f"{_evidence(f, 'cost')} ms/step this link takes above its peers"
    )
    return replace(f, level="info", saved_ms_per_step=None, basis=basis)


RANK_CAUSES = ("STRAGGLER", "NODE_STRAGGLER")
"""Findings of a slow rank or node: a load imbalance beside one of them is that rank's."""


WITHIN_SPREAD = "within its peers' step-to-step spread: jitter, no rank's cause (the what-if)"
NOT_REPLAYED = (
    "not replayed: durations measured on shared cores cannot say what cores of their own would give"
)


def replayed_savings(findings: list[Finding], analysis: RunAnalysis) -> list[Finding]:
    """One number per cause: the saving of a straggler, a slow node, input waits, rank-only
    work or exposed communication is what the replay of the steps gains with that cause
    fixed, and a load imbalance beside a slow rank or node is folded into it (the imbalance
    is that rank); so is the tensor-parallel share beside tp groups across nodes (the faster
    link its saving assumes is a node's). Shared cores keep their run-queue estimate, and say
    so."""
    fixes = {f.cause: f for f in analysis.whatif.fixes} if analysis.whatif is not None else {}
    slow = [f.code for f in findings if f.code in RANK_CAUSES and f.level == "warning"]
    codes = {f.code for f in findings}
    out = []
    for f in findings:
        cause = replayed_cause(f, analysis)
        if cause == "phase:data" and slow:  # one rank's slow data: the straggler's to fix
            cause = None
        if f.code == "LOAD_IMBALANCE" and cause is not None:
            cause = None if slow else cause
            f = replace(f, rank=int(cause.partition(":")[2])) if cause else f
        fix = fixes.get(cause or "")
        if f.code == "TP_COMM" and "TP_ACROSS_NODES" in codes:  # its faster link: in a node
            f = _explained(f, ["TP_ACROSS_NODES"])
        elif fix is not None and f.code in SCOPED_CAUSES:
            saved = max(fix.gain_ms, 0.0)
            f = replace(
                f, saved_ms_per_step=saved, basis=_replayed(f, fix), since_step=fix.since_step
            )
        elif fix is not None and f.level == "warning" and f.saved_ms_per_step is not None:
            basis = f"replayed without it: {fix.note}"
            saved = max(fix.gain_ms, 0.0)
            f = replace(f, saved_ms_per_step=saved, basis=basis, since_step=fix.since_step)
        elif _within_spread(cause, analysis) and f.saved_ms_per_step is not None:
            f = replace(f, saved_ms_per_step=0.0, basis=WITHIN_SPREAD)
        elif f.code == "LOAD_IMBALANCE" and slow and f.level == "warning":
            f = _explained(f, slow)
        elif f.code in SHARED_CORES and f.saved_ms_per_step is not None and fixes:
            f = replace(f, basis=f"{f.basis}; {NOT_REPLAYED}")
        out.append(f)
    return out


def _within_spread(cause: str | None, analysis: RunAnalysis) -> bool:
    """Whether ``cause`` is a rank or node the what-if found no slower than its peers beyond
    the steps' spread (analyze/model/peers.py): its saving is the jitter's, no cause's."""
    whatif = analysis.whatif
    if whatif is None or cause is None or cause.partition(":")[0] not in ("rank", "node"):
        return False
    return cause not in whatif.beyond_spread


def _replayed(f: Finding, fix: Fix) -> str:
    """``replayed without it: ...`` for a fix that hides, ``replayed with ...`` for a speed-up,
    with what it assumes."""
    how = "without it: " if fix.note.startswith("no ") else "with "
    assumed = f"; {ASSUMED[f.code]}" if f.code in ASSUMED else ""
    return f"replayed {how}{fix.note}{assumed}"


def rank_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    """A hang or unsynchronised replicas first; then warnings before information, largest
    saving first, estimated ones before those without an estimate, then by share of step time."""
    return tuple(
        sorted(
            findings,
            key=lambda f: (
                f.code not in FIRST_CODES,
                LEVELS.index(f.level),
                f.saved_ms_per_step is None,
                -(f.saved_ms_per_step or 0.0),
                -(f.share_pct or 0.0),
            ),
        )
    )


def diagnose(ctx: DiagnosisInput, rules: tuple[Rule, ...] = RULES) -> Diagnosis:
    """Run ``rules`` on ``ctx``: findings best first, what was not judged, a verdict.

    Consistent with the analysis by construction: a figure of it above a finding's
    threshold that no rule accounted for is an ``UNEXPLAINED`` warning (consistency.py)."""
    found, not_judged = evaluate_rules(ctx, rules)
    if different_stages(ctx):  # stages do different work: never compared as replicas
        found = [f for f in found if f.code not in REPLICA_CODES]
    found += unexplained(ctx, found)
    attributed = attribute(found, time_slicing(ctx), straggler_does_own_work(ctx))
    findings = rank_findings(replayed_savings(explained_by_links(ctx, attributed), ctx.analysis))
    findings = with_dims(findings, ctx.analysis)
    return Diagnosis(
        findings=findings,
        not_judged=tuple(not_judged),
        verdict=verdict_of(findings, ctx.analysis, _source(ctx)),
        thresholds=ctx.thresholds,
    )


def _source(ctx: DiagnosisInput) -> str:
    """``scalescope``, or the format of the trace the run was ingested from."""
    return ctx.meta.launcher if "source" in ctx.meta.options else "scalescope"


def diagnose_run(
    run: Run, analysis: RunAnalysis, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> Diagnosis:
    """The diagnosis of a loaded run (scalescope's own or an ingested trace)."""
    return diagnose(diagnosis_input(run, analysis, thresholds))
