"""The fault matrix at ``--record summary`` against ``--record full`` on the same runs (issue
50: "the fault matrix at the default level scores the same as with --record full").

Each kept planted run (``run.py --keep``), recorded in full, is folded as the probe folds it
at ``--record summary`` (probe/summary.py ``StepSummaries`` over every rank's rows, the
windows of probe/windows.py with the case's warm-up), into a copy of the kept matrix; the
clean and alone arms are linked as they are (only their clocks are read). Both copies are
scored by ``run.py --rescore-kept`` into their own docs, and each case's verdict and
predicted gain are printed side by side. The same runs on both sides: what differs is only
what the probe kept.

    .venv/bin/python benchmarks/faultbench/levels.py KEEP --doc /tmp/levels.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from cases import Case, matrix
from rescore import rescore_kept
from run import kept_pairs, pair_folder

from scalescope.events.files import events_path
from scalescope.events.reader import read_event_stream
from scalescope.events.schema import ROW_FIELDS
from scalescope.events.writer import EventWriter
from scalescope.probe.summary import StepSummaries
from scalescope.probe.windows import windows_from_env


def summarised_run(source: Path, dest: Path, warmup_steps: int) -> None:
    """``source`` (a run recorded in full) with every rank's rows folded as at summary."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("rank-*.arrows"))
    fold = windows_from_env(warmup_steps)
    for path in sorted((source / "events").glob("rank-*.arrows")):
        rank = int(path.stem.split("-")[1])
        table = read_event_stream(path).table
        columns = [table.column(name).to_pylist() for name in ROW_FIELDS]
        rows = list(zip(*columns, strict=True))
        writer = EventWriter(events_path(dest, rank), rank, compression="zstd")
        writer.write(StepSummaries(fold)(rows, final=True))
        writer.close()


def summarised_keep(keep: Path, dest: Path, cases: list[Case]) -> None:
    """The kept matrix with each planted run summarised, the other arms linked."""
    for case in cases:
        for i in range(kept_pairs(case, keep, tidy=False)):
            for folder in keep.glob(f"{case.name}-{i}-*"):
                target = dest / folder.name
                if folder != pair_folder(keep, case, i, True):
                    target.symlink_to(folder)
                    continue
                target.mkdir()
                for item in folder.iterdir():
                    if item.name != "run":
                        (target / item.name).symlink_to(item)
                summarised_run(folder / "run", target / "run", case.warmup_steps)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("keep", type=Path, help="a whole run's kept folders (run.py --keep)")
    p.add_argument(
        "--doc",
        type=Path,
        required=True,
        help="the full level's doc to rescore into; the summary's beside it",
    )
    p.add_argument("--table", type=Path, default=Path(__file__).parents[2] / "docs" /
                   "accuracy-levels.md", help="where the side-by-side table goes")  # fmt: skip
    p.add_argument("--previous", type=Path, required=True,
                   help="the scores JSON the kept run wrote (docs/accuracy.json)")  # fmt: skip
    args = p.parse_args()
    previous = json.loads(args.previous.read_text())
    cases = matrix(previous["seed"], previous["steps"])
    summary_doc = args.doc.with_name(args.doc.stem + "-summary.md")
    for doc in (args.doc, summary_doc):
        doc.with_suffix(".json").write_text(args.previous.read_text())
    rescore_kept(args.keep, args.doc, "the kept runs, as recorded (--record full)")
    with tempfile.TemporaryDirectory() as tmp:
        summarised_keep(args.keep, Path(tmp), cases)
        rescore_kept(Path(tmp), summary_doc, "the kept runs folded as at --record summary")
    full = json.loads(args.doc.with_suffix(".json").read_text())
    summary = json.loads(summary_doc.with_suffix(".json").read_text())
    table = side_by_side(full, summary)
    args.table.write_text(f"{HEADER.format(date=full['date'], seed=full['seed'])}\n{table}\n")
    print(table)
    return 0


HEADER = """# The fault matrix at `--record summary` against `--record full`

Written by `benchmarks/faultbench/levels.py` on {date}: the kept planted runs of seed {seed}'s
matrix (docs/accuracy.md), each folded as the probe folds it at `--record summary`
(probe/summary.py over every rank's rows, probe/windows.py's windows with the case's
warm-up), then both copies scored by `run.py --rescore-kept`. The same runs on both sides:
only what the probe kept differs. The default level flips to summary when every case scores
as at full (issue 50).
"""


def side_by_side(full: dict, summary: dict) -> str:
    """Each case's verdict and predicted gain at both levels, and the totals."""
    lines = ["| case | full: named | summary: named | full: predicted (ms/step) | "
             "summary: predicted (ms/step) |", "|---|---|---|---|---|"]  # fmt: skip
    by_name = {c["case"]: c for c in summary["cases"]}
    same = 0
    for a in full["cases"]:
        b = by_name[a["case"]]
        same += a["named"] == b["named"] and a["passed"] == b["passed"]
        lines.append(f"| {a['case']} | {a['named']} | {b['named']} | {_ms(a['predicted_ms'])} | "
                     f"{_ms(b['predicted_ms'])} |")  # fmt: skip
    lines.append(f"\nSame verdict and result: {same} of {len(full['cases'])} cases.\n")
    for key in ("clear_culprit_pct", "cause_pct", "no_fault_false_alarms", "gain_within_pct",
                "gain_median_error_pct", "interval_holds_pct"):  # fmt: skip
        lines.append(f"- {key}: full {_ms(full['totals'][key])}, "
                     f"summary {_ms(summary['totals'][key])}")  # fmt: skip
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    sys.exit(main())
