"""``serve``'s receiver on 127.0.0.1: real OTLP exporters, OTLP/JSON, malformed requests."""

from __future__ import annotations

import base64
import gc
import gzip
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from prometheus_client import CollectorRegistry
from test_receiver_stream import as_json, script_fleet

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.otlp._request import RequestError
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.testing import FakeClock, LoopGuardHarness

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LIMIT = 256 * 1024
TOKEN = "s3cret-token"
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(name="fleet", scope="module")
def _fleet() -> tuple[ReadableSpan, ...]:
    """A dozen looping and healthy runs, made by a real TracerProvider."""
    harness = LoopGuardHarness()
    script_fleet(harness)
    harness.shutdown()
    return harness.exporter.get_finished_spans()


@pytest.fixture(name="expected", scope="module")
def _expected(fleet: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    """What ``check`` reports for the fleet."""
    from otel_loopguard.otlp._sdk import span_record_from_readable

    return as_json(list(Checker(LoopGuardConfig()).run(
        span_record_from_readable(s) for s in fleet)))


class Served:
    """A running receiver with its registry and the reports it produced."""

    def __init__(self, clock: Any = time.monotonic_ns, config: LoopGuardConfig | None = None,
                 **options: Any) -> None:
        self.registry = CollectorRegistry()
        self.reports: list[RunReport] = []
        opts = {"http_port": 0, "grpc_port": 0, "max_request_bytes": LIMIT,
                "reorder_window_seconds": 0.05, **options}
        self.receiver = LoopGuardReceiver(config or LoopGuardConfig(),
                                          options=ReceiverOptions(**opts),
                                          registry=self.registry, on_report=self.reports.append,
                                          clock=clock, raise_internal_errors=True)

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def total(self, name: str) -> float:
        return sum(s.value for m in self.registry.collect() for s in m.samples if s.name == name)

    def results(self) -> list[dict[str, Any]]:
        assert self.receiver.flush(10)
        return as_json(self.reports)


@pytest.fixture(name="served")
def _served() -> Iterator[Served]:
    served = Served()
    with served.receiver:
        yield served


def export(exporter: SpanExporter, spans: tuple[ReadableSpan, ...]) -> None:
    """Send spans through the SDK's BatchSpanProcessor, as an agent process does."""
    processor = BatchSpanProcessor(exporter, max_export_batch_size=512)
    for span in spans:
        processor.on_end(span)
    processor.shutdown()


def post(port: int, body: bytes, headers: dict[str, str],
         path: str = "/v1/traces") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def to_json_doc(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """Return OTLP/JSON with hex ids, as a non-Python agent would send it."""
    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId")
                    else fix(v) for k, v in node.items()}
        return [fix(v) for v in node] if isinstance(node, list) else node

    doc: dict[str, Any] = fix(MessageToDict(encode_spans(spans)))
    return doc


def status_message(body: bytes, *, as_json: bool = False) -> str:
    if as_json:
        return str(json.loads(body)["message"])
    return str(status_pb2.Status.FromString(body).message)


class TestExporters:
    def test_grpc_exporter(self, served: Served, fleet: tuple[ReadableSpan, ...],
                           expected: list[dict[str, Any]]) -> None:
        """The SDK's OTLP/gRPC exporter: the findings equal check's for the same spans."""
        export(GrpcExporter(endpoint=f"127.0.0.1:{served.receiver.grpc_port}", insecure=True),
               fleet)
        assert served.results() == expected
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == len(fleet)
        assert served.total("loopguard_tool_calls_total") == sum(r["tool_calls"]
                                                                 for r in expected)
        findings = sum(len(r["findings"]) for r in expected)
        assert served.total("loopguard_loop_detected_total") == findings > 0

    @pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
    def test_http_protobuf_exporter(self, served: Served, fleet: tuple[ReadableSpan, ...],
                                    expected: list[dict[str, Any]],
                                    compression: Compression) -> None:
        """The SDK's OTLP/HTTP protobuf exporter, plain and gzip, gives check's findings."""
        export(HttpExporter(endpoint=f"{served.receiver.http_url}/v1/traces",
                            compression=compression), fleet)
        assert served.results() == expected
        assert served.value("loopguard_receiver_requests_total", protocol="http",
                            outcome="ok") >= 1

    def test_hand_built_json(self, served: Served, fleet: tuple[ReadableSpan, ...],
                             expected: list[dict[str, Any]]) -> None:
        """OTLP/JSON with hex ids, as curl or a Node agent sends it, gives check's findings."""
        status, headers, body = post(served.receiver.http_port,
                                     json.dumps(to_json_doc(fleet)).encode(), JSON)
        assert (status, headers["Content-Type"], json.loads(body)) == (200, JSON[
            "Content-Type"], {})
        assert served.results() == expected

    def test_gzip_of_several_members(self, served: Served, fleet: tuple[ReadableSpan, ...],
                                     expected: list[dict[str, Any]]) -> None:
        """A gzip body of several members (RFC 1952; the Collector reads them all) is read
        whole: before, the spans after the first member were dropped with a 200."""
        half = len(fleet) // 2
        body = b"".join(gzip.compress(encode_spans(part).SerializeToString())
                        for part in (fleet[:half], fleet[half:]))
        status, _, _ = post(served.receiver.http_port, body,
                            {**PROTOBUF, "Content-Encoding": "gzip"})
        assert status == 200
        assert served.results() == expected
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == len(fleet)

    def test_response_is_an_export_response(self, served: Served,
                                            fleet: tuple[ReadableSpan, ...]) -> None:
        """A protobuf request gets an empty ExportTraceServiceResponse back."""
        status, _, body = post(served.receiver.http_port,
                               encode_spans(fleet[:5]).SerializeToString(), PROTOBUF)
        assert status == 200
        assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")


def _bomb() -> bytes:
    return gzip.compress(b"\0" * (LIMIT * 16))


MALFORMED = [
    # id, body, headers, status, message fragment
    ("garbage", b"\xff\xfe not protobuf at all", PROTOBUF, 400, "not a valid OTLP protobuf"),
    ("wrong-content-type", b"{}", {"Content-Type": "text/plain"}, 415,
     "unsupported Content-Type"),
    ("no-content-type", b"{}", {}, 415, "unsupported Content-Type"),
    ("truncated", None, PROTOBUF, 400, "not a valid OTLP protobuf"),
    ("oversized", b"\x0a" * (LIMIT + 1), PROTOBUF, 413, "exceeds"),
    ("gzip-bomb", None, {**PROTOBUF, "Content-Encoding": "gzip"}, 413, "decompressed body"),
    ("corrupt-gzip", b"\x1f\x8bnot gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400,
     "not valid gzip"),
    ("gzip-trailing-garbage", gzip.compress(b"") + b"garbage",
     {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "not valid gzip"),
    ("unknown-encoding", b"x", {**PROTOBUF, "Content-Encoding": "br"}, 415,
     "unsupported Content-Encoding"),
    ("bad-json", b"{nope", JSON, 400, "not valid JSON"),
    ("json-array", b"[]", JSON, 400, "must be a JSON object"),
    ("json-bad-ids", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "zz", "spanId": "00f067aa0ba902b7"}]}]}]}).encode(), JSON, 400,
     "all 1 spans rejected: resourceSpans[0].scopeSpans[0].spans[0].traceId"),
]


