"""A logs request ``serve`` refuses is not forwarded: the sender's retry would send it twice.

``serve`` forwards a logs request as it came, at once. It used to hand it to the log forwarder
before it queued the request for its worker; when the intake queue filled in the meantime (the
request was admitted, then decoded while other requests took the last places), the request was
forwarded and answered 429, and the sender's retry reached the downstream a second time.
"""

from __future__ import annotations

import json

from _agent_sessions import collector_lines, sessions
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.otlp._request import (
    Decoded,
    RequestError,
    decode_json,
    decode_json_logs_request,
)
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions

_TRACES = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
    "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
    "name": "execute_tool search", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
    "attributes": [{"key": "gen_ai.tool.name", "value": {"stringValue": "search"}}],
}]}]}]}).encode()


def _forwarded(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("loopguard_receiver_forwarded_log_records_total") or 0.0


def test_a_logs_request_refused_after_its_decoding_is_not_forwarded() -> None:
    registry = CollectorRegistry()
    with LoopGuardReceiver(LoopGuardConfig(), registry=CollectorRegistry(),
                           options=ReceiverOptions(http_port=0, grpc_port=None)) as downstream:
        # not started: nothing takes the one batch its intake queue holds
        receiver = LoopGuardReceiver(
            LoopGuardConfig(), registry=registry, raise_internal_errors=True,
            options=ReceiverOptions(http_port=0, grpc_port=None, max_queue=1,
                                    forward_endpoint=downstream.http_url,
                                    forward_protocol="http"))
        body = collector_lines(sessions())[0].encode()

        def decode_while_a_trace_takes_the_last_place(reserve: object) -> Decoded:
            decoded = decode_json_logs_request(body, receiver.agents, forward=True)
            receiver.handle("http", None, lambda _: decode_json(_TRACES, payloads=True))
            return decoded

        try:
            receiver.handle("http", None, decode_while_a_trace_takes_the_last_place)
        except RequestError as error:
            assert error.http_status == 429
        else:
            raise AssertionError("the full intake queue did not refuse the logs request")
        try:
            assert receiver.log_forwarder.force_flush(10)
            assert _forwarded(registry) == 0  # before: the refused request's records, sent
            accepted = collector_lines(sessions())[1].encode()
            receiver._queue.get_nowait()  # the worker's take of the queued trace
            receiver.handle("http", None, lambda _: decode_json_logs_request(
                accepted, receiver.agents, forward=True))
            assert receiver.log_forwarder.force_flush(10)
            assert _forwarded(registry) > 0  # what it accepts, it forwards
        finally:
            receiver.log_forwarder.shutdown(5)
            receiver.forwarder.shutdown()
