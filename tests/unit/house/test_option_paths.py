"""An option can be followed from its flag to its use: ``--hang-after`` is declared on the hang
watch's own options class, and from the command that takes it to the watch it goes through
six files, each once, handed on whole (no file on the way names it). Checked on the source:
the calls that hand it on from one file to the next, and the files that name it at all."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parents[3] / "src" / "scalescope"

DECLARED = ("launch/options/groups.py", "HangOptions", "after_s")
"""``--hang-after`` is the field ``after_s`` of ``HangOptions``, the class the watch reads; the
field's docstring is its help, ``__post_init__`` its check. cli/params.py generates every
command's parameters from such fields without naming any of them."""
CALLS = (
    ("cli/training.py", "run", "run"),
    ("commands/run.py", "run", "start_or_plan"),
    ("api/launching.py", "start_or_plan", "start"),
    ("launch/run/session.py", "start", "execute"),
    ("launch/run/runner.py", "execute", "HangWatch"),
)
"""(file, function, call): the function hands the options on by calling ``call``, a function
or class of the next file (or by handing it to a call). ``cli/training.py``'s ``run`` gets one
``RunCommand`` holding them; ``api/launching.py`` puts ``HangOptions`` in the spec; the
launcher hands the spec to the watch; ``launch/watch/hang.py`` uses it."""
USED = ("launch/watch/hang.py", "HangWatch", "threshold_s")
BRANCH = ("launch/run/session.py", "start", "execute_rank", "launch/run/external.py")
"""Under srun or mpirun the session hands the spec to the external launch instead, which
starts the same watch: a path of the same length through a different fifth file."""
CARRIERS = re.compile(r"\bhang_after\b|\bafter_s\b|\bHangOptions\b|\bspec\.hang\b")
"""The names the option travels under: the flag's field, its options' class and the spec's
attribute."""


def tree(relative: str) -> ast.Module:
    return ast.parse((SRC / relative).read_text(encoding="utf-8"))


def function(module: ast.AST, name: str) -> ast.FunctionDef | ast.ClassDef:
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
    return [*(f for f, _, _ in CALLS), USED[0]]


def test_the_path_is_six_files_each_once() -> None:
    files = path_files()
    assert len(files) <= 6 and len(set(files)) == len(files), files
    branch = [*files[:4], BRANCH[3], USED[0]]
    assert len(branch) <= 6 and len(set(branch)) == len(branch), branch


def test_the_flag_is_declared_on_the_watchs_options() -> None:
    file, cls, name = DECLARED
    options = function(tree(file), cls)
    declaration = next(
        n for n in options.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == name
    )
    assert "'--hang-after'" in ast.unparse(declaration)
    assert "--hang-after must be > 0" in ast.unparse(function(options, "__post_init__"))
    watch = tree(USED[0])
    imports = [n for n in ast.walk(watch) if isinstance(n, ast.ImportFrom)]
    assert any(n.module == "scalescope.launch.options.groups" for n in imports)


def test_each_file_hands_it_to_the_next() -> None:
    hops = [*CALLS, (USED[0], None, None)]
    for (file, name, call), (next_file, _, _) in zip(hops, hops[1:], strict=False):
        assert call in called(function(tree(file), name)), f"{file}: {name} does not call {call}"
        function(tree(next_file), call)  # defined there
    branch_file, name, call, next_file = BRANCH
    assert call in called(function(tree(branch_file), name))
    function(tree(next_file), call)
    assert "HangWatch" in called(tree(next_file))


def test_the_watch_uses_it() -> None:
    file, cls, method = USED
    watch = function(tree(file), cls)
    assert "after_s" in ast.unparse(function(watch, method))


def test_no_other_file_names_it() -> None:
    naming = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if CARRIERS.search(p.read_text(encoding="utf-8"))
    }
    allowed = {DECLARED[0], *path_files(), BRANCH[3]}
    assert naming <= allowed, sorted(naming - allowed)
    assert {"cli/training.py", "commands/run.py", "api/launching.py"}.isdisjoint(naming)