class TestMalformedHttp:
    @pytest.mark.parametrize(("body", "headers", "status", "message"),
                             [case[1:] for case in MALFORMED], ids=[c[0] for c in MALFORMED])
    def test_answer_then_keep_serving(self, served: Served, fleet: tuple[ReadableSpan, ...],
                                      expected: list[dict[str, Any]], body: bytes | None,
                                      headers: dict[str, str], status: int,
                                      message: str) -> None:
        """Each bad request gets its 4xx and a Status message; the next good one is intact."""
        good = encode_spans(fleet).SerializeToString()
        if body is None:
            body = _bomb() if "Content-Encoding" in headers else good[:len(good) // 2 + 3]
        got, reply_headers, reply = post(served.receiver.http_port, body, headers)
        as_json = headers.get("Content-Type") == "application/json"
        assert got == status
        assert message in status_message(reply, as_json=as_json)
        assert reply_headers["Content-Type"] == ("application/json" if as_json
                                                 else "application/x-protobuf")
        assert post(served.receiver.http_port, good, PROTOBUF)[0] == 200
        assert served.results() == expected
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == len(fleet)

    def test_bad_token(self, fleet: tuple[ReadableSpan, ...]) -> None:
        """With a token, a wrong or missing bearer gets 401; the right one is accepted."""
        served = Served(token=TOKEN)
        body = encode_spans(fleet[:4]).SerializeToString()
        with served.receiver:
            port = served.receiver.http_port
            for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
                status, headers, reply = post(port, body, {**PROTOBUF, **auth})
                assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
                assert "bearer token" in status_message(reply)
            auth = {"Authorization": f"bearer {TOKEN}"}
            assert post(port, body, {**PROTOBUF, **auth})[0] == 200
            assert get(port, "/metrics")[0] == 401
            assert get(port, "/metrics", auth)[0] == 200
            assert get(port, "/healthz")[0] == 200
            assert served.value("loopguard_receiver_requests_total", protocol="http",
                                outcome="unauthenticated") == 3

    def test_routes(self, served: Served) -> None:
        """Unknown paths get 404, GET on /v1/traces or /v1/logs 405; health and readiness 200."""
        port = served.receiver.http_port
        assert post(port, b"{}", JSON, path="/v1/metrics")[0] == 404
        status, _, reply = post(port, b"{}", JSON, path="/v1/logs")
        assert (status, reply) == (200, b"{}")
        assert get(port, "/v1/traces")[0] == 405
        assert get(port, "/v1/logs")[0] == 405
        assert get(port, "/nope")[0] == 404
        assert get(port, "/healthz") == (200, b"ok\n")
        assert get(port, "/readyz") == (200, b"ready\n")
        status, body = get(port, "/metrics")
        assert status == 200 and b"loopguard_receiver_queue_batches 0.0" in body

    def test_partial_success(self, served: Served, fleet: tuple[ReadableSpan, ...]) -> None:
        """A request with one malformed span is accepted with rejected_spans = 1."""
        request = encode_spans(fleet[:4])
        request.resource_spans[0].scope_spans[0].spans[2].trace_id = b"\x01\x02"
        status, _, body = post(served.receiver.http_port, request.SerializeToString(), PROTOBUF)
        partial = ExportTraceServiceResponse.FromString(body).partial_success
        assert (status, partial.rejected_spans) == (200, 1)
        assert "resource_spans[0].scope_spans[0].spans[2].trace_id" in partial.error_message
        doc = to_json_doc(fleet[:4])
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "xyz"
        status, _, body = post(served.receiver.http_port, json.dumps(doc).encode(), JSON)
        assert status == 200
        assert json.loads(body)["partialSuccess"]["rejectedSpans"] == "1"
        assert served.value("loopguard_receiver_spans_total", outcome="rejected") == 2
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == 6


class TestMalformedGrpc:
    def _call(self, port: int, body: bytes, **kwargs: Any) -> grpc.RpcError:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export_call = channel.unary_unary(EXPORT)
            with pytest.raises(grpc.RpcError) as info:
                export_call(body, timeout=10, **kwargs)
        error: grpc.RpcError = info.value
        return error

    def test_statuses(self, served: Served, fleet: tuple[ReadableSpan, ...],
                      expected: list[dict[str, Any]]) -> None:
        """Garbage, truncated, oversized and gzip-bomb messages get OTLP's gRPC codes."""
        port = served.receiver.grpc_port
        good = encode_spans(fleet).SerializeToString()
        cases = [
            (b"\xff\xfe garbage", {}, grpc.StatusCode.INVALID_ARGUMENT, "not a valid OTLP"),
            (good[:len(good) // 2 + 3], {}, grpc.StatusCode.INVALID_ARGUMENT, "not a valid"),
            (b"\x0a" * (LIMIT + 1), {}, grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
            (b"\x0a" * (LIMIT * 16), {"compression": grpc.Compression.Gzip},
             grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
        ]
        for body, kwargs, code, message in cases:
            error = self._call(port, body, **kwargs)
            assert error.code() == code
            assert message in (error.details() or "")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = channel.unary_unary(EXPORT)(good, timeout=10)
        assert ExportTraceServiceResponse.FromString(reply) == ExportTraceServiceResponse()
        assert served.results() == expected

    def test_bad_token(self, fleet: tuple[ReadableSpan, ...]) -> None:
        """A wrong bearer token gets UNAUTHENTICATED; the exporter with the token gets in."""
        served = Served(token=TOKEN)
        with served.receiver:
            port = served.receiver.grpc_port
            error = self._call(port, b"", metadata=(("authorization", "Bearer wrong"),))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            export(GrpcExporter(endpoint=f"127.0.0.1:{port}", insecure=True,
                                headers={"authorization": f"Bearer {TOKEN}"}), fleet[:6])
            served.receiver.flush(10)
            assert served.value("loopguard_receiver_spans_total", outcome="accepted") == 6


def stall(receiver: LoopGuardReceiver) -> tuple[threading.Event, threading.Event]:
    """Make the worker stop in its next batch: it sets the first event, waits for the second."""
    stalled, release = threading.Event(), threading.Event()
    original = receiver.stream.add

    def slow_add(*args: Any, **kwargs: Any) -> Any:
        stalled.set()
        release.wait(10)
        return original(*args, **kwargs)

    receiver.stream.add = slow_add  # type: ignore[method-assign]
    return stalled, release


class TestBackpressure:
    def test_full_queue_answers_429_and_resource_exhausted(
            self, fleet: tuple[ReadableSpan, ...], expected: list[dict[str, Any]]) -> None:
        """A full queue gives 429 + Retry-After and RESOURCE_EXHAUSTED + RetryInfo; no loss."""
        served = Served(max_queue=2)
        with served.receiver as receiver:
            stalled, release = stall(receiver)
            body = encode_spans(fleet).SerializeToString()
            assert post(receiver.http_port, body, PROTOBUF)[0] == 200
            assert stalled.wait(10)
            for _ in range(2):
                assert post(receiver.http_port, body, PROTOBUF)[0] == 200
            status, headers, reply = post(receiver.http_port, body, PROTOBUF)
            assert (status, headers["Retry-After"]) == (429, "1")
            assert "queue full" in status_message(reply)
            assert get(receiver.http_port, "/readyz")[0] == 503
            with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel, \
                    pytest.raises(grpc.RpcError) as info:
                channel.unary_unary(EXPORT)(body, timeout=10)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            trailers = dict(info.value.trailing_metadata())
            retry = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
            assert retry.retry_delay.seconds == 1
            release.set()
            assert receiver.flush(10)
            assert get(receiver.http_port, "/readyz")[0] == 200
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == 3 * len(
            fleet)
        assert served.value("loopguard_receiver_requests_total", protocol="http",
                            outcome="throttled") == 1
        assert served.value("loopguard_receiver_requests_total", protocol="grpc",
                            outcome="throttled") == 1
        # Each span was sent three times: checked once, the copies are duplicates or late.
        assert as_json(served.reports) == expected
        repeats = served.value("loopguard_receiver_spans_total", outcome="late") + served.value(
            "loopguard_receiver_spans_total", outcome="duplicate")
        assert repeats == 2 * len(fleet)


    def test_grpc_messages_are_not_left_to_the_garbage_collector(
            self, fleet: tuple[ReadableSpan, ...]) -> None:
        """Neither an accepted nor a refused gRPC call keeps its message in a reference cycle
        (a burst of refused calls would otherwise hold far more than the bytes in flight)."""
        served = Served(max_queue=1)
        body = encode_spans(fleet).SerializeToString()
        gc.collect()
        gc.disable()
        try:
            with served.receiver as receiver:
                stalled, release = stall(receiver)
                with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
                    export = channel.unary_unary(EXPORT)
                    export(body, timeout=10)  # taken by the worker, which stalls
                    assert stalled.wait(10)
                    export(body, timeout=10)  # waits in the queue
                    with pytest.raises(grpc.RpcError) as info:
                        export(body, timeout=10)
                    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                release.set()
                assert receiver.flush(10)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            kept = [ref for obj in gc.garbage for ref in gc.get_referents(obj)
                    if isinstance(ref, bytes) and len(ref) == len(body)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert served.value("loopguard_receiver_requests_total", protocol="grpc",
                            outcome="throttled") == 1
        assert kept == []


class TestReorderWindow:
    def test_worker_lag_does_not_make_spans_late(self) -> None:
        """The window counts arrival times: a backlog in the queue never makes spans late."""
        harness = LoopGuardHarness()
        with harness.run("a") as agent:
            for _ in range(5):
                agent.tool("search", {"q": 1}, {"r": []})
        spans = harness.exporter.get_finished_spans()
        clock = FakeClock()
        served = Served(clock, reorder_window_seconds=1.0)
        receiver = served.receiver
        with receiver:
            stalled, release = stall(receiver)
            port = receiver.http_port
            assert post(port, encode_spans(spans[-1:]).SerializeToString(), PROTOBUF)[0] == 200
            assert stalled.wait(10)
            clock.advance(0.5)
            assert post(port, encode_spans(spans[:-1]).SerializeToString(), PROTOBUF)[0] == 200
            clock.advance(60)  # the worker is far behind the arrivals
            release.set()
            deadline = time.monotonic() + 10
            while not served.reports and time.monotonic() < deadline:
                time.sleep(0.02)
        (report,) = served.reports
        assert (report.tool_calls, report.action.label) == (5, "stop")
        assert served.value("loopguard_receiver_spans_total", outcome="late") == 0


class TestShutdown:
    def test_finishes_what_it_accepted(self, fleet: tuple[ReadableSpan, ...],
                                       expected: list[dict[str, Any]]) -> None:
        """Shutdown checks every accepted span, even inside the reorder window."""
        served = Served(reorder_window_seconds=3600)
        with served.receiver as receiver:
            assert post(receiver.http_port, encode_spans(fleet).SerializeToString(),
                        PROTOBUF)[0] == 200
        assert as_json(served.reports) == expected
        with pytest.raises(RequestError) as info:
            receiver.handle("http", None, lambda: pytest.fail("decoded after shutdown"))
        assert info.value.http_status == 503
        assert not receiver.ready

    def test_options_are_validated(self) -> None:
        """Bad sizes, ports and empty tokens fail at construction, naming the option."""
        with pytest.raises(ValueError, match="max_queue"):
            ReceiverOptions(max_queue=0)
        with pytest.raises(ValueError, match="grpc_port"):
            ReceiverOptions(grpc_port=70000)
        with pytest.raises(ValueError, match="token"):
            ReceiverOptions(token="")

    def test_busy_port_raises(self, served: Served) -> None:
        """Binding a port that is in use raises OSError and leaves nothing running."""
        clash = LoopGuardReceiver(LoopGuardConfig(), registry=None, options=ReceiverOptions(
            http_port=served.receiver.http_port, grpc_port=None))
        with pytest.raises(OSError):
            clash.start()
        assert not clash.ready
