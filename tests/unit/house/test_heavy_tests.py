"""Every test marked ``heavy`` (left out of CI, run by ``make bench``) is named in
docs/testing.md's table with what covers it in CI, and the table names no test that is not
heavy: a live check cannot leave CI unseen. Read from the sources (ast), not by collecting."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TABLE_HEADING = "### Issue 37, fourth step: the heavy live runs in `make bench`"


def _says_heavy(node: ast.AST, heavy_names: set[str]) -> bool:
    """``pytest.mark.heavy`` in this expression, or a module-level name that holds it."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "heavy":
            return True
        if isinstance(sub, ast.Name) and sub.id in heavy_names:
            return True
    return False


def heavy_tests(path: Path) -> set[str]:
    """The test functions of ``path`` marked heavy, whole or for some of their cases."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    heavy_names: set[str] = set()
    whole_module = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and _says_heavy(node.value, set()):
            targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
            whole_module |= "pytestmark" in targets
            heavy_names |= targets - {"pytestmark"}
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marked = any(_says_heavy(d, heavy_names) for d in node.decorator_list)
            if whole_module or marked:
                found.add(node.name)
    return found


def documented() -> set[str]:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    assert TABLE_HEADING in text, "docs/testing.md lost the table of heavy tests"
    section = text.split(TABLE_HEADING, 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| test")]
    return {name for row in rows for name in re.findall(r"`(test_\w+)", row[2])}


def test_every_heavy_test_is_in_the_table_and_every_row_is_heavy() -> None:
    marked = {name for p in (ROOT / "tests").rglob("test_*.py") for name in heavy_tests(p)}
    assert marked, "no test is marked heavy: the reader of the marks is broken"
    table = documented()
    assert sorted(marked - table) == [], "heavy tests docs/testing.md does not name"
    assert sorted(table - marked) == [], "named heavy in docs/testing.md, not marked"


def test_the_reader_finds_each_way_of_marking(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text(
        "import pytest\n"
        "CASES = ['a', pytest.param('b', marks=pytest.mark.heavy)]\n"
        "@pytest.mark.heavy\n@pytest.mark.timeout(9)\ndef test_decorated(): ...\n"
        "@pytest.mark.parametrize('c', CASES)\ndef test_some_cases(c): ...\n"
        "@pytest.mark.parametrize('c', [pytest.param(1, marks=pytest.mark.heavy)])\n"
        "def test_inline_case(c): ...\n"
        "def test_light(): ...\n"
    )
    assert heavy_tests(source) == {"test_decorated", "test_some_cases", "test_inline_case"}
    source.write_text("import pytest\npytestmark = [pytest.mark.heavy]\ndef test_a(): ...\n")
    assert heavy_tests(source) == {"test_a"}
