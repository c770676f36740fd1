"""The metrics endpoint's text: families of samples written in Prometheus' text format 0.0.4
or in OpenMetrics 1.0.0, as ``prometheus_client`` writes them.

Written here rather than by ``prometheus_client.generate_latest``: at 1,024 ranks a scrape
holds some 12,000 samples, and the library spends ~12 µs on each (a Sample object, its labels
sorted, escaped and joined again at every scrape: 149 ms of the watch's CPU per scrape,
benchmarks/metrics_scrape.py). Here a rank's label text is escaped once for the run, a
sample's line is that text and its value, and the values of a family are formatted in one
pass. The pushes are sent, and the text parsed in the tests, by ``prometheus_client``; the
tests compare both writers' output.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

COUNTER, GAUGE = "counter", "gauge"
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass
class Family:
    """One metric: its name (a counter's without ``_total``), kind, help, and its samples as
    the text both formats share (lines of ``name{labels} value``)."""

    name: str
    kind: str
    help: str
    lines: list[str] = field(default_factory=list)

    @property
    def sample_name(self) -> str:
        return self.name + "_total" if self.kind == COUNTER else self.name

    def add(self, labels: str, value: float) -> None:
        """One sample (``labels`` already escaped: ``label_text``)."""
        name = self.sample_name
        text = format_values(np.array([value]))[0]
        self.lines.append(f"{name}{{{labels}}} {text}\n" if labels else f"{name} {text}\n")

    def extend(self, labels: Sequence[str], values: np.ndarray) -> None:
        """Many samples at once: each label text with its value, in one string."""
        if not labels:
            return
        name = self.sample_name
        prefixes = [f"{name}{{{text}}} " for text in labels]
        self.lines.append("\n".join(map(operator.add, prefixes, format_values(values))) + "\n")


def format_values(values: np.ndarray) -> list[str]:
    """Each value's ``repr``, inf and NaN as ``floatToGoString`` writes them. (The library
    writes values from 1e6 up with Go's exponent, ``1.7958559199e+09``; parsers read both
    the same, and the exponent costs a string operation per value.)"""
    floats = np.asarray(values, dtype=np.float64)
    out = list(map(repr, floats.tolist()))
    for i in np.flatnonzero(~np.isfinite(floats)).tolist():
        v = floats[i]
        out[i] = "NaN" if np.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    return out


def escape(value: str) -> str:
    """A label value as both formats quote it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(pairs: Iterable[tuple[str, str]]) -> str:
    """``name="value",…`` of the pairs whose value is not empty, sorted by name as
    ``prometheus_client`` writes them."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(pairs) if v != "")


def joined(*texts: str) -> str:
    """Label texts joined (any may be empty)."""
    return ",".join(t for t in texts if t)


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def prometheus_text(families: Iterable[Family]) -> bytes:
    """Prometheus' text format 0.0.4 (``prometheus_client.generate_latest``'s layout: a
    counter's family is named with its ``_total``)."""
    out: list[str] = []
    for family in families:
        name = family.sample_name
        out.append(f"# HELP {name} {_help(family.help)}\n# TYPE {name} {family.kind}\n")
        out.extend(family.lines)
    return "".join(out).encode()


def openmetrics_text(families: Iterable[Family]) -> bytes:
    """OpenMetrics 1.0.0: a counter's family without ``_total``, its samples with it; the
    text ends with ``# EOF``."""
    out: list[str] = []
    for family in families:
        help_text = _help(family.help).replace('"', '\\"')
        out.append(f"# HELP {family.name} {help_text}\n# TYPE {family.name} {family.kind}\n")
        out.extend(family.lines)
    out.append("# EOF\n")
    return "".join(out).encode()


def negotiate(accept: str) -> tuple[str, bool]:
    """The content type answering an ``Accept`` header, and whether it is OpenMetrics:
    Prometheus asks for ``application/openmetrics-text``; anything else gets 0.0.4."""
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media != "application/openmetrics-text":
            continue
        version = next((p.split("=", 1)[1] for p in params if p.startswith("version=")), "")
        if version in ("", "1.0.0", "0.0.1"):
            return OPENMETRICS_TYPE, True
    return TEXT_TYPE, False
