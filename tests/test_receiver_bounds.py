"""``serve`` keeps what it accepted and bounds its memory in bytes on every path.

Real parts: the SDK's OTLP exporters, raw gRPC calls and sockets against ``serve`` on
127.0.0.1 port 0, a counting downstream receiver. Nothing asserts a duration; memory is read
from /proc as a bound plus a fixed margin, in a ``serve`` subprocess.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from test_receiver import EXPORT, PROTOBUF, TOKEN, Served, post
from test_receiver_faults import _stalled_calls
from test_receiver_load import _report, _serve_process

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
    for key, value in (("gen_ai.tool.name", "search"), ("gen_ai.tool.call.result", "x" * size)):
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
                status = post(receiver.http_port, _padded_request(MIB - 200), {
                    **PROTOBUF, "Authorization": f"Bearer {TOKEN}"})[0]
            finally:
                release.set()
                channel.close()
                for call in calls:
                    call.exception(timeout=10)
        assert (held, status) == (2 * MIB, 429)

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
