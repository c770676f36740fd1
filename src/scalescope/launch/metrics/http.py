"""The metrics endpoint's HTTP side (``--metrics-port``) and its pushes (``--metrics-push``),
for launch/metrics/endpoint.py.

The server answers GET and HEAD only (any other method: 405): it reads, and nothing it serves
changes the run. It binds to ``--metrics-addr``, 127.0.0.1 unless told otherwise, so that
only this machine reaches it by default. Each request gets the text format its ``Accept``
header asks for (Prometheus asks for OpenMetrics).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from scalescope.launch.metrics.text import negotiate

PATHS = ("/", "/metrics")
PUSH_TIMEOUT_S = 5.0
"""A push waits this long for the gateway: the last one delays the run's end by at most this."""

Body = Callable[[bool], bytes]
"""The scrape's text: OpenMetrics when True, else Prometheus' text format 0.0.4."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """No line per request on the launcher's terminal."""


def metrics_app(body: Body) -> Callable[..., Iterable[bytes]]:
    """The WSGI application: reads only, at ``/metrics`` (or ``/``)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b"the metrics endpoint serves only reads (GET, HEAD)\n"]
        if environ.get("PATH_INFO", "/") not in PATHS:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"the metrics are at /metrics\n"]
        content_type, openmetrics = negotiate(environ.get("HTTP_ACCEPT", ""))
        text = body(openmetrics)
        start_response("200 OK", [("Content-Type", content_type),
                                  ("Content-Length", str(len(text)))])  # fmt: skip
        return [b""] if method == "HEAD" else [text]

    return app


def bind(addr: str, port: int, body: Body) -> WSGIServer:
    """The server bound to ``addr:port`` (not serving yet); a ValueError in one line when the
    port is taken or the address is not this machine's."""
    server_class: type[WSGIServer] = _Server
    if ":" in addr:  # an IPv6 address
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    try:
        return make_server(addr, port, metrics_app(body), server_class, _QuietHandler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "the port is in use (another run's endpoint?): choose another --metrics-port"
        elif exc.errno == errno.EACCES:
            why = "permission denied (ports below 1024 need root): choose another --metrics-port"
        else:
            why = f"{exc.strerror or exc}: check --metrics-addr"
        raise ValueError(f"--metrics-port {port}: cannot listen on {addr}:{port}: {why}") from None


def push(url: str, job: str, text: bytes) -> None:
    """PUT ``text`` (format 0.0.4) as the group ``job`` of the Pushgateway at ``url``:
    ``prometheus_client.push_to_gateway`` builds the URL and sends it; its registry is empty
    and its handler sends the text the endpoint wrote instead."""
    from prometheus_client import CollectorRegistry, push_to_gateway
    from prometheus_client.exposition import default_handler

    def handler(url: str, method: str, timeout: float | None, headers: Any, data: bytes) -> Any:
        return default_handler(url, method, timeout, headers, text)

    push_to_gateway(url, job=job, registry=CollectorRegistry(), timeout=PUSH_TIMEOUT_S,
                    handler=handler)  # fmt: skip
