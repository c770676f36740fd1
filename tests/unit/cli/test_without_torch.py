"""An install without torch (``pip install scalescope``, no ``[run]`` extra) reads what was
recorded: ``report``, ``analyze``, ``compare``, ``whatif`` print what they print with torch,
``scalescope.load`` gives the same tables, every command's ``--help`` shows, and a command
that needs torch refuses in one line. The CLI runs in a fresh interpreter where a meta-path
finder refuses torch and torchvision (or, for an install with torch but not the extra,
pytorch-optimizer), as a machine without them does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from recorded_runs import RUNS
from typer.testing import CliRunner

import scalescope
from scalescope.cli import app

TRACES = RUNS.parent / "traces"
SCRIPT_RUN = RUNS / "straggler_data_2" / "run"
READING = {
    "report": ["report", str(SCRIPT_RUN)],
    "report pipeline": ["report", str(RUNS / "p2p_pipeline" / "run")],
    "analyze": ["analyze", str(TRACES / "kineto-ddp")],
    "compare": ["compare", str(SCRIPT_RUN), str(RUNS / "straggler_forward_2" / "run")],
    "whatif": ["whatif", str(SCRIPT_RUN)],
}
"""Script runs and traces: with torch too, nothing counts a model's FLOPs (seconds)."""
BENCH_RUN = RUNS / "compute_resnet50" / "run"
NEEDING_TORCH = {
    "run": ["run", "-n", "2", "train.py"],
    "bench": ["bench", "resnet18"],
    "tune": ["tune", "train.py"],
    "scale": ["scale", "--ranks", "1,2", "train.py"],
    "suite": ["suite"],
    "comm": ["comm"],
    "env": ["env"],
    "data pack": ["data", "pack", "images", "shards"],
    "data bench": ["data", "bench", "images"],
    "top --connect": ["top", "--connect", "127.0.0.1:29500", "--once"],
    "flush --connect": ["flush", "--connect", "127.0.0.1:29500"],
}

REFUSING = """
import json, sys

REFUSED = sys.argv[1].split(",")

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Refuse())
for module in REFUSED:
    try:
        __import__(module)
    except ModuleNotFoundError:
        continue
    raise SystemExit(f"{module} is still importable")

from typer.testing import CliRunner
from scalescope.cli import app

runner = CliRunner()
out = {}
for name, args in json.loads(sys.argv[2]).items():
    result = runner.invoke(app, args)
    out[name] = [result.exit_code, result.stdout, result.stderr]
"""
"""Runs the CLI's ``calls`` where the modules named are refused; each call's [exit code,
stdout, stderr] in ``out``."""

WITHOUT_TORCH = (
    REFUSING
    + """
import typer.main
import scalescope

def helps(command, path):
    yield path
    for sub in getattr(command, "commands", {}).values():
        yield from helps(sub, [*path, sub.name])

for path in helps(typer.main.get_command(app), []):
    result = runner.invoke(app, [*path, "--help"])
    out["help " + " ".join(path)] = [result.exit_code, result.stdout, result.stderr]

rec = scalescope.load(sys.argv[3])
out["load"] = {n: getattr(rec, n)().to_pylist() for n in ("steps", "collectives", "waits")}
out["torch imported"] = "torch" in sys.modules
print(json.dumps(out))
"""
)


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory) -> dict:
    """Each call's [exit code, stdout, stderr] in the interpreter without torch; an empty
    model cache, so nothing counted with torch before is read back."""
    cwd = tmp_path_factory.mktemp("no_torch")
    calls = {**READING, "report bench": ["report", str(BENCH_RUN)], **NEEDING_TORCH}
    return _refusing(WITHOUT_TORCH, "torch,torchvision", calls, cwd, str(SCRIPT_RUN))


def _refusing(code: str, refused: str, calls: dict, cwd, *args: str) -> dict:
    env = {"XDG_CACHE_HOME": str(cwd / "cache"), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-c", code, refused, json.dumps(calls), *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=os.environ | env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torch_stays_out(without_torch):
    assert without_torch["torch imported"] is False


@pytest.mark.parametrize("name", READING)
def test_reading_commands_print_what_they_print_with_torch(without_torch, name):
    code, stdout, stderr = without_torch[name]
    assert code == 0, stderr
    with_torch = CliRunner().invoke(app, READING[name], env={"COLUMNS": "100"})
    assert with_torch.exit_code == 0, with_torch.stderr
    assert stdout == with_torch.stdout
    assert len(stdout.splitlines()) > 10


def test_a_bench_run_reads_without_torch_and_says_what_it_could_not_judge(without_torch):
    code, stdout, stderr = without_torch["report bench"]
    assert code == 0, stderr
    needs = (
        "achieved FLOP/s: counting the model's FLOPs needs torch (pip install 'scalescope[run]')"
    )
    assert needs in stdout


def test_load_gives_the_tables_it_gives_with_torch(without_torch):
    rec = scalescope.load(SCRIPT_RUN)
    tables = {name: getattr(rec, name)().to_pylist() for name in without_torch["load"]}
    assert tables == without_torch["load"]
    assert tables["steps"] and tables["collectives"]


def test_every_command_shows_its_help(without_torch):
    helps = {k: v for k, v in without_torch.items() if k.startswith("help")}
    assert {"help run", "help report", "help data pack", "help whatif"} <= set(helps)
    for name, (code, stdout, stderr) in helps.items():
        assert code == 0 and "Usage:" in stdout, (name, stderr)


@pytest.mark.parametrize("name", NEEDING_TORCH)
def test_a_command_that_needs_torch_says_so_in_one_line(without_torch, name):
    code, stdout, stderr = without_torch[name]
    assert code != 0
    assert stderr.splitlines() == [
        f"error: scalescope {name} needs torch: pip install 'scalescope[run]'"
    ]
    assert stdout == ""


def test_a_workload_without_the_rest_of_the_run_extra_names_what_is_missing(tmp_path):
    """torch already installed, without the extra: the built-in workloads import
    pytorch-optimizer (recipes' LARS), so bench names it; run needs torch alone."""
    calls = {"bench": NEEDING_TORCH["bench"], "run": ["run", "-n", "2", "no_such.py"]}
    out = _refusing(REFUSING + "\nprint(json.dumps(out))\n", "pytorch_optimizer", calls, tmp_path)
    code, _stdout, stderr = out["bench"]
    assert code != 0
    assert stderr.splitlines() == [
        "error: scalescope bench needs pytorch-optimizer: pip install 'scalescope[run]'"
    ]
    assert out["run"][2].splitlines() == ["error: script not found: no_such.py"]
