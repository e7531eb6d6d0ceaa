"""How the processor reports a finding: in its metrics, as evidence on a span, as a log event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_loopguard.evidence import EVENT_NAME, EvidenceLog, evidence_attributes
from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics, uncapped_label
from otel_loopguard.otlp._sdk import ForwardedSpan, raw_attributes
from otel_loopguard.processor._live import LiveSpans
from otel_loopguard.types import Action, Decision

__all__ = ["FindingReports", "hex_trace", "with_evidence"]


class FindingReports:
    """``LoopGuardSpanProcessor``'s reports of flagged decisions.

    A mixin: the attributes it declares are the processor's.
    """

    metrics: LoopGuardMetrics | None
    guard: InternalErrorGuard
    downstream: SpanProcessor | None
    live: LiveSpans
    _mode: str
    _span_evidence: bool
    """Whether evidence goes on spans (``evidence`` is ``spans`` or ``both``)."""
    _log: EvidenceLog | None
    """The log events' emitter (``evidence`` is ``logs`` or ``both``), else None."""

    def _finding(self, span: ReadableSpan, decision: Decision, previous: Action,
                 template: str | None, run_id: str) -> ReadableSpan | None:
        if not decision.flagged:
            return None
        label = self._count(template, decision, previous, span)
        return self._annotate(span, decision, run_id, label)

    def _count(self, template: str | None, decision: Decision, previous: Action,
               span: ReadableSpan | Span) -> str:
        """Count a flagged decision, its span's trace the exemplar; return its template label."""
        if self.metrics is None:
            return uncapped_label(template)
        return self.metrics.record_decision(template, decision, self._mode, previous,
                                            trace_id=hex_trace(span))

    def _annotate(self, span: ReadableSpan, decision: Decision, run_id: str,
                  template: str) -> ReadableSpan:
        evidence = evidence_attributes(decision, run_id, self._mode, template)
        self._emit(decision, evidence, span.context, span.end_time)
        if not self._span_evidence:
            return span
        if self.downstream is None:
            parent_id = span.parent.span_id if span.parent is not None else None
            target = self.live.agent_span(parent_id) or self.live.root_span(span)
            if target is not None:
                target.add_event(EVENT_NAME, {**evidence, "loopguard.span_id":
                                              format(span.context.span_id, "016x")})
            return span
        return with_evidence(span, evidence)

    def _emit(self, decision: Decision, evidence: dict[str, Any], context: Any,
              timestamp: int | None) -> None:
        """Emit the finding as a log event (``evidence`` = logs or both); never raises."""
        if self._log is not None:
            try:
                self._log.emit(decision, evidence, context, timestamp)
            except Exception as exc:
                self.guard.handle("log_event", exc)


def hex_trace(span: ReadableSpan | Span) -> str:
    """Return the span's trace id as 32 hex digits (an exemplar's ``trace_id``)."""
    return format(span.context.trace_id, "032x")


def with_evidence(span: ReadableSpan, evidence: Mapping[str, Any]) -> ReadableSpan:
    """Return a copy of the ended ``span`` with the ``loopguard.*`` attributes added.

    The copy keeps the counts of attributes, events and links the SDK's span limits dropped
    from ``span``: a ``ReadableSpan`` built from its fields alone reports none.
    """
    return ForwardedSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes={**raw_attributes(span), **evidence}, events=span.events,
        links=span.links, kind=span.kind, status=span.status, start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope,
        dropped=(span.dropped_attributes, span.dropped_events, span.dropped_links))
