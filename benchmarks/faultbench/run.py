"""The fault matrix, run (issue 49): each case's planted and clean arms in interleaved pairs,
the planted arm scored (its verdict against the truth, the what-if's gain against the pairs'
measured gain by the script's own clock), the table written to docs/accuracy.md and the
scores to docs/accuracy.json.

    .venv/bin/python benchmarks/faultbench/run.py --quick            # one case of each kind
    .venv/bin/python benchmarks/faultbench/run.py --pairs 3 --seed 7 # the whole matrix
    .venv/bin/python benchmarks/faultbench/run.py --quick --traceml  # TraceML beside it
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path

import traceml
from cases import QUICK, Case, Truth, matrix
from report import write_doc
from score import CaseScore, Measured, score, skip, totals

from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.recording import Recording

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BESIDE = {"deepspeed": (Path(sys.prefix) / "deepspeed", ROOT / ".venv" / "deepspeed")}
"""Training loops installed beside the venv, not in it (``make test``: ``.venv/deepspeed``):
a case that needs one finds it there, and its ranks get that folder on their path."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=49, help="draws the faulty rank, size, onset")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--pairs", type=int, default=1, help="interleaved planted/clean pairs")
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    p.add_argument("--cases", default="", help="comma-separated case names")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "accuracy.md")
    p.add_argument("--keep", type=Path, help="keep the runs here")
    p.add_argument(
        "--rescore",
        type=Path,
        help="score the runs recorded here again with this code (their measured gains kept), "
        "write their truth.json, and stop",
    )
    p.add_argument(
        "--record",
        type=Path,
        help="keep each case's first planted run here, with "
        "its truth and score (tests/data/faultbench: the recorded subset CI checks)",
    )
    p.add_argument("--traceml", action="store_true",
                   help="also run each case's planted arm under TraceML (installed on first use "
                   f"in {traceml.VENV})")  # fmt: skip
    return p.parse_args()


def run_arm(case: Case, folder: Path, planted: bool) -> Path:
    """One run of the case's script through scalescope, its fault (if any) out of argv."""
    folder.mkdir(parents=True)
    arm = {"script": str(case.script), "args": [*case.args, *(case.fault if planted else ())]}
    (folder / "arm.json").write_text(json.dumps(arm))
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", str(case.ranks), *case.launch,
           "--run-dir", "run", "--warmup-steps", str(case.warmup_steps), "--no-report",
           str(HERE / "planted.py"), "arm.json"]  # fmt: skip
    subprocess.run(cmd, cwd=folder, check=True, stdout=subprocess.DEVNULL, env=arm_env(case))
    return folder


def beside(case: Case) -> Path | None:
    """The folder beside the venv that holds the module the case needs, if any."""
    return next((d for d in BESIDE.get(case.needs, ()) if (d / case.needs).is_dir()), None)


def arm_env(case: Case) -> dict[str, str] | None:
    """The ranks' environment: this one, with the folder of a loop installed beside the
    venv first on the path (None: this one as it is)."""
    folder = beside(case)
    if folder is None:
        return None
    path = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def missing(case: Case) -> bool:
    """Whether the module the case needs is neither installed nor beside the venv."""
    return bool(case.needs) and beside(case) is None and not importlib.util.find_spec(case.needs)


def own_step_ms(case: Case, folder: Path) -> float:
    """Rank 0's mean step by the script's own clock after warm-up, or since a mid-run fault's
    first step (a cost every k steps is in the mean)."""
    first = max(case.warmup_steps, case.since)
    if case.clock == "work-log":
        steps = json.loads((folder / "work-0.json").read_text())["steps"]
        return 1e3 * statistics.fmean(s["s"] for s in steps if s["step"] >= first)
    steps = json.loads((folder / "steps.json").read_text())
    return 1e3 * statistics.fmean(steps[first:])


