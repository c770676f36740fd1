"""The metrics text written by scalescope against ``prometheus_client``'s own writers: the
same families read back by the library's parsers as the same samples in both formats, and
the text 0.0.4 byte for byte where no value needs Go's exponent (from 1e6 up, which the
library writes and scalescope leaves to the parsers); the Accept header picks the format."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from scalescope.launch.metrics.text import (
    COUNTER,
    GAUGE,
    OPENMETRICS_TYPE,
    TEXT_TYPE,
    Family,
    label_text,
    negotiate,
    openmetrics_text,
    prometheus_text,
)

SMALL = [
    ({"job": "j", "rank": "0", "Hostname": "c3"}, 12.0),
    ({"job": "j", "rank": "1", "Hostname": 'odd "host"\\\nname'}, 1.5e-7),
    ({"job": "j", "rank": "2", "Hostname": "c4"}, 999999.5),
    ({"job": "j", "rank": "3", "Hostname": "c4"}, float("inf")),
]
LARGE = [({"job": "j", "rank": "4", "Hostname": "c5"}, 1795855919.9137836),
         ({"job": "j", "rank": "5", "Hostname": "c5"}, 123456789012.0)]  # fmt: skip
ROWS = SMALL + LARGE


def ours(rows: list = ROWS, many: bool = False) -> list[Family]:
    """The families, their samples added one by one or (``many``) at once."""
    out = []
    for name, kind in (("scalescope_steps", COUNTER), ("scalescope_step_time_seconds", GAUGE)):
        family = Family(name, kind, "What it counts.\nSecond line, with a \\ in it.")
        if many:
            family.extend([label_text(lab.items()) for lab, _ in rows], [v for _, v in rows])
        for labels, value in rows if not many else ():
            family.add(label_text(labels.items()), value)
        out.append(family)
    return out


class Theirs:
    def __init__(self, rows: list) -> None:
        self.rows = rows

    def collect(self):
        counter = CounterMetricFamily(
            "scalescope_steps", "What it counts.\nSecond line, with a \\ in it.",
            labels=["job", "rank", "Hostname"],
        )  # fmt: skip
        gauge = GaugeMetricFamily(
            "scalescope_step_time_seconds", "What it counts.\nSecond line, with a \\ in it.",
            labels=["job", "rank", "Hostname"],
        )  # fmt: skip
        for labels, value in self.rows:
            counter.add_metric(list(labels.values()), value)
            gauge.add_metric(list(labels.values()), value)
        yield counter
        yield gauge


def registry(rows: list = ROWS) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(Theirs(rows))
    return reg


@pytest.mark.parametrize("many", [False, True])
def test_text_0_0_4_is_the_librarys_byte_for_byte(many: bool) -> None:
    assert prometheus_text(ours(SMALL, many)) == generate_latest(registry(SMALL))


@pytest.mark.parametrize("many", [False, True])
def test_text_0_0_4_reads_back_as_the_librarys(many: bool) -> None:
    mine = [(f.name, f.type, [(s.name, s.labels, s.value) for s in f.samples])
            for f in text_families(prometheus_text(ours(ROWS, many)).decode())]  # fmt: skip
    theirs = [(f.name, f.type, [(s.name, s.labels, s.value) for s in f.samples])
              for f in text_families(generate_latest(registry()).decode())]  # fmt: skip
    assert mine == theirs and sum(len(f[2]) for f in mine) == 2 * len(ROWS)


def parsed(text: bytes) -> list[tuple]:
    return [
        (f.name, f.type, f.documentation, s.name, tuple(sorted(s.labels.items())), s.value)
        for f in text_string_to_metric_families(text.decode())
        for s in f.samples
    ]


@pytest.mark.parametrize("many", [False, True])
def test_openmetrics_reads_back_as_the_librarys(many: bool) -> None:
    mine = parsed(openmetrics_text(ours(ROWS, many)))
    theirs = parsed(openmetrics_latest(registry()))
    assert mine == theirs and len(mine) == 2 * len(ROWS)
    assert openmetrics_text(ours()).endswith(b"# EOF\n")


def test_empty_label_values_are_left_out() -> None:
    assert label_text([("job", "j"), ("gpu", ""), ("rank", "0")]) == 'job="j",rank="0"'


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("", TEXT_TYPE),
        ("text/plain", TEXT_TYPE),
        (
            "application/openmetrics-text;version=1.0.0;q=0.5,"
            "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3",
            OPENMETRICS_TYPE,
        ),
        ("application/openmetrics-text; version=2.0.0", TEXT_TYPE),
    ],
)
def test_the_accept_header_picks_the_format(accept: str, expected: str) -> None:
    assert negotiate(accept)[0] == expected
