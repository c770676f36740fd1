"""docs/architecture.md names every module's room: its module index has one line per room
(``- `report/views/`: `comm`, `compare`, …``), and each source file of the package (Python
modules and the probe's C++ hooks) is named on its room's line, and nothing else is."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[3]
SRC = ROOT / "src" / "scalescope"
DOC = ROOT / "docs" / "architecture.md"
SOURCES = ("*.py", "*.cpp")

ROOM_LINE = re.compile(r"^- `(?P<room>[a-z_/]+/)`: (?P<names>.+)$")


def rooms_in_source() -> dict[str, set[str]]:
    """Each folder of the package (``report/views/``; the package itself is ``scalescope/``)
    with the names of its source files, without suffix; ``__init__``/``__main__`` left out."""
    found: dict[str, set[str]] = {}
    for pattern in SOURCES:
        for path in SRC.rglob(pattern):
            if path.stem in ("__init__", "__main__") or "egg-info" in str(path):
                continue
            folder = path.parent.relative_to(SRC).as_posix()
            room = "scalescope/" if folder == "." else f"{folder}/"
            found.setdefault(room, set()).add(path.stem)
    return found


def rooms_in_doc(text: str) -> dict[str, set[str]]:
    section = text.split("\n## Module index\n", 1)
    assert len(section) == 2, "docs/architecture.md has no '## Module index' section"
    body = section[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in body.splitlines():
        match = ROOM_LINE.match(line)
        if match:
            names = re.findall(r"`([a-z_0-9]+)`", match["names"])
            found.setdefault(match["room"], set()).update(names)
    return found


def test_every_module_is_named_in_its_room():
    doc = rooms_in_doc(DOC.read_text(encoding="utf-8"))
    missing = [
        f"{room}{name}"
        for room, names in sorted(rooms_in_source().items())
        for name in sorted(names - doc.get(room, set()))
    ]
    assert not missing, f"docs/architecture.md's module index lacks: {', '.join(missing)}"


def test_the_index_names_no_module_that_is_gone():
    source = rooms_in_source()
    stale = [
        f"{room}{name}"
        for room, names in sorted(rooms_in_doc(DOC.read_text(encoding="utf-8")).items())
        for name in sorted(names - source.get(room, set()))
    ]
    assert not stale, f"docs/architecture.md's module index names what is gone: {stale}"


def test_a_module_left_out_is_found():
    text = "# A\n\n## Module index\n\n- `events/`: `table`\n\n## Decisions\n- `probe/`: `x`\n"
    assert rooms_in_doc(text) == {"events/": {"table"}}
