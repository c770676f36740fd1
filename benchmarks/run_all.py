"""`make bench`: run the benchmarks of this directory in a row and write docs/benchmarks.md.

Each script runs in a subprocess with modest arguments (``BENCHES``: the whole run takes
30-45 minutes on a 2-core machine), its figures collected from the JSON lines it records
(results.py), then the pytest modules under benchmarks/accuracy/ and benchmarks/live/ (live
runs too heavy for CI: the 32-rank run) run with the same variable set. A script that fails
or runs out of time gets a row saying so. Not part of CI.

    .venv/bin/python benchmarks/run_all.py                  # all, writes docs/benchmarks.md
    .venv/bin/python benchmarks/run_all.py --list
    .venv/bin/python benchmarks/run_all.py --only analyze_speed,html_size --out /tmp/bench.md
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from results import ENV, Result, read_results

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ACCURACY = "accuracy"
ACCURACY_DIR = HERE / ACCURACY
LIVE_DIR = HERE / "live"
"""Live plumbing too heavy for CI (the 32-rank run): run with the accuracy tests."""
HEAVY = "heavy"
"""The tests of tests/ marked ``heavy``: live runs CI leaves out for its time budget
(docs/testing.md lists each and what covers it in CI). They run after the accuracy tests."""


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    """A file of benchmarks/, or an absolute path."""
    args: tuple[str, ...] = ()
    minutes: float = 1.0
    """About how long it takes on an idle 2-core machine (for the progress line)."""
    timeout_s: float = 600.0
    default: bool = True
    """False: only with --only (too long to fit the usual run)."""

    @property
    def path(self) -> Path:
        return HERE / self.script

    def command(self) -> list[str]:
        return [sys.executable, str(self.path), *self.args]


def bench(name: str, script: str, args: str, minutes: float, default: bool = True) -> Bench:
    """``args`` as a shell would split them; the time limit is three times the estimate
    (at least 5 minutes): the estimates are from a 2-core machine at load average 5-6."""
    timeout_s = max(300.0, 3 * 60 * minutes)
    return Bench(name, script, tuple(shlex.split(args)), minutes, timeout_s, default)


TUNE_SMALL = "--pairs 2 --trials 4 --trial-seconds 60 --confirm 1 --confirm-rounds 1"
KNOBS = (
    "--variant torchrun --variant no-probe --variant scalescope --variant channels_last "
    "--variant bucket=100 --variant bucket_view --variant 'batch x2 (batch)'"
)
"""tune_knobs' variants but bf16 and threads=2 (0.05x and 0.3x: a run of either takes as long
as the others together)."""

BENCHES = (
    bench("analyze_speed", "analyze_speed.py", "--ranks 64,256,1024 --steps 1000", 3.0),
    bench(
        "analyze_speed_4096",
        "analyze_speed.py",
        "--ranks 4096 --steps 1000",
        7.0,
        default=False,
    ),  # fmt: skip
    bench("analyze_speed_3d", "analyze_speed_3d.py", "--repeats 3", 4.0),
    bench("analyze_scale", "analyze_scale.py", "--ranks 4096", 3.0),
    bench("analyze_scale_16384", "analyze_scale.py", "--ranks 16384", 8.0, default=False),
    bench("analyze_scale_full", "analyze_scale.py", "--ranks 16384 --full", 15.0, default=False),
    bench("engines_node_files", "engines_node_files.py", "--ranks 4096", 3.0),
    bench("node_replay_error", "node_replay_error.py", "--ranks 1024", 2.0),
    bench("node_replay_error_4096", "node_replay_error.py", "--ranks 4096", 8.0, default=False),
    bench("api_load", "api_load.py", "--ranks 1024 --steps 1000", 2.0),
    bench("html_size", "html_size.py", "", 0.3),
    bench("live_state_cost", "live_state_cost.py", "--steps 10000 --repeats 5", 0.3),
    bench("ring_cost", "ring_cost.py", "--rows 100000 --steps 10000 --repeats 5", 0.5),
    bench("ring_hang_scale", "ring_hang_scale.py", "--ranks 16384 --rows 1024", 2.0),
    bench("suite_quick", "suite_quick.py", "--repeats 1", 1.0),
    bench("comm_vs_raw", "comm_vs_raw.py", "--pairs 3 --iters 100 --warmup 10", 1.5),
    bench("ingest_vs_hta", "ingest_vs_hta.py", "--size-mb 50", 0.5),
    bench("shards_vs_folder", "shards_vs_folder.py", "--images 1000 --rounds 2 --timed 512", 1.5),
    bench("probe_overhead", "probe_overhead.py", "--pairs 11 --steps 12", 12.0),
    bench("collective_cost", "collective_cost.py", "--blocks 21 --calls 500", 1.5),
    bench("top_overhead", "top_overhead.py", "--pairs 2 --steps 30", 4.0),
    bench("top_connect_cost", "top_connect_cost.py", "--ranks 1024 --frames 7", 0.5),
    bench("hang_watch_poll", "hang_watch_poll.py", "--ranks 16384 --polls 7", 0.5),
    bench("relay_polls", "relay_polls.py", "--ranks 8 --seconds 5", 0.3),
    bench("node_files_cost", "node_files_cost.py", "--ranks 16 --steps 1000 --calls-x 36", 0.3),
    bench("record_size", "record_size.py", "--steps 200", 8.0),
    bench("top_speed", "top_speed.py", "--ranks 64,256,1024 --frames 6", 1.5),
    bench("threads_mapping", "threads_mapping.py", "--pairs 2 --steps 10", 2.5),
    bench("tune_compute", "tune_compute.py", "--steps 4", 2.5),
    bench("tune_knobs", "tune_knobs.py", f"--rounds 1 --steps 10 --warmup-steps 2 {KNOBS}", 2.0),
    bench("tune_gain", "tune_gain.py", f"{TUNE_SMALL} --steps 10 --warmup-steps 2", 4.5),
    bench("tune_gain_input_bound", "tune_gain.py", f"--workload input-bound {TUNE_SMALL}", 5.0),
    bench(
        "tune_gain_comm_bound",
        "tune_gain.py",
        f"--workload comm-bound {TUNE_SMALL}",
        5.0,
        default=False,
    ),  # fmt: skip
    bench(
        "tune_gain_oversubscribed",
        "tune_gain.py",
        f"--workload oversubscribed {TUNE_SMALL}",
        5.0,
        default=False,
    ),  # fmt: skip
    bench("project_validate_netns", "project_validate_netns.py", "", 5.0),
    bench("many_ranks_real", "many_ranks_real.py", "--ranks 128 --steps 3 --fit", 4.0),
    bench("rank_only_work", "accuracy/rank_only_work.py", "--repeats 3", 2.0),
    bench("whatif", "accuracy/whatif.py", "--repeats 3", 10.0),
    bench("metrics_scrape", "metrics_scrape.py", "--ranks 1024 --scrapes 20", 0.3),
    bench("metrics_scrape_per_rank", "metrics_scrape.py", "--ranks 1024 --per rank", 0.3),
    bench("slowdown_streams", "slowdown_streams.py", "--hours 10 --seeds 10", 2.0),
    bench("slowdown_false_alarms", "slowdown_false_alarms.py", "--quick", 1.0),
    bench(
        "slowdown_false_alarms_120h", "slowdown_false_alarms.py", "--hours 120", 8.0, default=False
    ),  # fmt: skip
    bench("slowdown_steady_live", "slowdown_steady_live.py", "--minutes 10", 12.0),
    bench("slowdown_live_30", "slowdown_live.py", "--runs 5 --change 0.3", 6.0),
    bench("slowdown_live_12", "slowdown_live.py", "--runs 10 --change 0.12", 11.0),
    bench("pipeline_move", "accuracy/pipeline_move.py", "--repeats 3", 1.5),
    bench("mpirun_clean_ends", "mpirun_clean_ends.py", "--runs 20", 6.0),
    bench(
        "faultbench_quick",
        "faultbench/run.py",
        f"--quick --pairs 2 --doc {ROOT / 'docs' / 'accuracy-quick.md'}",
        15.0,
    ),  # fmt: skip
)
QUICK = {
    "faultbench_quick": None,
    "analyze_speed": "--ranks 1024 --steps 1000",
    "html_size": None,
    "live_state_cost": "--steps 10000 --repeats 3",
    "ring_cost": "--rows 100000 --steps 10000 --repeats 3",
    "node_files_cost": None,
    "metrics_scrape": "--ranks 1024 --scrapes 10",
    "slowdown_false_alarms": None,
    "suite_quick": None,
    "probe_overhead": "--pairs 11 --steps 12",
}
"""``--quick``: the benchmarks of the quick tier (issue 49: at most 20 minutes on a 2-core
machine), each with its arguments there (None: its usual ones): the fault matrix's quick
cases first, then one figure of each kind (speed, size, cost, overhead, false alarms) at the
size its target is stated for (a smaller one would be judged by the goal scaled down, which
fixed costs miss); no accuracy or heavy tests."""
QUICK_MINUTES = {"faultbench_quick": 6.0, "analyze_speed": 1.0, "probe_overhead": 5.0}
"""The quick tier's estimates where its arguments change them (its run of 2026-11-29: 7.5
minutes with 3 overhead pairs and smaller analyze sizes)."""
ACCURACY_MINUTES, ACCURACY_TIMEOUT_S = 7.0, 1500.0
HEAVY_MINUTES = 25.0


# --- machine -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    memory_gib: float
    torch: str
    python: str

    def describe(self) -> str:
        return (f"{self.cpu}, {self.cores} cores, {self.memory_gib:.1f} GiB memory; "
                f"torch {self.torch}, Python {self.python}")  # fmt: skip


def _proc_field(path: str, key: str) -> str:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ""
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(key)), "")


def this_machine() -> Machine:
    """Without the hostname; torch's version from its metadata (no import)."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    mem_kb = _proc_field("/proc/meminfo", "MemTotal").split()
    return Machine(
        cpu=_proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown cpu",
        cores=os.cpu_count() or 1,
        memory_gib=int(mem_kb[0]) / 2**20 if mem_kb else math.nan,
        torch=torch,
        python=platform.python_version(),
    )


