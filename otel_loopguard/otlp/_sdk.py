"""The OpenTelemetry SDK's spans: to ``SpanRecord`` (live processor) and from OTLP (forwarding).

``raw_attributes`` and ``span_record_from_readable`` read the SDK's private span fields; so do
the live processor's ``on_start`` and ``on_end``, inline, on every span (a call here would cost
more than the four reads; tests/test_otlp.py names the fields). ``readable_span`` builds the
SDK span that ``serve`` forwards from the fields an OTLP decoder read (the decoders call it; it
never reads OTLP itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from otel_loopguard.types import STATUS_ERROR, SpanRecord

__all__ = ["EventFields", "ForwardedSpan", "LinkFields", "raw_attributes", "readable_span",
           "sdk_resource", "sdk_scope", "span_record_from_readable"]

_KINDS: Final = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT,
                 4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_PARENT_IS_REMOTE: Final = 0x200
"""``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` of OTLP ``Span.flags``."""

LinkFields = tuple[int, int, str, Mapping[str, Any], int, int]
"""A link as the decoders read it: trace id, span id, trace state, attributes, its dropped
attributes count and its OTLP ``Link.flags``."""
EventFields = tuple[str, int, Mapping[str, Any], int]
"""An event as the decoders read it: name, time (Unix ns), attributes, dropped attributes."""
_HAS_IS_REMOTE: Final = 0x100
"""``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK``: the is-remote bit is known."""


class ForwardedSpan(ReadableSpan):
    """An SDK span built from fields that keeps the dropped counts it came with.

    A received span to forward, or the live processor's copy of a flagged span with its
    evidence. A ``ReadableSpan`` built from fields counts only what limits dropped from
    those; a received span's counts are the sender's, a copy's the original's, and the
    SDK's OTLP encoder writes what these properties return.
    """

    def __init__(self, *, dropped: tuple[int, int, int] = (0, 0, 0), **fields: Any) -> None:
        """Take ``ReadableSpan``'s fields, and the dropped attributes, events and links."""
        super().__init__(**fields)
        self._dropped = dropped

    @property
    def dropped_attributes(self) -> int:
        """Return the attributes the sender dropped."""
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        """Return the events the sender dropped."""
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        """Return the links the sender dropped."""
        return self._dropped[2]

    def with_attributes(self, extra: Mapping[str, Any]) -> ForwardedSpan:
        """Return this span with ``extra`` attributes added (the loopguard evidence)."""
        return ForwardedSpan(
            name=self.name, context=self.context, parent=self.parent, resource=self.resource,
            attributes={**(self.attributes or {}), **extra}, events=self.events,
            links=self.links, kind=self.kind, status=self.status, start_time=self.start_time,
            end_time=self.end_time, instrumentation_scope=self.instrumentation_scope,
            dropped=self._dropped)


class _ForwardedEvent(Event):
    """An event of a received span, with the dropped attributes count it came with."""

    def __init__(self, name: str, attributes: Mapping[str, Any], timestamp: int,
                 dropped: int) -> None:
        super().__init__(name, attributes, timestamp, limit=None)
        self._dropped = dropped

    @property
    def dropped_attributes(self) -> int:
        """Return the attributes the sender dropped."""
        return self._dropped


class _ForwardedLink(Link):
    """A link of a received span, with the dropped attributes count it came with."""

    def __init__(self, context: SpanContext, attributes: Mapping[str, Any],
                 dropped: int) -> None:
        super().__init__(context, attributes)
        self._dropped = dropped

    @property
    def dropped_attributes(self) -> int:
        """Return the attributes the sender dropped."""
        return self._dropped


# --- SDK span -> SpanRecord ----------------------------------------------------------------
def raw_attributes(span: Any) -> Mapping[str, Any]:
    """Return a span's attributes as a plain ``dict`` when the SDK allows, for fast reads.

    ``span.attributes`` is a ``MappingProxyType`` over ``BoundedAttributes``, whose ``in`` and
    ``get`` run Python code (``collections.abc.Mapping``); the hot path reads several keys of
    every span. The SDK keeps the values in ``BoundedAttributes._dict`` (a private name, checked
    at run time: any other shape falls back to the public property). Callers only read it.
    """
    try:
        inner = span._attributes._dict
    except AttributeError:
        inner = None
    if isinstance(inner, dict):
        return inner
    attributes: Mapping[str, Any] = span.attributes or {}
    return attributes


def span_record_from_readable(span: ReadableSpan) -> SpanRecord:
    """Return the record of a finished SDK span without copying its attributes.

    The record shares the span's read-only attribute views, which never change once the span
    has ended.

    Args:
        span: a span handed to ``SpanProcessor.on_end``.

    Returns:
        The record; a span without a context (never the case for SDK spans) gets zero ids.
    """
    context = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanRecord(
        trace_id=format(context.trace_id if context else 0, "032x"),
        span_id=format(context.span_id if context else 0, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent else None,
        name=span.name,
        start_time_ns=span.start_time or 0,
        end_time_ns=span.end_time or 0,
        attributes=raw_attributes(span),
        status_code=span.status.status_code.value,
        status_message=span.status.description or "",
        scope_name=scope.name if scope else "",
        resource=span.resource.attributes,
        events=tuple((e.name, e.attributes or {}) for e in span.events),
        parent_is_remote=parent.is_remote if parent else False,
    )


# --- decoded OTLP fields -> SDK span (forwarding) -----------------------------------------
def sdk_resource(attributes: Mapping[str, Any], schema_url: str) -> Resource:
    """Return the SDK resource of one ``ResourceSpans``."""
    return Resource(attributes, schema_url or None)


def sdk_scope(name: str, version: str, schema_url: str,
              attributes: Mapping[str, Any]) -> InstrumentationScope:
    """Return the SDK instrumentation scope of one ``ScopeSpans``."""
    return InstrumentationScope(name, version or None, schema_url or None, attributes)


def readable_span(record: SpanRecord, *, attributes: Mapping[str, Any], kind: int,
                  trace_state: str, flags: int, events: Sequence[EventFields],
                  links: Sequence[LinkFields], resource: Resource,
                  scope: InstrumentationScope,
                  dropped: tuple[int, int, int] = (0, 0, 0)) -> ForwardedSpan:
    """Return the SDK span of a decoded OTLP span, ready for an SDK exporter.

    Args:
        record: the span's record (ids, name, times, status).
        attributes: its attributes with bytes values kept as bytes.
        kind: the OTLP ``SpanKind`` number (unknown numbers become INTERNAL).
        trace_state: the W3C ``tracestate`` text.
        flags: OTLP ``Span.flags`` (W3C trace flags and the parent's is-remote bit).
        events: ``(name, time_unix_nano, attributes)`` of each event.
        links: the span's links.
        resource: from :func:`sdk_resource`.
        scope: from :func:`sdk_scope`.
        dropped: the span's dropped attributes, events and links counts.

    A link is remote unless its flags say it is not (an unknown is-remote bit: remote).
    """
    trace_id = int(record.trace_id, 16)
    context = SpanContext(trace_id, int(record.span_id, 16), is_remote=False,
                          trace_flags=TraceFlags((flags & 0xFF) | TraceFlags.SAMPLED),
                          trace_state=_trace_state(trace_state))
    parent = SpanContext(trace_id, int(record.parent_span_id, 16),
                         is_remote=bool(flags & _PARENT_IS_REMOTE),
                         trace_flags=_SAMPLED) if record.parent_span_id else None
    code = record.status_code
    return ForwardedSpan(
        name=record.name, context=context, parent=parent, resource=resource,
        attributes=attributes,
        events=tuple(_ForwardedEvent(name, attrs, time, lost)
                     for name, time, attrs, lost in events),
        links=tuple(_ForwardedLink(SpanContext(
            link_trace, link_span, trace_flags=_SAMPLED, trace_state=_trace_state(state),
            is_remote=not link_flags & _HAS_IS_REMOTE or bool(link_flags & _PARENT_IS_REMOTE)),
            attrs, lost) for link_trace, link_span, state, attrs, lost, link_flags in links),
        kind=_KINDS.get(kind, SpanKind.INTERNAL),
        status=Status(StatusCode(code if code in (0, 1, 2) else 0),
                      record.status_message if code == STATUS_ERROR else None),
        start_time=record.start_time_ns, end_time=record.end_time_ns,
        instrumentation_scope=scope, dropped=dropped)


def _trace_state(text: str) -> TraceState | None:
    return TraceState.from_header([text]) if text else None
