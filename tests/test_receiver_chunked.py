"""``serve`` takes OTLP/HTTP bodies sent chunked, as OpenTelemetry JS and Java exporters send them.

OpenTelemetry JS's OTLP/HTTP transport (Node.js: Claude Code, Gemini CLI, any Node agent) pipes
every body into the request with ``Transfer-Encoding: chunked`` and no ``Content-Length``,
compressed or not, and drops the batch on a 411. Real parts: the standard library's HTTP client
(``encode_chunked``) and raw sockets against ``serve`` on 127.0.0.1 port 0; the findings are
compared with ``check``'s on the same spans.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from _agent_sessions import proto_messages, sessions
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from test_receiver import LIMIT, PROTOBUF, Served, _expected, _fleet, status_message, to_json_doc  # noqa: F401 - the fixtures


def _pieces(body: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


def post_chunked(port: int, chunks: Iterable[bytes], headers: dict[str, str],
                 path: str = "/v1/traces") -> tuple[int, bytes]:
    """POST ``chunks`` with ``Transfer-Encoding: chunked`` (http.client writes the framing)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=iter(chunks), headers=headers, encode_chunked=True)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def post_raw(port: int, head: str, body: bytes) -> tuple[int, bytes]:
    """Send a request written byte for byte; return the status and what followed the head."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1") + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1]


def _head(extra: str, media: str = "application/x-protobuf") -> str:
    return f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {media}\r\n{extra}\r\n"


@pytest.fixture(name="served")
def _served() -> Iterator[Served]:
    served = Served()
    with served.receiver:
        yield served


class TestChunkedBodies:
    @pytest.mark.parametrize("compressed", [False, True])
    def test_protobuf_in_chunks_gives_checks_findings(
            self, served: Served, fleet: tuple[ReadableSpan, ...],
            expected: list[dict[str, Any]], compressed: bool) -> None:
        """A protobuf export in 1 KB chunks, plain and gzip (before: 411, every span lost)."""
        body = encode_spans(fleet).SerializeToString()
        headers = dict(PROTOBUF)
        if compressed:
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        status, answer = post_chunked(served.receiver.http_port, _pieces(body, 1024), headers)
        assert status == 200, answer
        assert served.results() == expected
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == len(fleet)
        assert served.receiver.bytes_in_flight == 0

    def test_coding_agents_logs_in_chunks(self, served: Served) -> None:
        """Coding agents' log events sent chunked, as Gemini CLI's ``http`` protocol and Claude
        Code 2.1.191 to 2.1.211 send them: each loop is flagged under its agent, each healthy
        session stays quiet."""
        runs = sessions()
        for body in proto_messages(runs):
            status, answer = post_chunked(served.receiver.http_port, _pieces(body, 512),
                                          PROTOBUF, path="/v1/logs")
            assert status == 200, answer
        assert served.receiver.flush(30)
        flagged = {r.run_id: bool(r.findings) for r in served.reports}
        assert flagged == {f"{run.agent}:{run.session_id}": run.loops for run in runs}

    def test_json_with_extensions_and_trailers(self, served: Served,
                                               fleet: tuple[ReadableSpan, ...],
                                               expected: list[dict[str, Any]]) -> None:
        """OTLP/JSON with chunk extensions, upper-case sizes and a trailer field is read whole."""
        body = json.dumps(to_json_doc(fleet)).encode()
        framed = b"".join(b"%X;name=value\r\n%s\r\n" % (len(piece), piece)
                          for piece in _pieces(body, 4000))
        framed += b"0\r\nX-Checksum: none\r\n\r\n"
        status, answer = post_raw(served.receiver.http_port, _head(
            "Transfer-Encoding: chunked\r\n", "application/json"), framed)
        assert status == 200, answer
        assert json.loads(answer) == {}
        assert served.results() == expected

    def test_over_the_cap_is_refused_as_it_arrives(self, served: Served) -> None:
        """Chunks adding up past max_request_bytes: 413, counted too_large, and the rest is
        left unread (the connection is closed)."""
        chunk = b"\x00" * 65536
        framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // 65536 + 1))
        status, answer = post_raw(served.receiver.http_port,
                                  _head("Transfer-Encoding: chunked\r\n"), framed + b"0\r\n\r\n")
        assert status == 413
        assert f"exceeds the {LIMIT}-byte limit" in status_message(answer)
        assert served.value("loopguard_receiver_requests_total", protocol="http",
                            outcome="too_large") == 1.0
        assert served.receiver.bytes_in_flight == 0

    def test_a_body_refused_unread_still_gets_its_answer(self, served: Served) -> None:
        """A Content-Length over the limit is refused before the body is read; the body the
        client still sends (here 1.5 MiB past it) is drained before the connection closes, so
        the client reads the 413 instead of a reset connection, which exporters retry."""
        size = LIMIT + 3 * (1 << 19)
        with socket.create_connection(("127.0.0.1", served.receiver.http_port), timeout=10) \
                as sock:
            sock.sendall(_head(f"Content-Length: {size}\r\n").encode("latin-1"))
            time.sleep(0.3)  # the answer is written, and the connection closing, before the body
            sock.sendall(b"\x00" * size)
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert int(answer.split(b" ", 2)[1]) == 413
        assert f"exceeds the {LIMIT}-byte limit" in status_message(answer.split(b"\r\n\r\n", 1)[1])

    @pytest.mark.parametrize(("head", "body", "status", "message"), [
        ("Transfer-Encoding: chunked\r\n", b"zz\r\nab\r\n0\r\n\r\n", 400, "bad chunk size"),
        ("Transfer-Encoding: chunked\r\n", b"2\r\nabcd\r\n0\r\n\r\n", 400,
         "chunk longer than its size"),
        ("Transfer-Encoding: chunked\r\n", b"10\r\nabc", 400, "ended inside a chunk"),
        ("Transfer-Encoding: chunked\r\n", b"", 400, "ended before its chunk size line"),
        ("Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n", 501,
         "Transfer-Encoding 'gzip, chunked' is not supported"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n", 400,
         "both Content-Length and Transfer-Encoding"),
        ("", b"", 411, "Content-Length is required"),
    ])
    def test_broken_framing_is_named(self, served: Served, head: str, body: bytes,
                                     status: int, message: str) -> None:
        """Broken chunked framing, a transfer coding other than chunked, both framings, or
        neither: one status each, with a message that says what is wrong."""
        got, answer = post_raw(served.receiver.http_port, _head(head), body)
        assert (got, message in status_message(answer)) == (status, True), answer
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == 0.0
