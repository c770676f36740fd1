"""An option can be followed from its flag to its use: ``--hang-after`` goes through at most six
files, each once. Checked on the source: the calls that hand it on from one file to the
next, and the files that name it at all (no seventh file handles it on the side)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parents[3] / "src" / "scalescope"

DECLARED = "cli/launch_options.py"
"""Declares ``--hang-after`` (``hang_after``) and hands every launch option on as one typed
``LaunchFlags`` to the commands it decorates."""
CALLS = (
    ("cli/training.py", "run", "run"),
    ("commands/run.py", "start_or_plan", "start"),
    ("launch/session.py", "start", "execute"),
    ("launch/runner.py", "execute", "HangWatch"),
)
"""(file, function, call): the function hands the option on by calling ``call``, a function
or class of the next file (or by handing it to a call). ``cli/training.py``'s ``run`` is the
command --hang-after reaches first; ``commands/run.py`` reads ``flags.hang_after`` into the
spec's HangOptions (and checks it); the launcher hands the spec to the watch;
``launch/hang_watch.py`` uses it."""
USED = ("launch/hang_watch.py", "HangWatch", "threshold_s")
BRANCH = ("launch/session.py", "start", "execute_rank", "launch/external.py")
"""Under srun or mpirun the session hands the spec to the external launch instead, which
starts the same watch: a path of the same length through a different fifth file."""
CARRIERS = re.compile(r"\bhang_after\b|\bafter_s\b|\bHangOptions\b|\bspec\.hang\b")
"""The names the option travels under: the flag's field, the watch's field, its options'
class and the spec's attribute."""


def tree(relative: str) -> ast.Module:
    return ast.parse((SRC / relative).read_text(encoding="utf-8"))


def function(module: ast.Module, name: str) -> ast.FunctionDef | ast.ClassDef:
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"no {name}")


def called(node: ast.AST) -> set[str]:
    """What ``node`` calls, or hands to a call (``drive(journey.run, options)``)."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            for f in (call.func, *call.args):
                names.add(f.id if isinstance(f, ast.Name) else getattr(f, "attr", ""))
    return names


def path_files() -> list[str]:
    return [DECLARED, *(f for f, _, _ in CALLS), USED[0]]


def test_the_path_is_six_files_each_once() -> None:
    files = path_files()
    assert len(files) <= 6 and len(set(files)) == len(files), files
    branch = [*files[:4], BRANCH[3], USED[0]]
    assert len(branch) <= 6 and len(set(branch)) == len(branch), branch


def test_the_flag_reaches_the_command_as_launch_flags() -> None:
    declared = (SRC / DECLARED).read_text(encoding="utf-8")
    assert '"--hang-after"' in declared and '"hang_after":' in declared
    assert "LaunchFlags" in called(function(tree(DECLARED), "with_launch_options"))
    command = function(tree(CALLS[0][0]), CALLS[0][1])
    decorators = {ast.unparse(d).split("(")[0] for d in command.decorator_list}
    assert "with_launch_options" in decorators


def test_each_file_hands_it_to_the_next() -> None:
    hops = [*CALLS, (USED[0], None, None)]
    for (file, name, call), (next_file, _, _) in zip(hops, hops[1:], strict=False):
        assert call in called(function(tree(file), name)), f"{file}: {name} does not call {call}"
        function(tree(next_file), call)  # defined there
    branch_file, name, call, next_file = BRANCH
    assert call in called(function(tree(branch_file), name))
    function(tree(next_file), call)
    assert "HangWatch" in called(tree(next_file))


def test_the_watch_uses_it_and_nothing_runs_on_the_way() -> None:
    """The watch reads ``after_s``; its options' class runs no code of the watch's file
    when commands/run.py builds it (the check of the value is there)."""
    file, cls, method = USED
    watch = function(tree(file), cls)
    assert "after_s" in ast.unparse(function(watch, method))
    options = function(tree(file), "HangOptions")
    assert not [n for n in options.body if isinstance(n, ast.FunctionDef)]
    run = (SRC / "commands/run.py").read_text(encoding="utf-8")
    assert "flags.hang_after" in run and "HangOptions(after_s=flags.hang_after" in run


def test_no_other_file_names_it() -> None:
    naming = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if CARRIERS.search(p.read_text(encoding="utf-8"))
    }
    assert naming <= {*path_files(), BRANCH[3]}, sorted(naming - {*path_files(), BRANCH[3]})
