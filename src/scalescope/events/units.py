"""Byte sizes and durations as words: every formatter of the package, in one place.

Each format is kept where a reader meets it, so they differ on purpose:

- binary units (KiB, MiB: 1,024s) for what the tool measures itself (tensors, buckets, a
  hang's messages, memory), and decimal units (kB, MB: 1,000s) for the findings whose
  evidence counts files and copies in kB and MB;
- a table cell shows two decimals (``fmt_bytes``), a sentence fewer (``fmt_bytes_brief``,
  ``fmt_bytes_significant``, ``fmt_bytes_decimal``);
- durations read as seconds in a hang's sentences, as a clock in progress lines;
- ranks and steps as ranges (``0-76, 78-1023``), or the first few of them.

Layer 0 (events) so that every layer may import it: the diagnosis writes its sentences with
it, and the report draws with it without calling the layers whose results it draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

UNKNOWN = "-"
"""A live table's cell when the rank has not said yet."""


def fmt_bytes(nbytes: float) -> str:
    """Binary units with two decimals, whole bytes below 1 KiB: ``512 B``, ``1.50 KiB``,
    ``4.00 MiB``; TiB is the largest unit."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_bytes_exact(nbytes: float) -> str:
    """Exact bytes beside the readable size: ``4,194,304 B (4.00 MiB)``; below 1 KiB the
    bytes alone (``512 B``)."""
    if float(nbytes).is_integer() and abs(nbytes) < 1024:
        return f"{nbytes:,.0f} B"
    exact = f"{nbytes:,.0f}" if float(nbytes).is_integer() else f"{nbytes:,.1f}"
    return f"{exact} B ({fmt_bytes(nbytes)})"


def fmt_bytes_brief(nbytes: int) -> str:
    """Binary units with one decimal, for a sentence: ``4.0 MiB``, ``1.5 KiB``, ``512 B``.
    A count of bytes, never negative (a negative one is written as its bytes)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} B"


def fmt_bytes_significant(nbytes: int) -> str:
    """Binary units in three significant figures, trailing zeros dropped: ``4 MiB``,
    ``1.5 KiB``, ``333 KiB``, ``512 B`` (a slow link's message sizes, which are mostly powers
    of two). Never negative, like ``fmt_bytes_brief``."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def fmt_bytes_decimal(nbytes: float) -> str:
    """Decimal units, three figures: ``850 B``, ``12.3 kB``, ``110 kB``, ``1.23 MB``; GB is
    the largest unit (``4,200 GB``). The evidence of the findings that name a size counts kB
    and MB (1,000s), so their words do too."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 999.5 or unit == "GB":
            break
        value /= 1000
    if unit == "B":
        return f"{value:.0f} B"
    digits = 2 if abs(value) < 9.995 else 1 if abs(value) < 99.95 else 0
    return f"{value:,.{digits}f} {unit}"


def fmt_mib(nbytes: int | None) -> str:
    """Whole MiB with thousands separators (a live table's memory column): ``1,024 MiB``."""
    return UNKNOWN if nbytes is None else f"{nbytes / 2**20:,.0f} MiB"


def fmt_seconds(seconds: float | None) -> str:
    """Seconds for a hang's sentences: one decimal below 10 s (``4.2 s``), whole above
    (``75 s``); ``?`` when unknown."""
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def fmt_ms(ms: float | None, digits: int = 1) -> str:
    """Milliseconds as a bare figure, for a column whose header says ms: ``1,234.5``."""
    return UNKNOWN if ms is None else f"{ms:,.{digits}f}"


def fmt_us(ns: float) -> str:
    """Nanoseconds as microseconds with one decimal: ``12.3 µs``."""
    return f"{ns / 1e3:,.1f} µs"


def fmt_offset_ms(ns: float) -> str:
    """A signed clock offset in milliseconds, to the microsecond: ``+1.234 ms``."""
    return f"{ns / 1e6:+,.3f} ms"


def fmt_clock(seconds: float) -> str:
    """Time spent or left in a progress line, rounded to the second: ``1:00``, ``1:02:05``
    (minutes and seconds, hours only when there are some)."""
    s = int(round(seconds))
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def fmt_elapsed(seconds: float | None) -> str:
    """A live run's elapsed time, always with hours and cut to the second: ``0:01:02``."""
    if seconds is None:
        return UNKNOWN
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def number_ranges(values: Iterable[int]) -> str:
    """``0-76, 78-1023``: consecutive ranks or steps as ranges, so a thousand read in a line."""
    runs: list[list[int]] = []
    for v in sorted(values):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def first_few(values: Sequence[int], n: int = 8) -> str:
    """The first ``n`` in their order, ``...`` after them when there are more: ``0, 3, ...``."""
    return ", ".join(map(str, values[:n])) + (", ..." if len(values) > n else "")
