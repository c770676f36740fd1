"""launch/metrics/http.py through the endpoint, over real sockets on this machine: a scrape in
the format its Accept header asks for, parsed by prometheus_client's parsers; reads only (GET,
HEAD; anything else 405); bound to 127.0.0.1, another local address (127.0.0.2) is refused;
an address not of this machine is one line; the push against a small HTTP server here that
records each PUT, the last one at the end with the ranks' last states."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ports import free_port
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from scalescope.events.files import live_state_path
from scalescope.events.live_state import read_live_states
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.launch.metrics.endpoint import MetricsEndpoint

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def one_rank(run_dir: Path, steps: int) -> LiveStateWriter:
    w = LiveStateWriter(live_state_path(run_dir, 0), 1, 0)
    for i in range(steps):
        w.add_step(100_000_000, 8)
        w.step(i + 1, (i + 1) * 100_000_000)
    return w


def serve(run_dir: Path, **options) -> MetricsEndpoint:
    endpoint = MetricsEndpoint(run_dir.name, lambda r: "here", **options)
    endpoint.bind()
    endpoint.start()
    endpoint.latest.observe(read_live_states(run_dir, 1))
    return endpoint


def get(url: str, method: str = "GET", accept: str = OPENMETRICS):
    request = urllib.request.Request(url, method=method, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_a_scrape_in_the_format_asked_for(tmp_path: Path) -> None:
    one_rank(tmp_path, 3)
    port = free_port()
    endpoint = serve(tmp_path, port=port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        status, kind, body = get(url)
        assert status == 200 and kind.startswith("application/openmetrics-text; version=1.0.0")
        families = {f.name: f for f in text_string_to_metric_families(body.decode())}
        assert families["scalescope_steps"].samples[0].value == 3
        _, kind, plain = get(url, accept="text/plain")
        assert kind.startswith("text/plain; version=0.0.4")
        samples = {f.name: f.samples for f in text_families(plain.decode())}
        assert samples["scalescope_samples"][0].value == 24
        status, _, head = get(url, method="HEAD")
        assert status == 200 and head == b""
    finally:
        endpoint.close()


@pytest.mark.parametrize(("method", "path", "code"), [("POST", "/metrics", 405),
                                                     ("PUT", "/", 405),
                                                     ("DELETE", "/metrics", 405),
                                                     ("GET", "/kill", 404)])  # fmt: skip
def test_it_serves_only_reads(tmp_path: Path, method: str, path: str, code: int) -> None:
    one_rank(tmp_path, 1)
    port = free_port()
    endpoint = serve(tmp_path, port=port)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(f"http://127.0.0.1:{port}{path}", method=method)
        assert refused.value.code == code
        if code == 405:
            assert refused.value.headers["Allow"] == "GET, HEAD"
    finally:
        endpoint.close()


def connects(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


@pytest.mark.parametrize(("bound", "other"), [("127.0.0.1", "127.0.0.2"),
                                              ("127.0.0.2", "127.0.0.1")])  # fmt: skip
def test_another_address_of_the_machine_is_refused(tmp_path: Path, bound: str, other: str) -> None:
    port = free_port()
    endpoint = serve(tmp_path, port=port, addr=bound)
    try:
        assert connects(bound, port)
        assert not connects(other, port)
    finally:
        endpoint.close()


def test_an_address_not_of_this_machine_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(ValueError) as error:
        serve(tmp_path, port=port, addr="192.0.2.1")  # TEST-NET-1: nobody's
    message = str(error.value)
    assert message.startswith(f"--metrics-port {port}: cannot listen on 192.0.2.1:{port}: ")
    assert message.endswith("check --metrics-addr") and "\n" not in message


class Gateway(ThreadingHTTPServer):
    """A Pushgateway stand-in: each request's method, path, content type and body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, bytes]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                gateway.requests.append((self.command, self.path,
                                         self.headers["Content-Type"], body))  # fmt: skip
                self.send_response(202)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_the_last_push_holds_the_last_states(tmp_path: Path) -> None:
    w = one_rank(tmp_path, 2)
    gateway = Gateway()
    endpoint = serve(tmp_path, push=f"http://127.0.0.1:{gateway.server_address[1]}",
                     push_every_s=600)  # fmt: skip
    try:
        w.add_step(100_000_000, 8)
        w.step(3, 300_000_000)
        endpoint.latest.observe(read_live_states(tmp_path, 1))  # the watch's last read
        endpoint.close()
        (method, path, kind, body), *_ = gateway.requests
        assert (method, path) == ("PUT", f"/metrics/job/{tmp_path.name}")
        assert kind == "text/plain; version=0.0.4; charset=utf-8"
        families = {f.name: f for f in text_families(body.decode())}
        steps = families["scalescope_steps"].samples[0]
        assert steps.value == 3 and steps.labels == {"job": tmp_path.name, "rank": "0",
                                                     "Hostname": "here"}  # fmt: skip
        assert families["scalescope_samples"].samples[0].value == 24
    finally:
        gateway.shutdown()


def test_a_gateway_down_is_said_and_the_run_goes_on(tmp_path: Path, capsys) -> None:
    one_rank(tmp_path, 1)
    url = f"http://127.0.0.1:{free_port()}"
    endpoint = serve(tmp_path, push=url, push_every_s=600)
    assert endpoint.push() is False
    endpoint.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith(f"scalescope: --metrics-push {url}: ") for line in lines)
