"""``serve`` keeps what it accepted and bounds its memory in bytes on every path.

Real parts: the SDK's OTLP exporters, raw gRPC calls and sockets against ``serve`` on
127.0.0.1 port 0, a counting downstream receiver. Nothing asserts a duration; memory is read
from /proc as a bound plus a fixed margin, in a ``serve`` subprocess.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from test_receiver import EXPORT, JSON, PROTOBUF, TOKEN, Served, get, post
from test_receiver_faults import _connect, _post_head, _stalled_calls, _status
from test_receiver_load import _report, _run_fleet, _serve_process

from otel_loopguard.cli import main

MIB = 1 << 20


def _padded_request(size: int, trace: int = 1, *, root: bool = False) -> bytes:
    """Return a protobuf export request of one tool span carrying ``size`` bytes of result."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = trace.to_bytes(16, "big")
    span.span_id = (trace + 1).to_bytes(8, "big")
    if not root:
        span.parent_span_id = b"\xee" * 8
    span.name = "execute_tool search"
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    for key, value in (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "search"),
                       ("gen_ai.tool.call.result", "x" * size)):
        attribute = span.attributes.add()
        attribute.key, attribute.value.string_value = key, value
    return request.SerializeToString()


# --- 1. gRPC bytes in flight ---------------------------------------------------------------------
class TestGrpcBytesInFlight:
    def test_a_waiting_call_holds_a_message_worth_before_its_message(self) -> None:
        """Two gRPC calls that have not sent their message take the whole budget (two 1 MiB
        messages' worth): an HTTP body of 1 MiB gets 429 before it is read."""
        served = Served(token=TOKEN, max_request_bytes=MIB, max_bytes_in_flight=2 * MIB)
        auth = (("authorization", f"Bearer {TOKEN}"),)
        with served.receiver as receiver:
            calls, release, channel = _stalled_calls(receiver.grpc_port, 2, auth)
            try:
                deadline = time.monotonic() + 10
                while receiver.bytes_in_flight < 2 * MIB and time.monotonic() < deadline:
                    time.sleep(0.01)
                held = receiver.bytes_in_flight
                sock = _connect(receiver.http_port, _post_head(
                    MIB - 200, f"Authorization: Bearer {TOKEN}\r\n"))
                status = _status(sock)  # answered before a byte of the body is sent
                sock.close()
            finally:
                release.set()
                channel.close()
                for call in calls:
                    call.exception(timeout=10)
        assert (held, status) == (2 * MIB, 429)

    def test_calls_that_end_before_their_message_give_their_share_back(self) -> None:
        """Calls refused by grpcio for a message over the limit, or given up by their client
        before sending one, give back the message's worth they took: with room for two, four
        such calls leave the bytes in flight at 0, and the next export is accepted."""
        served = Served(max_request_bytes=64 * 1024, max_bytes_in_flight=128 * 1024)
        with served.receiver as receiver:
            channel = grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}")
            codes = []
            for _ in range(2):
                with pytest.raises(grpc.RpcError) as oversized:
                    channel.unary_unary(EXPORT)(_padded_request(100_000), timeout=10)
                with pytest.raises(grpc.RpcError) as abandoned:
                    channel.stream_unary(EXPORT)(iter(lambda: time.sleep(10), 0), timeout=0.3)
                codes += [oversized.value.code(), abandoned.value.code()]
            deadline = time.monotonic() + 10  # the calls' ends reach the server after the client
            while receiver.bytes_in_flight and time.monotonic() < deadline:
                time.sleep(0.01)
            held = receiver.bytes_in_flight
            reply = channel.unary_unary(EXPORT)(_padded_request(100), timeout=10)
            channel.close()
        assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED,
                         grpc.StatusCode.DEADLINE_EXCEEDED] * 2
        assert held == 0
        assert not ExportTraceServiceResponse.FromString(reply).HasField("partial_success")

    def test_a_message_grpcio_refuses_as_too_large_is_counted(self) -> None:
        """grpcio refuses a message over max_request_bytes before serve reads it, and ends the
        call without saying why: it is counted as ``cancelled`` (before, it was counted nowhere,
        and LoopGuardServeRejectingSpans could not see a Collector's batches being refused)."""
        served = Served(max_request_bytes=64 * 1024)
        with served.receiver as receiver:
            channel = grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}")
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as refused:
                    channel.unary_unary(EXPORT)(_padded_request(100_000), timeout=10)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            channel.close()

            def counted() -> float:
                return sum(served.value("loopguard_receiver_requests_total", protocol="grpc",
                                        outcome=outcome) for outcome in ("cancelled", "invalid"))

            deadline = time.monotonic() + 10  # the calls' ends reach the server after the client
            while counted() < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert counted() == 3
            assert served.value("loopguard_receiver_requests_total", protocol="grpc",
                                outcome="cancelled") >= 1

    def test_concurrent_big_messages_are_refused_before_they_are_held(self) -> None:
        """24 concurrent 1 MiB messages with room for 3: the bytes in flight never pass the
        limit, the refused calls get RESOURCE_EXHAUSTED, and every accepted span is taken."""
        served = Served(max_request_bytes=MIB + 4096, max_bytes_in_flight=3 * (MIB + 4096),
                        grpc_workers=8)
        peak = [0]
        with served.receiver as receiver:
            take = receiver._take_bytes

            def watched(size: int) -> None:
                take(size)
                peak[0] = max(peak[0], receiver.bytes_in_flight)

            receiver._take_bytes = watched  # type: ignore[method-assign]
            channel = grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}")
            call = channel.unary_unary(EXPORT)
            futures = [call.future(_padded_request(MIB, trace=2 * i + 1), timeout=30)
                       for i in range(24)]
            codes = [future.exception() for future in futures]
            channel.close()
            assert receiver.flush(10)
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
            throttled = served.value("loopguard_receiver_requests_total", protocol="grpc",
                                     outcome="throttled")
        ok = sum(code is None for code in codes)
        refused = {code.code() for code in codes if code is not None}
        assert peak[0] <= 3 * (MIB + 4096)
        assert refused <= {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert accepted == ok and throttled == 24 - ok
        assert receiver.bytes_in_flight == 0


@pytest.mark.heavy
def test_grpc_memory_stays_near_the_bytes_in_flight_cap() -> None:
    """60 concurrent 8 MiB gRPC exports against a 64 MiB budget (3.5 GB before)."""
    serve = _serve_process("--reorder-window", "0")
    try:
        base = serve.rss_mb()
        body = _padded_request(8 * MIB - 4096, root=True)
        channel = grpc.insecure_channel(f"127.0.0.1:{serve.grpc_port}", options=[
            ("grpc.max_send_message_length", 16 * MIB)])
        call = channel.unary_unary(EXPORT)
        peak = [base]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], serve.rss_mb())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        futures: list[Any] = [call.future(body, timeout=120) for _ in range(60)]
        codes = [future.exception() for future in futures]
        stop.set()
        sampler.join()
        channel.close()
    finally:
        serve.stop()
    refused = sum(code is not None for code in codes)
    _report(test="60 x 8 MiB gRPC", rss_before_mb=round(base), rss_peak_mb=round(peak[0]),
            refused=refused)
    assert peak[0] - base < 64 * 6 + 100  # raw, parsed and decoded copies of 64 MiB


