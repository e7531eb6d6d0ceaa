"""Forwarding for ``serve``: re-export received spans through the SDK's own OTLP exporter.

The OTLP decoders build an SDK ``ReadableSpan`` for every span they accept (ids, kind, links,
events, status, resource and scope kept; see ``otel_loopguard.otlp``), and they accept only
what protobuf can hold, so every accepted span can be exported. When its trace has been checked,
flagged tool spans get the ``loopguard.*`` evidence attributes, and every span goes to a
``BatchSpanProcessor`` wrapping ``OTLPSpanExporter`` (gRPC or HTTP/protobuf), so the evidence
shows up next to the spans in Tempo or Jaeger.

Every span handed over ends in one outcome: exported, or dropped for one of the reasons of
``FORWARD_FAILURES`` (the downstream failed, the queue was full, or the span could not be
encoded; such a span is dropped alone, not with the batch it was in).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_loopguard.metrics._names import FORWARD_REASONS
from otel_loopguard.receiver._stream import ClosedTrace

__all__ = ["Forwarder", "make_exporter"]

logger = logging.getLogger(__name__)

_DEFAULT_MAX_QUEUE_SIZE: Final = 65_536
EXPORTED: Final = "exported"
EXPORT_FAILED, QUEUE_FULL, UNENCODABLE = FORWARD_REASONS


def make_exporter(endpoint: str, protocol: Literal["grpc", "http"] = "grpc") -> SpanExporter:
    """Return the SDK's OTLP span exporter for ``endpoint``.

    gRPC endpoints are ``host:port`` or a URL; plaintext needs ``http://`` (anything else uses
    TLS). HTTP endpoints are URLs; ``/v1/traces`` is appended when the URL has no path.
    Headers, certificates and timeouts come from the exporter's ``OTEL_EXPORTER_OTLP_*``
    variables.
    """
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,  # only the chosen protocol's stack is imported
        )

        return GrpcExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    if urlsplit(endpoint).path in ("", "/"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint)


class Forwarder:
    """Exports the spans of checked traces, evidence added to the flagged ones.

    Thread-safe: ``forward`` runs on the receiver's worker thread, export on the
    ``BatchSpanProcessor`` thread. When the downstream is slower than the intake, the bounded
    queue drops spans instead of blocking detection.

    Args:
        exporter: the span exporter, e.g. from :func:`make_exporter`.
        max_queue_size: spans waiting for export before new ones are dropped (65,536).
        on_outcome: called with ``(outcome, spans)``: ``exported``, ``export_failed``,
            ``queue_full`` or ``unencodable``, on the thread that saw it.
    """

    def __init__(self, exporter: SpanExporter, *,
                 max_queue_size: int = _DEFAULT_MAX_QUEUE_SIZE,
                 on_outcome: Callable[[str, int], None] | None = None) -> None:
        self._on_outcome = on_outcome or _ignore
        self._exporter = _SeparatingExporter(exporter, self._on_outcome)
        self.processor = BatchSpanProcessor(self._exporter, max_queue_size=max_queue_size,
                                            schedule_delay_millis=200)
        self._max_queue_size = max_queue_size
        self._handed = 0
        """Spans handed to the processor; minus the exporter's ``taken``, those it queues."""

    def forward(self, closed: ClosedTrace) -> None:
        """Export the spans of a checked trace, evidence added to the flagged ones."""
        if closed.payloads is None:
            return
        evidence = closed.evidence
        on_end = self.processor.on_end
        for record, span in zip(closed.spans, closed.payloads, strict=True):
            if span is None:
                continue
            if self._handed - self._exporter.taken >= self._max_queue_size:
                self._on_outcome(QUEUE_FULL, 1)  # the processor drops its oldest span
            self._handed += 1
            extra = evidence.get(record.span_id) if evidence else None
            on_end(_with_attributes(span, extra) if extra else span)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued so far."""
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Export what is queued and shut the exporter down."""
        self.processor.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK


class _SeparatingExporter(SpanExporter):
    """Wraps an exporter so that a span that cannot be encoded fails alone, not its batch.

    The SDK's OTLP exporters encode a whole batch at once, and one bad span fails them all
    (gRPC raises, HTTP logs and returns FAILURE). After a failed export each span is encoded
    on its own; the ones that fail are dropped and counted, and the rest is exported again.
    """

    def __init__(self, inner: SpanExporter, on_outcome: Callable[[str, int], None]) -> None:
        self._inner = inner
        self._on_outcome = on_outcome
        self._lock = threading.Lock()
        self.taken = 0
        """Spans the batch processor has taken from its queue so far."""
        self._logged = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.taken += len(spans)
        if self._export(spans):
            return SpanExportResult.SUCCESS
        good = [span for span in spans if _encodes(span)]
        if len(good) == len(spans):
            self._on_outcome(EXPORT_FAILED, len(spans))
            return SpanExportResult.FAILURE
        self._on_outcome(UNENCODABLE, len(spans) - len(good))
        if not self._logged:
            self._logged = True
            logger.warning("otel-loopguard: dropped %d forwarded span(s) that cannot be encoded "
                           "as OTLP (counted in loopguard_receiver_forward_failures_total; "
                           "logged once)", len(spans) - len(good))
        if good and self._export(good):
            return SpanExportResult.SUCCESS
        self._on_outcome(EXPORT_FAILED, len(good))
        return SpanExportResult.FAILURE

    def _export(self, spans: Sequence[ReadableSpan]) -> bool:
        try:
            ok = self._inner.export(spans) is SpanExportResult.SUCCESS
        except Exception:  # the gRPC exporter raises when the batch does not encode
            ok = False
        if ok:
            self._on_outcome(EXPORTED, len(spans))
        return ok

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _encodes(span: ReadableSpan) -> bool:
    try:
        encode_spans([span]).SerializeToString()
    except Exception:
        return False
    return True


def _ignore(outcome: str, count: int) -> None:
    """Count nothing (no metrics)."""


def _with_attributes(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes={**(span.attributes or {}), **extra}, events=span.events, links=span.links,
        kind=span.kind, status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)
