"""``serve`` forwards logs with the TLS, compression and timeout settings the spans get.

The span forwarder is the SDK's exporter, which reads ``OTEL_EXPORTER_OTLP_CERTIFICATE`` and the
other ``OTEL_EXPORTER_OTLP_*`` variables; the logs (the coding agents' events and the
``loopguard.loop_detected`` findings on them) go through loopguard's own sender, which read only
the headers: behind a downstream with a private CA every logs request failed with
``CERTIFICATE_VERIFY_FAILED`` while the spans got through. Real parts: an HTTPS server and a
TLS gRPC server on 127.0.0.1 port 0, with the test certificate of ``tests/data/tls``.
"""

from __future__ import annotations

import gzip
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from _http_sink import reply, stop
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from otel_loopguard.exceptions import ConfigError
from otel_loopguard.receiver._forward_logs import LogForwarder

TLS = Path(__file__).resolve().parent / "data" / "tls"
CERT, KEY, OTHER = TLS / "server.pem", TLS / "server.key", TLS / "other.pem"
BODY = ExportLogsServiceRequest().SerializeToString() + b"\x0a\x00"  # one empty ResourceLogs
_VARIABLES = ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE", "COMPRESSION", "TIMEOUT",
              "HEADERS")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_LOGS_{name}", raising=False)


class HttpsSink:
    """An OTLP/HTTP logs endpoint over TLS that keeps each body (inflated) and its headers."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                sink.posts.append((dict(self.headers), body))
                reply(self, 200)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(CERT, KEY)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def https_sink() -> Iterator[HttpsSink]:
    sink = HttpsSink()
    yield sink
    stop(sink.server)


def _forward(endpoint: str, protocol: str) -> Counter[str]:
    """Send one logs request through a LogForwarder; return its outcomes."""
    outcomes: Counter[str] = Counter()
    forwarder = LogForwarder(endpoint, protocol,  # type: ignore[arg-type]
                             on_outcome=lambda outcome, records: outcomes.update({outcome: 1}))
    forwarder.send(BODY)
    assert forwarder.force_flush(20)
    forwarder.shutdown(5)
    return outcomes


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_CERTIFICATE",
                                      "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE"])
def test_https_downstream_with_a_private_ca(https_sink: HttpsSink, variable: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The CA named by the general or the logs variable verifies the downstream; gzip as
    ``OTEL_EXPORTER_OTLP_COMPRESSION`` says."""
    monkeypatch.setenv(variable, str(CERT))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    assert _forward(https_sink.url, "http") == Counter(exported=1)
    [(headers, body)] = https_sink.posts
    assert (headers["Content-Encoding"], body) == ("gzip", BODY)


def test_a_ca_that_did_not_sign_the_downstream_fails_the_export(
        https_sink: HttpsSink, monkeypatch: pytest.MonkeyPatch) -> None:
    """The certificate is checked: another CA fails the export (counted, never raised)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(OTHER))
    assert _forward(https_sink.url, "http") == Counter(export_failed=1)
    assert https_sink.posts == []


class _Logs(grpc.GenericRpcHandler):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def service(self, details: Any) -> grpc.RpcMethodHandler | None:
        if details.method != "/opentelemetry.proto.collector.logs.v1.LogsService/Export":
            return None

        def export(body: bytes, context: Any) -> bytes:
            self.bodies.append(body)
            return b""

        return grpc.unary_unary_rpc_method_handler(export)


def test_grpc_downstream_over_tls_with_a_private_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC takes the same CA (and gzip, which grpcio inflates before the handler)."""
    handler = _Logs()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
        [(KEY.read_bytes(), CERT.read_bytes())]))
    server.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", str(CERT))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        assert _forward(f"127.0.0.1:{port}", "grpc") == Counter(exported=1)
        assert handler.bodies == [BODY]
    finally:
        server.stop(0)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/no/such/ca.pem",
     "OTEL_EXPORTER_OTLP_CERTIFICATE: No such file or directory: /no/such/ca.pem"),
    ("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", str(TLS / "README.md"),
     "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE: no PEM certificate in"),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", "brotli",
     "OTEL_EXPORTER_OTLP_COMPRESSION 'brotli': forwarding logs takes gzip, deflate or none"),
])
def test_a_setting_that_cannot_work_is_refused_at_start(
        name: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CA file that cannot be read or holds no certificate, or a compression no exporter
    takes, is a config error when ``serve`` starts, not a failure at every export."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"^{message}"):
        LogForwarder("https://127.0.0.1:1", "http")