# --- running a script ----------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    command: str
    seconds: float
    results: list[Result] = field(default_factory=list)
    error: str = ""
    """One line: why it failed or ran out of time; empty when it ran through."""
    summary: str = ""
    """What it gave, when not just figures (the accuracy tests' counts)."""


def failure(name: str, reason: str) -> Result:
    return Result("the run", math.nan, "", "", None, f"failed: {reason}", source=name)


def last_line(text: str, limit: int = 200, first: bool = False) -> str:
    """The last (or first) non-empty line, cut to ``limit`` characters."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = (lines[0] if first else lines[-1]) if lines else "no output"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def bench_env(results_file: Path) -> dict[str, str]:
    """The caller's environment, the results file, and benchmarks/ on the path (for the
    accuracy tests' ``from results import record``)."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return os.environ | {ENV: str(results_file), "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def run_logged(
    command: Sequence[str], log: Path, env: dict[str, str], timeout_s: float,
    tick: Callable[[float], None] | None = None,
) -> tuple[int | None, float]:  # fmt: skip
    """Exit status (None: ran out of time and was killed, with its children) and seconds."""
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            while True:
                left = timeout_s - (time.monotonic() - start)
                try:
                    return proc.wait(timeout=max(0.0, min(1.0, left))), time.monotonic() - start
                except subprocess.TimeoutExpired:
                    if left <= 1.0:
                        break
                    if tick is not None:
                        tick(time.monotonic() - start)
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # its session: it and its children
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return None, time.monotonic() - start


