"""Slurm hostlists (``node[01-03,07],gpu5``) and the first host of a launcher's node list."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import cast


def first_host(nodelist: str, path: str | None) -> str | None:
    """Expanded with ``scontrol show hostnames`` when on ``path``, else with our own parser."""
    if not any(char in nodelist for char in "[, "):
        return nodelist
    scontrol = shutil.which("scontrol", path=path) if path else None
    if scontrol is not None:
        try:
            done = subprocess.run(
                [scontrol, "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.split():
            return done.stdout.split()[0]
    return next(iter_hostlist(nodelist), None)


_Range = tuple[int, int, int]
"""(low, high, width): ``07-10`` is (7, 10, 2)."""
_Part = str | tuple[_Range, ...]


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist: ``"node[01-03,07]"`` -> node01, node02, node03, node07.

    Zero padding follows the width of each range's low end. Several bracket groups in one name
    expand as a cartesian product in Slurm's order (``rack[1-2]-n[1-2]`` -> rack1-n1, rack1-n2,
    rack2-n1, rack2-n2). Text after the last bracket (``c[1-2]-ib``) is accepted, as
    python-hostlist does, though Slurm itself refuses it. Raises ValueError on malformed text:
    unbalanced or nested brackets, empty or reversed ranges, non-digits in a range.
    """
    return list(iter_hostlist(text))


def iter_hostlist(text: str) -> Iterator[str]:
    """Like :func:`expand_hostlist`, lazily: the whole text is checked before the first name."""
    patterns = [_parse_name(item) for item in _split_hostlist(text)]

    def names() -> Iterator[str]:
        for parts in patterns:
            yield from _expand(parts)

    return names()


def _split_hostlist(text: str) -> list[str]:
    """Split at commas and blanks outside brackets; empty items are skipped, as Slurm does."""
    items, current, depth = [], "", 0
    for char in text:
        if char == "[":
            if depth:
                raise ValueError(f"hostlist {text!r}: nested '['")
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError(f"hostlist {text!r}: ']' without '['")
            depth = 0
        elif depth == 0 and (char == "," or char.isspace()):
            items.append(current)
            current = ""
            continue
        current += char
    if depth:
        raise ValueError(f"hostlist {text!r}: '[' without ']'")
    return [item for item in [*items, current] if item]


def _parse_name(item: str) -> list[_Part]:
    """``rack[1-2]-n[01,03]`` -> ["rack", ((1, 2, 1),), "-n", ((1, 1, 2), (3, 3, 2))]."""
    parts: list[_Part] = []
    pos = 0
    for match in re.finditer(r"\[([^\]]*)\]", item):
        if match.start() > pos:
            parts.append(item[pos : match.start()])
        parts.append(tuple(_parse_range(spec, item) for spec in match.group(1).split(",")))
        pos = match.end()
    if pos < len(item):
        parts.append(item[pos:])
    return parts


def _parse_range(spec: str, item: str) -> _Range:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec.strip())
    if match is None:
        raise ValueError(f"hostlist {item!r}: {spec!r} is not a number or a range like 01-04")
    low, high = match.group(1), match.group(2) or match.group(1)
    if int(high) < int(low):
        raise ValueError(f"hostlist {item!r}: range {spec!r} runs backwards")
    return int(low), int(high), len(low)


def _expand(parts: list[_Part]) -> Iterator[str]:
    """All names of one pattern, nested the way Slurm's ``_push_range_list`` recurses: the
    last bracket group innermost, the others from the second-last outwards (for two groups:
    the first outermost)."""
    groups = [i for i, part in enumerate(parts) if not isinstance(part, str)]
    return _fill(parts, groups[-2::-1] + groups[-1:])


def _fill(parts: list[_Part], order: list[int]) -> Iterator[str]:
    if not order:
        yield "".join(part for part in parts if isinstance(part, str))
        return
    slot = order[0]
    for value in _range_values(cast(tuple[_Range, ...], parts[slot])):
        yield from _fill([*parts[:slot], value, *parts[slot + 1 :]], order[1:])


def _range_values(ranges: tuple[_Range, ...]) -> Iterator[str]:
    for low, high, width in ranges:
        for number in range(low, high + 1):
            yield str(number).zfill(width)
