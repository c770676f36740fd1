"""The one size formatter of the findings' words (diagnose/findings.fmt_size): decimal
units, as the evidence beside them counts kB and MB."""

from __future__ import annotations

import pytest

from scalescope.diagnose.findings import fmt_size


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [
        (0, "0 B"),
        (850, "850 B"),
        (999.4, "999 B"),
        (999.6, "1.00 kB"),
        (12_345, "12.3 kB"),
        (110e3, "110 kB"),
        (705_600, "706 kB"),
        (1_234_567, "1.23 MB"),
        (38_535_168, "38.5 MB"),
        (999_700_000, "1.00 GB"),
        (4.2e12, "4,200 GB"),
    ],
)
def test_sizes_read_in_three_figures(nbytes: float, words: str) -> None:
    assert fmt_size(nbytes) == words