# --- a counting downstream that can go away -------------------------------------------------
class Downstream:
    """An OTLP/gRPC endpoint that counts the span ids it took; ``down`` makes it UNAVAILABLE."""

    def __init__(self, max_message_bytes: int = 4 * MIB) -> None:
        self.span_ids: set[bytes] = set()
        self.requests = 0
        self.refused = 0
        self.down = False
        self.lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(4), options=[
            ("grpc.max_receive_message_length", max_message_bytes)])
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(self._export)}),))
        self.endpoint = f"http://127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _export(self, body: bytes, context: Any) -> bytes:
        if self.down:
            with self.lock:
                self.refused += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "downstream is down")
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.requests += 1
            self.span_ids.update(span.span_id for rs in request.resource_spans
                                 for ss in rs.scope_spans for span in ss.spans)
        data: bytes = ExportTraceServiceResponse().SerializeToString()
        return data

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture(name="downstream")
def _downstream() -> Iterator[Downstream]:
    downstream = Downstream()
    yield downstream
    downstream.stop()


def _small_request(first: int, count: int, *, root: bool = True) -> bytes:
    """Return a protobuf request of ``count`` one-span traces (tool spans; roots if ``root``)."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for trace in range(first, first + count):
        span = spans.add()
        span.trace_id = (trace + 1).to_bytes(16, "big")
        span.span_id = (trace + 1).to_bytes(8, "big")
        if not root:
            span.parent_span_id = b"\xee" * 8
        span.name = "execute_tool search"
        span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
        attribute = span.attributes.add()
        attribute.key, attribute.value.string_value = "gen_ai.tool.name", "search"
    return request.SerializeToString()


# --- 2. forwarding by size ------------------------------------------------------------------
class TestForwardingBySize:
    def test_small_spans_arrive_whatever_large_spans_share_their_batches(
            self, downstream: Downstream) -> None:
        """200 small traces and six 1.5 MiB spans, accepted together: a 4 MiB downstream gets
        every one of them (before, one 9 MiB batch failed and took the small spans along)."""
        served = Served(forward_endpoint=downstream.endpoint, max_request_bytes=2 * MIB)
        with served.receiver as receiver:
            for index in range(6):
                big = _padded_request(3 * MIB // 2, trace=1000 + 2 * index, root=True)
                assert post(receiver.http_port, big, PROTOBUF)[0] == 200
                assert post(receiver.http_port, _small_request(40 * index, 40), PROTOBUF)[0] \
                    == 200
            assert receiver.flush(30)
            forwarded = served.value("loopguard_receiver_forwarded_spans_total")
            failed = served.total("loopguard_receiver_forward_failures_total")
        assert (len(downstream.span_ids), forwarded, failed) == (246, 246, 0)
        assert downstream.requests >= 3  # the big spans were split across requests


# --- 3. pending traces bounded in bytes -----------------------------------------------------------
class TestPendingBytes:
    def test_traces_over_the_byte_bound_are_checked_and_forwarded_early(
            self, downstream: Downstream) -> None:
        """40 traces without their root, 200 KB each, against a 1 MiB bound: the buffer stays
        under it, the oldest traces are checked, reported and forwarded early (counted as
        capacity evictions), and none is lost."""
        served = Served(forward_endpoint=downstream.endpoint, max_pending_bytes=MIB)
        peak = [0]
        with served.receiver as receiver:
            stream = receiver.stream
            original = stream.add

            def add(*args: Any, **kwargs: Any) -> Any:
                reports = original(*args, **kwargs)
                peak[0] = max(peak[0], stream.buffered_bytes)
                return reports

            stream.add = add  # type: ignore[method-assign]
            for trace in range(40):
                assert post(receiver.http_port, _padded_request(200_000, trace=2 * trace + 1),
                            PROTOBUF)[0] == 200
            deadline = time.monotonic() + 20
            while len(downstream.span_ids) < 35 and time.monotonic() < deadline:
                time.sleep(0.05)
            early = len(downstream.span_ids), len(served.reports)
            evicted = served.value("loopguard_evicted_runs_total", reason="capacity")
            assert receiver.flush(30)
        assert peak[0] <= MIB
        assert early[0] >= 35 and early[1] >= 35  # before the run TTL (an hour) or a flush
        assert evicted >= 35
        assert len(downstream.span_ids) == 40


# --- 4. a downstream outage loses nothing accepted ----------------------------------------------
@pytest.mark.slow
class TestDownstreamOutage:
    def test_nothing_accepted_is_lost_and_senders_are_throttled(
            self, downstream: Downstream) -> None:
        """The downstream is down while six real exporters send 1,248 spans: the forwarding
        buffer (64 KiB) fills, serve answers 429 / RESOURCE_EXHAUSTED, the exporters retry, and
        once the downstream is back (half a second after the first refusal was answered, or
        after 3 s) every span accepted reaches it, none failed. (An SDK exporter gives up after
        six throttled tries of one batch; what it gives up on was never accepted, so it is not
        counted here; on a quiet machine that is none.) The outage lasts until serve has
        throttled, and the intake queue holds two requests: with a fixed 3 s and the default
        queue, senders that had sent everything before the worker filled the buffer (it all
        queued) were never refused, and the test failed now and then on a loaded machine."""
        served = Served(forward_endpoint=downstream.endpoint, forward_buffer_bytes=64 << 10,
                        max_request_bytes=MIB, max_bytes_in_flight=4 * MIB, max_queue=2)

        def throttled() -> float:
            return sum(served.value("loopguard_receiver_requests_total", protocol=p,
                                    outcome="throttled") for p in ("grpc", "http"))

        def back_once_throttled() -> None:
            started = time.monotonic()
            while (time.monotonic() - started < 3.0 or not throttled()) \
                    and time.monotonic() - started < 60.0:
                if throttled():
                    time.sleep(0.5)
                    break
                time.sleep(0.02)
            downstream.down = False

        downstream.down = True
        with served.receiver as receiver:
            threading.Thread(target=back_once_throttled, daemon=True).start()
            created, acknowledged = _run_fleet(served, traces=16, calls=12)
            assert receiver.flush(60)
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
            failed = served.total("loopguard_receiver_forward_failures_total")
            refusals = throttled()
        assert acknowledged == accepted == len(downstream.span_ids) <= created == 6 * 16 * 13
        assert failed == 0
        assert downstream.refused > 0 and refusals > 0


# --- 7. label values are safe ------------------------------------------------------------------
def test_control_and_bidi_characters_never_reach_metrics_raw() -> None:
    """Tool names with ESC, a newline and U+202E reach /metrics escaped (``\\x1b``,
    ``\\u202e``), and every other label value is left as it was."""
    served = Served(grpc_port=None)
    names = ["evil\x1b[31mred", "txt.exe\u202egnp", "two\nlines", "caf\u00e9_search"]
    spans = [{"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "execute_tool",
              "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": [
                  {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                  {"key": "gen_ai.tool.name", "value": {"stringValue": name}}]}
             for i, name in enumerate(names)]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    with served.receiver as receiver:
        assert post(receiver.http_port, body, JSON)[0] == 200
        assert receiver.flush(10)
        status, text = get(receiver.http_port, "/metrics")
    metrics = text.decode("utf-8")
    assert status == 200
    assert "\x1b" not in metrics and "\u202e" not in metrics
    for escaped in ('tool="evil\\\\x1b[31mred"', 'tool="txt.exe\\\\u202egnp"',
                    'tool="two\\\\x0alines"', 'tool="caf\u00e9_search"'):
        assert escaped in metrics


# --- 8. HEAD, OPTIONS and out-of-range numbers ------------------------------------------------
def _request(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class TestMethods:
    @pytest.mark.parametrize(("method", "path", "status", "allow"), [
        ("HEAD", "/healthz", 200, None), ("HEAD", "/readyz", 200, None),
        ("HEAD", "/metrics", 200, None), ("HEAD", "/nope", 404, None),
        ("OPTIONS", "/v1/traces", 204, "POST, OPTIONS"),
        ("OPTIONS", "/healthz", 204, "GET, HEAD, OPTIONS"),
        ("OPTIONS", "*", 204, "GET, HEAD, OPTIONS"),
        ("PUT", "/v1/traces", 405, "POST, OPTIONS"),
        ("PUT", "/v1/logs", 405, "POST, OPTIONS"),
        ("DELETE", "/metrics", 405, "GET, HEAD, OPTIONS")])
    def test_answered_never_501(self, method: str, path: str, status: int,
                                allow: str | None) -> None:
        served = Served(grpc_port=None)
        with served.receiver as receiver:
            got, headers, body = _request(receiver.http_port, method, path)
            get_length = len(get(receiver.http_port, path)[1]) if method == "HEAD" else 0
        assert got == status
        assert headers.get("Allow") == allow
        if method == "HEAD":
            assert body == b"" and int(headers["Content-Length"]) == get_length > 0


@pytest.mark.parametrize("literal", ["1e999", "-1e999", "\"1e999\""])
def test_a_double_out_of_range_is_rejected_by_serve_and_check(
        literal: str, tmp_path: Any, capsys: Any) -> None:
    """One behaviour for a JSON number that does not fit its type: the span is rejected and
    named by its field path (serve: partial success; check: a bad record), never clamped."""
    good = json.dumps({"traceId": "ab" * 16, "spanId": "01" * 8, "name": "a",
                       "startTimeUnixNano": "1", "endTimeUnixNano": "2"})
    bad = good.replace('"01010101', '"02020202')[:-1] + \
        ', "attributes": [{"key": "x", "value": {"doubleValue": ' + literal + "}}]}"
    body = ('{"resourceSpans": [{"scopeSpans": [{"spans": [' + good + ", " + bad +
            "]}]}]}").encode()
    served = Served(grpc_port=None)
    with served.receiver as receiver:
        status, _, reply = post(receiver.http_port, body, JSON)
    partial = json.loads(reply)["partialSuccess"]
    path = tmp_path / "t.jsonl"
    path.write_bytes(body + b"\n")
    code = main(["check", str(path)])
    err = capsys.readouterr().err
    where = "spans[1].attributes[0].value.doubleValue: expected a number in the double range"
    assert (status, partial["rejectedSpans"]) == (200, "1") and where in partial["errorMessage"]
    assert code == 2 and where in err


# --- 4. what a hard kill loses is counted at the next start ----------------------------------
@pytest.mark.slow
def test_spans_lost_to_sigkill_are_counted_at_the_next_start(tmp_path: Any) -> None:
    """300 spans acknowledged and still waiting for their traces' reorder window when serve
    is killed with SIGKILL: the next start with the same --state-file counts 300 lost; after a
    graceful stop the next start counts none."""
    state = str(tmp_path / "serve.state")
    serve = _serve_process("--state-file", state, "--reorder-window", "600")
    try:
        for batch in range(3):
            assert post(_port(serve), _small_request(100 * batch, 100), PROTOBUF)[0] == 200
    finally:
        serve.proc.kill()
        serve.proc.wait(30)
        serve.proc.stderr.close()
    again = _serve_process("--state-file", state)
    try:
        lost = again.metric('loopguard_receiver_spans_total{outcome="lost"}')
        assert post(_port(again), _small_request(0, 10), PROTOBUF)[0] == 200
    finally:
        again.stop()
    third = _serve_process("--state-file", state)
    try:
        lost_after_clean = third.metric('loopguard_receiver_spans_total{outcome="lost"}')
    finally:
        third.stop()
    assert (lost, lost_after_clean) == (300, 0)


def _port(serve: Any) -> int:
    return int(serve.url.rsplit(":", 1)[1])


@pytest.mark.heavy
def test_pending_memory_stays_near_the_pending_bytes_bound() -> None:
    """40 traces without their root, one 7 MiB attribute each (+785 MB held for the run TTL
    before): with --max-pending-bytes 32 MiB and 16 MiB in flight, serve's memory stays near
    those bounds."""
    serve = _serve_process("--max-pending-bytes", str(32 * MIB),
                           "--max-bytes-in-flight", str(16 * MIB))
    try:
        base = serve.rss_mb()
        peak = base
        for trace in range(40):
            body = _padded_request(7 * MIB, trace=2 * trace + 1)
            while post(_port(serve), body, PROTOBUF)[0] == 429:
                time.sleep(0.2)
            peak = max(peak, serve.rss_mb())
        time.sleep(1)
        peak = max(peak, serve.rss_mb())
        evicted = serve.metric('loopguard_evicted_runs_total{reason="capacity"}')
    finally:
        serve.stop()
    _report(test="40 x 7 MiB pending", rss_before_mb=round(base), rss_peak_mb=round(peak),
            evicted=evicted)
    assert evicted >= 30
    assert peak - base < 32 * 2 + 16 * 6 + 100
