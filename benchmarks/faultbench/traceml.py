"""TraceML beside scalescope in the fault matrix (issue 49, item 3): each case's planted arm
run again under TraceML's own launcher, and what it names scored by the same rules.

Install: the bench's own step, outside the project's environment: a venv under
``~/.cache/scalescope/traceml-venv`` with ``torch`` (the project's version) and ``traceml-ai``
(``PACKAGE``). A case runs as ``traceml run traced.py --nproc-per-node N --args ARM.json``:
the same script and arguments as the scored arm, each step inside ``traceml.trace_step``
(the one change TraceML's quickstart asks of a plain loop; traced.py). Its end-of-run summary
(``final_summary.txt``, the box it prints) is the cell's source.

The rule that maps its words to a culprit and a cause class, written before scoring:

- cause class, by the summary's ``Verdict:`` label:
  ``STRAGGLER``, ``INPUT STRAGGLER``, ``COMPUTE STRAGGLER``, ``H2D STRAGGLER`` -> straggler;
  ``INPUT-BOUND``, ``H2D-BOUND`` -> input; ``COMPUTE-BOUND`` -> compute;
  ``RESIDUAL-HEAVY`` -> residual; ``NO CLEAR PERFORMANCE BOTTLENECK``, ``BALANCED`` -> no
  bottleneck; ``INSUFFICIENT STEP-TIME DATA`` (or no summary) -> no verdict; any other label
  is its own class, in lower case;
- culprit: on a straggler label, the rank its ``Next:`` line points at (``... around r1``,
  ``... on r1`` or ``R1/N0``) -> ``rank:1``: the late rank, where its ``Why:`` line names the
  rank that waited first; no other label names a culprit;
- a no-fault case passes when TraceML costs nothing: no culprit, and the class is no
  bottleneck or compute (COMPUTE-BOUND is informational: "no material overhead is visible",
  its DIAGNOSIS.md); a marginal case also passes so quiet; otherwise culprit and class must
  both equal the truth's, as scalescope's.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cases import Case
from score import ToolCell

HERE = Path(__file__).resolve().parent
VENV = Path.home() / ".cache" / "scalescope" / "traceml-venv"
PACKAGE = "traceml-ai==0.5.0"
TIMEOUT_S = 600
LABELS = {
    "STRAGGLER": "straggler",
    "INPUT STRAGGLER": "straggler",
    "COMPUTE STRAGGLER": "straggler",
    "H2D STRAGGLER": "straggler",
    "INPUT-BOUND": "input",
    "H2D-BOUND": "input",
    "COMPUTE-BOUND": "compute",
    "RESIDUAL-HEAVY": "residual",
    "NO CLEAR PERFORMANCE BOTTLENECK": "no bottleneck",
    "BALANCED": "no bottleneck",
    "INSUFFICIENT STEP-TIME DATA": "no verdict",
}
QUIET = ("no bottleneck", "compute")
RANK = re.compile(r"(?:\baround|\bon)\s+[rR](\d+)\b|\bR(\d+)/N\d+")


@dataclass(frozen=True)
class Named:
    """What one TraceML summary names, and the words it names it with."""

    culprit: str | None
    cause: str
    words: str

    @property
    def short(self) -> str:
        return f"{self.culprit or '(no culprit)'} ({self.cause})"


def _field(text: str, key: str) -> str:
    """A ``Key: value`` line of the summary's box, its borders and padding dropped."""
    for line in text.splitlines():
        body = line.strip().strip("|").strip()
        if body.startswith(f"{key}:"):
            return body.split("||")[0][len(key) + 1 :].strip()
    return ""


def read(text: str) -> Named:
    """TraceML's summary text -> (culprit, cause class), by the module's rule."""
    verdict = _field(text, "Verdict")
    label = re.sub(r"\s*\((CRITICAL|WARNING|INFO)\)\s*$", "", verdict).strip()
    if not label:
        return Named(None, "no verdict", "no TraceML summary")
    cause = LABELS.get(label, label.lower())
    culprit = None
    if cause == "straggler":
        found = RANK.search(_field(text, "Next"))
        culprit = f"rank:{found.group(1) or found.group(2)}" if found else None
    why = _field(text, "Why")
    return Named(culprit, cause, f"{verdict}: {why}" if why else verdict)


def judge(case: Case, named: Named) -> ToolCell:
    """The cell: what TraceML named against the case's truth, by scalescope's rules."""
    truth = case.truth
    if truth.culprit is None:
        quiet = named.culprit is None and named.cause in QUIET
        return ToolCell(named.short, named.words, None, None, quiet)
    culprit_ok, cause_ok = named.culprit == truth.culprit, named.cause == truth.cause
    quiet = truth.size == "marginal" and named.culprit is None and named.cause in QUIET
    return ToolCell(named.short, named.words, culprit_ok, cause_ok,
                    quiet or (culprit_ok and cause_ok))  # fmt: skip


def cannot(reason: str) -> ToolCell:
    """A cell for a case TraceML could not run: why, in one line."""
    return ToolCell("not run", reason, None, None, False)


LOOPS = ("pytorch_lightning", "transformers", "accelerate")
"""The installed training loops the cases run through (the Trainer needs accelerate), put in
TraceML's venv at this project's versions: without them its Lightning and Trainer cases
ended at their imports."""


