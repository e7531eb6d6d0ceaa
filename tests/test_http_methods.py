"""HEAD and OPTIONS on serve's HTTP port and on the /metrics server: never 501.

HEAD is answered as GET without the body (the Content-Length is the body's); OPTIONS with 200
and an Allow header. Real servers on 127.0.0.1, a keep-alive connection from http.client.
"""

from __future__ import annotations

import http.client
import platform
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import otel_loopguard
from otel_loopguard.metrics import LoopGuardMetrics, start_metrics_server
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions

READ_ONLY = "GET, HEAD, OPTIONS"


def _ask(conn: http.client.HTTPConnection, method: str, path: str) -> tuple[int, dict[str, str],
                                                                          bytes]:
    conn.request(method, path)
    response = conn.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


@pytest.fixture(name="serve_conn")
def _serve_conn() -> Iterator[http.client.HTTPConnection]:
    receiver = LoopGuardReceiver(registry=CollectorRegistry(), options=ReceiverOptions(
        http_port=0, grpc_port=None))
    with receiver:
        conn = http.client.HTTPConnection("127.0.0.1", receiver.http_port, timeout=10)
        yield conn
        conn.close()


@pytest.fixture(name="metrics_conn")
def _metrics_conn() -> Iterator[http.client.HTTPConnection]:
    registry = CollectorRegistry()
    LoopGuardMetrics(registry)
    server: Any = start_metrics_server(0, registry=registry)
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
    try:
        yield conn
    finally:
        conn.close()
        server.shutdown()
        server.server_close()


class TestServe:
    @pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
    def test_head_is_get_without_the_body(self, serve_conn: http.client.HTTPConnection,
                                          path: str) -> None:
        """HEAD answers what GET does, with the body's length and no body; the connection
        stays usable (the next request is read right)."""
        status, headers, body = _ask(serve_conn, "GET", path)
        head_status, head_headers, head_body = _ask(serve_conn, "HEAD", path)
        assert (head_status, head_body) == (status, b"")
        assert head_headers["content-type"] == headers["content-type"]
        if path != "/metrics":  # /metrics changes between two scrapes (process metrics)
            assert head_headers["content-length"] == str(len(body)) != "0"
        assert _ask(serve_conn, "GET", "/healthz")[2] == b"ok\n"

    @pytest.mark.parametrize(("path", "allow"), [
        ("/metrics", READ_ONLY), ("/healthz", READ_ONLY), ("/readyz", READ_ONLY),
        ("/v1/traces", "POST, OPTIONS"), ("/v1/logs", "POST, OPTIONS"), ("*", READ_ONLY)])
    def test_options_names_the_methods(self, serve_conn: http.client.HTTPConnection,
                                       path: str, allow: str) -> None:
        """OPTIONS gets 204 (no content) and the path's methods in Allow."""
        status, headers, body = _ask(serve_conn, "OPTIONS", path)
        assert (status, headers["allow"], body) == (204, allow, b"")

    def test_other_paths_and_methods(self, serve_conn: http.client.HTTPConnection) -> None:
        """OPTIONS on an unknown path is a 404; HEAD and GET on /v1/traces a 405 naming POST;
        no method gets 501."""
        assert _ask(serve_conn, "OPTIONS", "/nope")[0] == 404
        for method in ("GET", "HEAD"):
            status, headers, _ = _ask(serve_conn, method, "/v1/traces")
            assert (status, headers["allow"]) == (405, "POST, OPTIONS")

    def test_build_info(self, serve_conn: http.client.HTTPConnection) -> None:
        """serve's /metrics says which otel-loopguard and Python it runs."""
        body = _ask(serve_conn, "GET", "/metrics")[2].decode()
        assert (f'loopguard_build_info{{python="{platform.python_version()}",'
                f'version="{otel_loopguard.__version__}"}} 1.0') in body


class TestMetricsServer:
    def test_head_is_get_without_the_body(self, metrics_conn: http.client.HTTPConnection) -> None:
        """HEAD /metrics answers GET's status, type and length, without the body."""
        status, headers, body = _ask(metrics_conn, "GET", "/metrics")
        assert status == 200 and b"loopguard_build_info" in body
        head_status, head_headers, head_body = _ask(metrics_conn, "HEAD", "/metrics")
        assert (head_status, head_body) == (200, b"")
        assert head_headers["content-type"] == headers["content-type"]
        assert head_headers["content-length"] == str(len(body))

    def test_openmetrics_head(self, metrics_conn: http.client.HTTPConnection) -> None:
        """HEAD negotiates the format as GET does (OpenMetrics when asked for)."""
        metrics_conn.request("HEAD", "/metrics",
                             headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        response = metrics_conn.getresponse()
        assert response.read() == b""
        assert response.getheader("Content-Type", "").startswith("application/openmetrics-text")

    def test_options_and_post(self, metrics_conn: http.client.HTTPConnection) -> None:
        """OPTIONS gets 200 and Allow; POST a 405 whose Allow names HEAD too."""
        status, headers, body = _ask(metrics_conn, "OPTIONS", "/metrics")
        assert (status, headers["allow"], body) == (200, READ_ONLY, b"")
        status, headers, _ = _ask(metrics_conn, "POST", "/metrics")
        assert (status, headers["allow"]) == (405, READ_ONLY)