def run_bench(bench: Bench, work: Path, tick: Callable[[float], None] | None = None) -> Outcome:
    """Run one script; its figures, plus a failure row when it failed or ran out of time."""
    results_file, log = work / f"{bench.name}.jsonl", work / f"{bench.name}.log"
    results_file.unlink(missing_ok=True)
    command = bench.command()
    rc, seconds = run_logged(command, log, bench_env(results_file), bench.timeout_s, tick)
    outcome = Outcome(bench.name, display_command(bench), seconds,
                      read_results(results_file, bench.name))  # fmt: skip
    output = log.read_text(errors="replace")
    if rc is None:
        outcome.error = f"timed out after {bench.timeout_s:.0f} s (last line: {last_line(output)})"
    elif rc != 0:
        outcome.error = f"exit {rc}: {last_line(output)}"
    elif not outcome.results:
        outcome.error = f"recorded no figure (last line: {last_line(output)})"
    if outcome.error:
        outcome.results.append(failure(bench.name, outcome.error))
    return outcome


def display_command(bench: Bench) -> str:
    script = bench.path.relative_to(ROOT) if bench.path.is_relative_to(ROOT) else bench.path
    return shlex.join([str(script), *bench.args])


# --- accuracy tests ------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseRow:
    nodeid: str
    status: str
    """passed, failed or skipped."""
    reason: str = ""
    seconds: float = 0.0


