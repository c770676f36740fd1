"""A watch of the launcher that stops on an error says so: the log, RUN_DIR/watches.json and
`top` on the run directory, the store and `top --connect`, and the metrics'
``scalescope_watch_up`` gauge (events/watch_stops.py, launch/watch/hang.py)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from torch.distributed import TCPStore

from scalescope.events.watch_stops import read_stops, record_stop, stop_line
from scalescope.launch.channel.store import Channel
from scalescope.launch.metrics.endpoint import MetricsEndpoint
from scalescope.launch.options.groups import HangOptions
from scalescope.launch.watch.hang import HangWatch
from scalescope.launch.watch.sources import FileSource
from scalescope.live.store_view import StoreTop
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import StoreFrame
from scalescope.report.views.live import live_document

KEY, JOB = b"k" * 32, b"j" * 32


class Broken(Exception):
    pass


def watch_up(endpoint: MetricsEndpoint) -> dict[str, float]:
    text = endpoint.collector.text().decode()
    return {
        s.labels["watch"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "scalescope_watch_up"
    }


def test_a_slowdown_watch_that_raises_is_down_and_the_hang_watch_runs_on(
    tmp_path: Path, capsys
) -> None:
    endpoint = MetricsEndpoint("job1")
    watch = HangWatch(tmp_path, 2, HangOptions(after_s=60.0), metrics=endpoint)
    assert watch_up(endpoint) == {"hang": 1, "slowdown": 1}

    def fail(*_args: object) -> list:
        raise Broken("no baseline")

    watch.slowdown.observe = fail  # type: ignore[union-attr]
    watch.watch_speed({})
    assert watch.slowdown is None
    assert watch_up(endpoint) == {"hang": 1, "slowdown": 0}
    assert read_stops(tmp_path) == {"slowdown": "Broken: no baseline"}
    assert (
        "scalescope: the slowdown watch stopped: Broken('no baseline')" in capsys.readouterr().err
    )


def test_a_hang_watch_that_raises_is_down(tmp_path: Path) -> None:
    endpoint = MetricsEndpoint("job1")
    options = HangOptions(after_s=60.0, slowdown_pct=0.0)
    watch = HangWatch(tmp_path, 1, options, FileSource(tmp_path, 1), metrics=endpoint)

    def fail(_states: object) -> None:
        raise KeyError(3)

    watch.watch_speed = fail  # type: ignore[method-assign]
    watch.start()
    watch.join(timeout=10.0)
    assert not watch.is_alive()
    assert watch_up(endpoint) == {"hang": 0}
    assert read_stops(tmp_path) == {"hang": "KeyError: 3"}


def test_top_on_the_run_directory_shows_the_stop(tmp_path: Path) -> None:
    from scalescope.analyze.live import LiveSnapshot
    from scalescope.report.document import Line
    from scalescope.report.subjects import LiveExtras

    record_stop(tmp_path, "hang", "KeyError: 3")
    record_stop(tmp_path, "slowdown", "ValueError: nan")
    lines = [stop_line(w, e) for w, e in read_stops(tmp_path).items()]
    snap = LiveSnapshot("run", "running", 1, 1.0, 0, None, None, (), None, None)
    doc = live_document(snap, LiveExtras(stopped=lines))
    said = [b.text for b in doc.blocks if isinstance(b, Line)]
    assert "the hang watch stopped on an error (KeyError: 3): it names nothing from here on" in said
    assert any(t.startswith("the slowdown watch stopped on an error (ValueError") for t in said)
    assert read_stops(tmp_path / "nowhere") == {}


def test_the_stop_reaches_top_connect_through_the_store(tmp_path: Path) -> None:
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    owner = Channel(server, key=KEY, job=JOB)
    owner.put_world(1)
    top = StoreTop(Channel(TCPStore("127.0.0.1", server.port, is_master=False), key=KEY))
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(top.frame())
    assert "watch stopped" not in console.export_text()
    owner.put_watch_stop("slowdown", "Broken: no baseline")
    console.print(top.frame())
    assert "the slowdown watch stopped on an error (Broken: no baseline)" in console.export_text()
    frame = StoreFrame(ranks=[], world=1, now=0.0, stopped=["the hang watch stopped"])
    console.print(document_renderable(document(frame)))
    assert "the hang watch stopped" in console.export_text()
