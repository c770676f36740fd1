"""The formats of events/units.py, every byte size and duration the tool writes: each kept
apart (decimal vs binary, a cell vs a sentence), with its edges (0, rounding at a unit's
boundary, negatives, the largest unit)."""

from __future__ import annotations

import pytest

from scalescope.events.units import (
    fmt_bytes,
    fmt_bytes_brief,
    fmt_bytes_decimal,
    fmt_bytes_exact,
    fmt_bytes_significant,
    fmt_clock,
    fmt_elapsed,
    fmt_mib,
    fmt_ms,
    fmt_offset_ms,
    fmt_seconds,
    fmt_us,
)


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [
        (0, "0 B"),
        (850, "850 B"),
        (999.4, "999 B"),
        (999.5, "1.00 kB"),
        (999.6, "1.00 kB"),
        (12_345, "12.3 kB"),
        (110e3, "110 kB"),
        (705_600, "706 kB"),
        (1_234_567, "1.23 MB"),
        (38_535_168, "38.5 MB"),
        (999_700_000, "1.00 GB"),
        (2.5e9, "2.50 GB"),
        (4.2e12, "4,200 GB"),
        (-850, "-850 B"),
        (-12_345, "-12.3 kB"),
    ],
)
def test_decimal_sizes_read_in_three_figures(nbytes: float, words: str) -> None:
    assert fmt_bytes_decimal(nbytes) == words


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (999.5, "1000 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (4 * 2**20, "4.00 MiB"),
        (3 * 2**30, "3.00 GiB"),
        (2**50, "1024.00 TiB"),
        (-2048, "-2.00 KiB"),
    ],
)
def test_binary_sizes_in_a_cell_have_two_decimals(nbytes: float, words: str) -> None:
    assert fmt_bytes(nbytes) == words


def test_exact_bytes_stand_beside_the_readable_size() -> None:
    assert fmt_bytes_exact(0) == "0 B"
    assert fmt_bytes_exact(512) == "512 B"
    assert fmt_bytes_exact(4_194_304) == "4,194,304 B (4.00 MiB)"
    assert fmt_bytes_exact(1536.5) == "1,536.5 B (1.50 KiB)"
    assert fmt_bytes_exact(-4096) == "-4,096 B (-4.00 KiB)"


@pytest.mark.parametrize(
    ("nbytes", "brief", "significant"),
    [
        (0, "0 B", "0 B"),
        (1023, "1023 B", "1023 B"),
        (1024, "1.0 KiB", "1 KiB"),
        (1536, "1.5 KiB", "1.5 KiB"),
        (341_000, "333.0 KiB", "333 KiB"),
        (4 * 2**20, "4.0 MiB", "4 MiB"),
        (25_000_000, "23.8 MiB", "23.8 MiB"),
        (3 * 2**30, "3.0 GiB", "3 GiB"),
    ],
)
def test_binary_sizes_in_a_sentence(nbytes: int, brief: str, significant: str) -> None:
    assert fmt_bytes_brief(nbytes) == brief
    assert fmt_bytes_significant(nbytes) == significant


def test_live_memory_in_whole_mib() -> None:
    assert fmt_mib(None) == "-"
    assert fmt_mib(0) == "0 MiB"
    assert fmt_mib(3 * 2**30) == "3,072 MiB"
    assert fmt_mib(2**20 + 2**19 - 1) == "1 MiB"


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(None, "?"), (0, "0.0 s"), (4.24, "4.2 s"), (9.94, "9.9 s"), (10, "10 s"), (75.4, "75 s")],
)
def test_a_hangs_seconds(seconds: float | None, words: str) -> None:
    assert fmt_seconds(seconds) == words


def test_milliseconds_and_microseconds() -> None:
    assert fmt_ms(None) == "-"
    assert fmt_ms(1234.56) == "1,234.6"
    assert fmt_ms(0.5, 3) == "0.500"
    assert fmt_us(0) == "0.0 µs"
    assert fmt_us(12_345) == "12.3 µs"
    assert fmt_offset_ms(0) == "+0.000 ms"
    assert fmt_offset_ms(-1_234_567) == "-1.235 ms"


def test_clocks_round_in_progress_lines_and_cut_in_the_live_header() -> None:
    assert fmt_clock(0) == "0:00"
    assert fmt_clock(59.6) == "1:00"
    assert fmt_clock(3599.4) == "59:59"
    assert fmt_clock(3725) == "1:02:05"
    assert fmt_elapsed(None) == "-"
    assert fmt_elapsed(0) == "0:00:00"
    assert fmt_elapsed(62.9) == "0:01:02"
    assert fmt_elapsed(3725) == "1:02:05"