def has_tests(directory: Path) -> bool:
    return directory.is_dir() and any(
        p.name.startswith("test_") or p.name.endswith("_test.py") for p in directory.rglob("*.py")
    )


def nodeid(classname: str, name: str, root: Path = ROOT) -> str:
    """pytest's node id back from JUnit's dotted classname (``benchmarks.accuracy.test_x``)."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        if (root / Path(*parts[:i])).with_suffix(".py").is_file():
            return "::".join(["/".join(parts[:i]) + ".py", *parts[i:], name])
    return f"{classname}::{name}" if classname else name


def parse_junit(xml: Path, root: Path = ROOT) -> list[CaseRow]:
    rows = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        status, reason = "passed", ""
        for tag, word in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                message = found.get("message") or found.text or ""
                status, reason = word, last_line(message, first=True)
                break
        node = nodeid(case.get("classname", ""), case.get("name", ""), root)
        rows.append(CaseRow(node, status, reason, float(case.get("time") or 0.0)))
    return rows


def run_accuracy(
    directory: Path | Sequence[Path], work: Path, timeout_s: float,
    tick: Callable[[float], None] | None = None, marker: str = "",
) -> tuple[Outcome, list[CaseRow]]:  # fmt: skip
    """One pytest run of ``directory`` (or of several: benchmarks/accuracy and
    benchmarks/live share the conftest of benchmarks/); with ``marker``, of its tests so
    marked only (tests/ has its own conftest: a run of its own)."""
    name = marker or ACCURACY
    xml, results_file, log = (work / f"{name}.{ext}" for ext in ("xml", "jsonl", "log"))
    xml.unlink(missing_ok=True)
    results_file.unlink(missing_ok=True)
    folders = [directory] if isinstance(directory, Path) else list(directory)
    where = " ".join(str(d.relative_to(ROOT) if d.is_relative_to(ROOT) else d) for d in folders)
    where += f" -m {marker}" if marker else ""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *where.split(),
               f"--junitxml={xml}"]  # fmt: skip
    rc, seconds = run_logged(command, log, bench_env(results_file), timeout_s, tick)
    shown = f"pytest -q -p no:cacheprovider {where}"
    outcome = Outcome(name, shown, seconds, read_results(results_file, ACCURACY))
    tests = parse_junit(xml) if xml.exists() else []
    outcome.summary = tally_cases(tests)
    if rc is None:
        outcome.error = f"timed out after {timeout_s:.0f} s"
    elif rc not in (0, 1, 5):  # 1: some tests failed (their rows say so); 5: none collected
        outcome.error = f"pytest exit {rc}: {last_line(log.read_text(errors='replace'))}"
    return outcome, tests


def tally_cases(tests: list[CaseRow]) -> str:
    words = [t.status for t in tests]
    found = [f"{words.count(w)} {w}" for w in ("passed", "failed", "skipped") if w in words]
    return f"{len(tests)} tests: {', '.join(found)}" if tests else "no tests collected"


# --- the Markdown --------------------------------------------------------------------------


@dataclass
class Report:
    machine: Machine
    started: datetime
    seconds: float
    runs: list[Outcome]
    load: float = math.nan
    """The 1-minute load average at the start: what else ran beside the benchmarks."""
    tests: list[CaseRow] = field(default_factory=list)
    accuracy: Outcome | None = None
    """The pytest run of benchmarks/accuracy/; None when it did not run."""
    accuracy_note: str = "no test modules under `benchmarks/accuracy/`"
    """Why it did not run."""
    left_out: list[str] = field(default_factory=list)
    """Benchmarks of the usual run that ``--only`` left out."""
    quick: bool = False
    """The ``--quick`` tier's run."""

    @property
    def results(self) -> list[Result]:
        return [r for run in self.runs for r in run.results]


