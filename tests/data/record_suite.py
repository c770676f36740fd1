"""Record ``scalescope suite --quick`` (all six workloads, 2 ranks) under tests/data/suites/quick/.

    .venv/bin/python tests/data/record_suite.py      # ~2 min

Keeps its suite.json, the table it printed (table.txt) and each workload's own record
(``<workload>-n2/workload.json``, resnet50's ``bench.json``), not the runs' events (the table
is rendered from suite.json alone). tests/e2e/test_suite_cli.py re-renders the table of all six
from it; CI runs four workloads live, ``make bench`` all six (benchmarks/live/). Record again
when suite.json's schema or the workloads change.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "e2e")]

from conftest import cli_env  # noqa: E402

OUT = TESTS / "data" / "suites" / "quick"


def main() -> int:
    work = OUT.parent / "quick.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "scalescope.cli", "suite", "--quick", "--suite-dir", "suite"],
            cwd=work, env=cli_env(), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(
                f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir(parents=True)
        shutil.copy(work / "suite" / "suite.json", OUT / "suite.json")
        lines = proc.stdout.splitlines(keepends=True)
        start = next(i for i, line in enumerate(lines) if "scalescope suite: " in line)
        (OUT / "table.txt").write_text("".join(lines[start:]))
        for run in sorted(p for p in (work / "suite").iterdir() if p.is_dir()):
            for name in ("workload.json", "bench.json"):
                if (run / name).is_file():
                    (OUT / run.name).mkdir(exist_ok=True)
                    shutil.copy(run / name, OUT / run.name / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{OUT}: {', '.join(sorted(p.name for p in OUT.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