DEEPSPEED_DEPS = ("hjson", "py-cpuinfo", "einops", "msgpack", "nvidia-ml-py")
"""DeepSpeed's small dependencies that TraceML's venv lacks (as the Makefile's ``DEEPSPEED``):
DeepSpeed goes in without its own dependencies (they would pull a second torch) and without
its C++ ops (``DS_BUILD_OPS=0``), at the version installed beside the project's venv."""


def install() -> Path | str:
    """TraceML's launcher in its own venv (made once), or why it cannot be had, in one line."""
    launcher = VENV / "bin" / "traceml"
    pip = str(VENV / "bin" / "pip")
    steps = [] if launcher.exists() else [
        [sys.executable, "-m", "venv", "--clear", str(VENV)],
        [pip, "install", "-q", f"torch=={_torch()}", PACKAGE],
    ]  # fmt: skip
    loops = _loops()
    if loops:
        steps.append([pip, "install", "-q", *loops])
    deepspeed = _beside_version("deepspeed")
    if deepspeed is not None and not _importable("deepspeed"):
        steps.append([pip, "install", "-q", "--no-deps", "--no-build-isolation",
                      f"deepspeed=={deepspeed}", *DEEPSPEED_DEPS])  # fmt: skip
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "DS_BUILD_OPS": "0"})  # fmt: skip
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return f"cannot install {PACKAGE}: {' '.join(cmd[:3])} failed: {last}"
    return launcher if launcher.exists() else f"{PACKAGE} installed no `traceml` launcher"


def _loops() -> list[str]:
    """``name==version`` of each of ``LOOPS`` installed here and missing from TraceML's venv."""
    from importlib import metadata

    out = []
    for name in LOOPS:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if not _importable(name):
            out.append(f"{name.replace('_', '-')}=={version}")
    return out


def _importable(name: str) -> bool:
    """Whether TraceML's venv imports ``name``."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", f"import {name}"]
    return python.exists() and subprocess.run(probe, capture_output=True).returncode == 0


def _beside_version(name: str) -> str | None:
    """The version of ``name`` installed beside the project's venv (run.py's ``BESIDE``)."""
    from importlib import metadata

    from run import BESIDE

    folders = [str(d) for d in BESIDE.get(name, ()) if d.is_dir()]
    found = next(iter(metadata.distributions(name=name, path=folders)), None) if folders else None
    return found.version if found is not None else None


def _torch() -> str:
    import torch

    return torch.__version__.split("+")[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_arm(case: Case, folder: Path, launcher: Path) -> str:
    """The case's planted arm under ``traceml run``; its summary text (raises on failure)."""
    if case.netns is not None:
        return run_hosts_arm(case, folder, launcher)
    folder.mkdir(parents=True)
    arm = {"script": str(case.script), "args": [*case.args, *case.fault], "wrap": case.needs}
    (folder / "arm.json").write_text(json.dumps(arm))
    cmd = [*_launch(launcher, case.ranks), "--master-port", str(_free_port()),
           "--aggregator-port", str(_free_port()), "--args", "arm.json"]  # fmt: skip
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S)
    (folder / "traceml.out").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"traceml run exited {done.returncode}: {last}")
    return _summary(folder, done.stdout)


def _launch(launcher: Path, ranks: int) -> list[str]:
    return [str(launcher), "run", str(HERE / "traced.py"), "--nproc-per-node", str(ranks),
            "--logs-dir", "logs", "--run-name", "arm"]  # fmt: skip


def _summary(folder: Path, stdout: str) -> str:
    summary = folder / "logs" / "arm" / "final_summary.txt"
    return summary.read_text() if summary.exists() else stdout


def run_hosts_arm(case: Case, folder: Path, launcher: Path) -> str:
    """A multi-host case's planted arm: ``traceml run --nnodes`` on each namespaced host
    (netns.py: its path throttled as scalescope's arm), one rank a host, node 0 owning
    TraceML's aggregator (the others wait for it 15 s only: they start once it is ready), all
    in one logs folder (node 0 reserves it; as on storage every node sees); its summary."""
    import netns

    netns.write_arm(case, folder)
    port = str(_free_port())

    def command(node: int, endpoint: str, _address: str) -> tuple[list[str], Path]:
        master, master_port = endpoint.rsplit(":", 1)
        return [*_launch(launcher, 1), "--nnodes", str(case.netns.hosts), "--node-rank",
                str(node), "--master-addr", master, "--master-port", master_port,
                "--aggregator-host", master, "--aggregator-bind-host", "0.0.0.0",
                "--aggregator-port", port, "--args", "arm.json"], folder  # fmt: skip

    log = folder / "logs" / "arm" / "aggregator" / "process.stderr.log"
    netns.run_hosts(case, folder, True, command,
                    lambda: log.exists() and "Aggregator ready" in log.read_text())  # fmt: skip
    return _summary(folder, "")


def run_case(case: Case, work: Path, launcher: Path | str) -> ToolCell:
    """TraceML's cell for one case: what it names, or why it could not run, in one line."""
    if isinstance(launcher, str):
        return cannot(launcher)
    if case.synthetic is not None:
        return cannot("a generated run: there is no job for TraceML to run")
    if case.needs == "deepspeed" and not _importable("deepspeed"):
        return cannot("DeepSpeed did not install in TraceML's own environment")
    try:
        return judge(case, read(run_arm(case, work / f"{case.name}-traceml", launcher)))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        return cannot(str(err).splitlines()[0] if str(err) else type(err).__name__)