INTRO = """\
Written by `make bench` (`benchmarks/run_all.py`), not by hand and not in CI: it runs each
script of `benchmarks/` in a row with the modest arguments listed under "Runs" (fewer pairs
and steps than the scripts' defaults, so the whole run takes 30-45 minutes on a 2-core
machine), collects the figures each one records (`benchmarks/results.py`), and replaces this
file. The pytest modules under `benchmarks/accuracy/`, which compare measurements against a
truth measured beside them, feed it too: one row per test under "Accuracy against a truth",
with those of `benchmarks/live/` (live plumbing too heavy for CI, structure only).
A row's target is the one its script states; "no target" rows are figures to read, not
verdicts. The figures come from one run on this machine, under whatever else ran on it:
ratios near their target are within its noise. `benchmarks/gpu_check.py` is not run here
(`make gpu-check`)."""


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def verdict(r: Result) -> str:
    if r.met is not None:
        return "met" if r.met else "missed"
    if r.detail.startswith("failed:"):
        return r.detail
    if r.detail.startswith("skipped:"):
        return "skipped"
    return "no target" if not r.target else "not judged"


def notes(r: Result) -> str:
    if r.detail.startswith("failed:"):
        return ""
    return r.detail.removeprefix("skipped:").strip()


def number(value: float) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"