def predicted_ms(rec: Recording, cause: str | None) -> float | None:
    """The what-if's gain of fixing the truth's cause on the planted run; where the what-if
    takes no such cause (``stage:N``), the verdict's own cost of the cause naming it."""
    if cause is None:
        return None
    found = rec.analysis.whatif
    fix = next((f for f in found.fixes if f.cause == cause), None) if found else None
    if fix is None:
        try:
            asked = rec.what_if([cause])
        except ValueError:
            return verdict_cost_ms(rec.verdict, cause)
        fix = asked.fixes[0] if asked is not None and asked.fixes else None
    return fix.gain_ms if fix is not None else None


def verdict_cost_ms(verdict: Verdict, culprit: str) -> float | None:
    named = (c for c in verdict.causes
             if c.culprit and f"{c.culprit.kind}:{c.culprit.name}" == culprit)  # fmt: skip
    cause = next(named, None)
    return cause.cost.ms_per_step if cause is not None and cause.cost else None


def run_case(case: Case, pairs: int, work: Path, record: Path | None = None) -> CaseScore:
    if missing(case):
        return skip(case, f"{case.needs} is not installed")
    measured, predictions, first = [], [], None
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        folders = {p: run_arm(case, work / f"{case.name}-{i}-{'planted' if p else 'clean'}", p)
                   for p in order}  # fmt: skip
        measured.append(
            Measured(own_step_ms(case, folders[True]), own_step_ms(case, folders[False]))
        )
        rec = Recording.load(folders[True] / "run")
        predictions.append(predicted_ms(rec, case.fixed))
        if first is None and record is not None:
            keep(folders[True] / "run", record / case.name)
        first = first or rec.verdict
    known = [p for p in predictions if p is not None]
    scored = score(case, first, statistics.median(known) if known else None, measured)
    if record is not None:
        truth = {"case": case.name, "truth": asdict(case.truth), "score": asdict(scored)}
        (record / case.name / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return scored


def keep(run_dir: Path, dest: Path) -> None:
    """The planted run, as scalescope recorded it."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(run_dir, dest / "run")


def rescore(recorded: Path) -> int:
    """The recorded subset's verdicts scored again (a change meant to move them); the gains
    measured when they were recorded are kept."""
    for path in sorted(recorded.glob("*/truth.json")):
        doc = json.loads(path.read_text())
        case = Case(doc["case"], "recorded", path.parent, (), (), Truth(**doc["truth"]))
        verdict = Recording.load(path.parent / "run").verdict
        now = score(case, verdict, doc["score"]["predicted_ms"], [])
        kept = {k: doc["score"][k] for k in ("measured_ms", "spread_ms", "gain_ok")}
        doc["score"] = asdict(now) | kept
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{doc['case']}: {now.named}, {'pass' if now.passed else 'fail'}", file=sys.stderr)
    return 0


def main() -> int:
    args = parse()
    if args.rescore is not None:
        return rescore(args.rescore)
    cases = matrix(args.seed, args.steps)
    chosen = set(args.cases.split(",")) if args.cases else (set(QUICK) if args.quick else None)
    cases = [c for c in cases if chosen is None or c.name in chosen]
    scores = []
    launcher = traceml.install() if args.traceml else None
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        for n, case in enumerate(cases, 1):
            print(f"[{n}/{len(cases)}] {case.name}", file=sys.stderr, flush=True)
            scored = run_case(case, args.pairs, work, args.record)
            if launcher is not None:
                scored = replace(scored, traceml=traceml.run_case(case, work, launcher))
            scores.append(scored)
    total = totals(scores)
    doc = {"date": date.today().isoformat(), "seed": args.seed, "pairs": args.pairs,
           "steps": args.steps, "cases": [asdict(s) for s in scores],
           "totals": asdict(total)}  # fmt: skip
    args.doc.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(args.doc, cases, scores, total, doc)
    print(f"wrote {args.doc} and {args.doc.with_suffix('.json')}", file=sys.stderr)
    return 0 if all(s.passed or s.skipped for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