def figures_table(results: list[Result]) -> list[str]:
    lines = ["| benchmark | figure (unit) | value | target | result | notes |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        figure = f"{r.figure} ({r.unit})" if r.unit else r.figure
        row = (r.source, figure, number(r.value), r.target or "—", verdict(r), notes(r))
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return lines


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def runs_table(runs: list[Outcome]) -> list[str]:
    lines = ["| benchmark | command | time | outcome |", "|---|---|---|---|"]
    for run in runs:
        outcome = run.error or run.summary or f"{len(run.results)} figure(s)"
        row = (run.name, f"`{run.command}`", minutes(run.seconds), outcome)
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return lines


def counts(results: list[Result]) -> str:
    words = [verdict(r).split(":")[0] for r in results]
    order = ("met", "missed", "no target", "not judged", "skipped", "failed")
    return ", ".join(f"{words.count(w)} {w}" for w in order if words.count(w))


def accuracy_section(report: Report) -> list[str]:
    lines = ["## Accuracy against a truth", ""]
    if report.accuracy is None:
        return [*lines, f"Not run: {report.accuracy_note}.", ""]
    if report.accuracy.error:
        lines += [f"failed: {report.accuracy.error}", ""]
    if report.tests:
        lines += ["| test | result | time |", "|---|---|---|"]
        for t in report.tests:
            result = f"{t.status}: {t.reason}" if t.reason else t.status
            lines.append(f"| `{cell(t.nodeid)}` | {cell(result)} | {minutes(t.seconds)} |")
        lines.append("")
    elif not report.accuracy.error:
        lines += ["No tests were collected.", ""]
    if report.accuracy.results:
        lines += ["Figures the tests recorded:", "", *figures_table(report.accuracy.results), ""]
    return lines


def render(report: Report) -> str:
    when = report.started.astimezone(timezone.utc)
    lines = [
        "# Benchmarks", "", INTRO, "",
        f"- Date: {when:%Y-%m-%d} (started {when:%H:%M} UTC, {minutes(report.seconds)} in all, "
        f"load average {report.load:.1f} at the start)",
        f"- Machine: {report.machine.describe()}",
        *([f"- The quick tier (`make bench BENCH_ARGS=--quick`): {len(report.runs)} "
           "benchmarks with smaller arguments (under Runs), no accuracy or heavy tests; its "
           "target is 20 minutes in all on a 2-core machine"] if report.quick else []),
        *([f"- Left out of this run (`--only`): {', '.join(report.left_out)}"]
          if report.left_out else []), "",
        "## Figures", "",
        f"{len(report.results)} rows: {counts(report.results) or 'none'}.", "",
        *figures_table(report.results), "",
        *accuracy_section(report),
        "## Runs", "",
        *runs_table(report.runs + ([report.accuracy] if report.accuracy else [])), "",
    ]  # fmt: skip
    return "\n".join(lines)


# --- command line --------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="NAME[,NAME]: these benchmarks (`accuracy`: the tests)")
    p.add_argument("--quick", action="store_true",
                   help=f"the quick tier ({len(QUICK)} benchmarks, smaller arguments, no "
                   "accuracy tests: ~20 min on 2 cores) into docs/benchmarks-quick.md")  # fmt: skip
    p.add_argument("--out", type=Path, help="default: docs/benchmarks.md "
                   "(docs/benchmarks-quick.md with --quick)")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the benchmarks and stop")
    p.add_argument("--logs", type=Path, help="each script's output (default: a temp dir)")
    p.add_argument("--accuracy-timeout", type=float, default=ACCURACY_TIMEOUT_S)
    return p.parse_args(argv)


def quick_tier() -> list[Bench]:
    """``QUICK``'s benchmarks in its order, with their quick arguments and estimates."""
    by_name = {b.name: b for b in BENCHES}
    out = []
    for name, args in QUICK.items():
        b = by_name[name]
        minutes = QUICK_MINUTES.get(name, b.minutes)
        out.append(replace(b, args=b.args if args is None else tuple(shlex.split(args)),
                           minutes=minutes, timeout_s=max(300.0, 3 * 60 * minutes)))  # fmt: skip
    return out


def chosen(only: str | None, quick: bool = False) -> tuple[list[Bench], bool]:
    """The benchmarks to run, and whether to run the accuracy tests."""
    if quick:
        if only:
            raise SystemExit("--quick and --only choose the benchmarks both: give one")
        return quick_tier(), False
    if not only:
        return [b for b in BENCHES if b.default], True
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {b.name for b in BENCHES} | {ACCURACY}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; see --list")
    return [b for b in BENCHES if b.name in names], ACCURACY in names


def print_list(quick: bool = False) -> None:
    if quick:
        tier = quick_tier()
        for b in tier:
            print(f"{b.name:26s} ~{b.minutes:4.1f} min  {display_command(b)}")
        print(f"{'':26s} ~{sum(b.minutes for b in tier):4.1f} min in all")
        return
    for b in BENCHES:
        mark = "" if b.default else "  (only with --only)"
        print(f"{b.name:26s} ~{b.minutes:4.1f} min  {display_command(b)}{mark}")
    print(f"{ACCURACY:26s} ~{ACCURACY_MINUTES:4.1f} min  pytest benchmarks/accuracy "
          f"benchmarks/live (when they have tests)")  # fmt: skip
    print(f"{'':26s} ~{HEAVY_MINUTES:4.1f} min  pytest tests -m heavy (with the accuracy tests)")


class Progress:
    """``[ 3/15] probe_overhead  1m12s of ~4.0 min, ~26 min left in all``: redrawn each second
    on a terminal, then the outcome."""

    def __init__(self, total: int, minutes_left: float) -> None:
        self.total, self.done, self.left, self.estimate = total, 0, minutes_left, 0.0
        self.tty = sys.stdout.isatty()

    def head(self, name: str) -> str:
        return f"[{self.done + 1:2d}/{self.total}] {name:24s}"

    def start(self, name: str, estimate: float, command: str) -> None:
        self.estimate = estimate
        print(f"{self.head(name)} {command}  (~{estimate:.1f} min, ~{self.left:.0f} min left "
              "in all)", flush=True)  # fmt: skip

    def tick(self, name: str) -> Callable[[float], None] | None:
        if not self.tty:
            return None

        def draw(elapsed: float) -> None:
            left = max(0.0, self.left - elapsed / 60)
            print(f"\r{self.head(name)} {_mmss(elapsed)} of ~{self.estimate:.1f} min, "
                  f"~{left:.0f} min left in all", end="", flush=True)  # fmt: skip

        return draw

    def finish(self, outcome: Outcome) -> None:
        self.left = max(0.0, self.left - self.estimate)
        failed = outcome.error and f"FAILED {outcome.error}"
        summary = failed or outcome.summary or one_line(outcome.results)
        erase = "\r\x1b[K" if self.tty else ""
        print(f"{erase}{self.head(outcome.name)} {_mmss(outcome.seconds)}  {summary}", flush=True)
        self.done += 1


def _mmss(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def one_line(results: list[Result]) -> str:
    if len(results) == 1:
        r = results[0]
        target = f" (target {r.target})" if r.target else ""
        return f"{number(r.value)} {r.unit}{target}: {verdict(r)}"
    return f"{len(results)} figures: {counts(results)}"


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.list:
        print_list(args.quick)
        return
    benches, wanted = chosen(args.only, args.quick)
    out = args.out or ROOT / "docs" / ("benchmarks-quick.md" if args.quick else "benchmarks.md")
    test_dirs = [d for d in (ACCURACY_DIR, LIVE_DIR) if has_tests(d)]
    accuracy = wanted and bool(test_dirs)
    work = args.logs or Path(tempfile.mkdtemp(prefix="scalescope-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    total_min = sum(b.minutes for b in benches)
    total_min += (ACCURACY_MINUTES + HEAVY_MINUTES) if accuracy else 0
    progress = Progress(len(benches) + 2 * accuracy, total_min)
    print(f"{len(benches)} benchmark(s){' + accuracy tests' if accuracy else ''}, "
          f"about {total_min:.0f} min; logs in {work}", flush=True)  # fmt: skip
    started, t0, load = datetime.now(timezone.utc), time.monotonic(), os.getloadavg()[0]
    runs = []
    for bench in benches:
        progress.start(bench.name, bench.minutes, display_command(bench))
        runs.append(run_bench(bench, work, progress.tick(bench.name)))
        progress.finish(runs[-1])
    report = Report(this_machine(), started, 0.0, runs, load, quick=args.quick)
    chosen_names = {b.name for b in benches}
    if not args.quick:
        report.left_out = [b.name for b in BENCHES if b.default and b.name not in chosen_names]
    if accuracy:
        progress.start(ACCURACY, ACCURACY_MINUTES, "pytest benchmarks/accuracy benchmarks/live")
        report.accuracy, report.tests = run_accuracy(
            test_dirs, work, args.accuracy_timeout, progress.tick(ACCURACY)
        )
        progress.finish(report.accuracy)
        progress.start(HEAVY, HEAVY_MINUTES, "pytest tests -m heavy")
        heavy, tests = run_accuracy(
            ROOT / "tests", work, args.accuracy_timeout, progress.tick(HEAVY), marker=HEAVY
        )
        report.tests += tests
        report.runs.append(heavy)
        progress.finish(heavy)
    elif args.quick:
        report.accuracy_note = "the quick tier leaves the accuracy and heavy tests out"
    elif not wanted:
        report.accuracy_note = "not chosen with --only"
    report.seconds = time.monotonic() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(report), encoding="utf-8")
    print(f"wrote {out}: {counts(report.results) or 'no figures'}")


if __name__ == "__main__":
    main()
