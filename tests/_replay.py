"""Replay recorded spans on a real ``TracerProvider`` with the live processor."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import STATUS_ERROR, SpanRecord

__all__ = ["replay_live"]


def replay_live(records: list[SpanRecord], config: LoopGuardConfig, *,
                downstream: bool = False) -> tuple[list[ReadableSpan], CollectorRegistry]:
    """Replay ``records`` through the live processor; return the exported spans and metrics.

    Spans start and end in their recorded order (times moved to now, so the processor keeps
    the open ones), under their recorded parents. ``downstream``: the exporter is the
    processor's downstream (flagged spans carry ``loopguard.*`` attributes); otherwise it sits
    beside the processor, which puts its evidence on the open agent spans.
    """
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    export = SimpleSpanProcessor(exporter)
    if not downstream:
        provider.add_span_processor(export)
    provider.add_span_processor(LoopGuardSpanProcessor(
        config, metrics=LoopGuardMetrics(registry), downstream=export if downstream else None,
        raise_internal_errors=True))
    tracer = provider.get_tracer("replay")
    shift = time.time_ns() - min(r.start_time_ns for r in records)
    steps = sorted([(r.start_time_ns, 1, i) for i, r in enumerate(records)]
                   + [(r.end_time_ns, 0, i) for i, r in enumerate(records)])
    live: dict[tuple[str, str], Any] = {}

    def start(record: SpanRecord) -> Any:
        parent = live.get((record.trace_id, record.parent_span_id or ""))
        context = trace.set_span_in_context(parent) if parent is not None else Context()
        span = tracer.start_span(record.name, context=context,
                                 attributes=dict(record.attributes),
                                 start_time=record.start_time_ns + shift)
        live[(record.trace_id, record.span_id)] = span
        return span

    for _, phase, index in steps:
        record = records[index]
        span = live.get((record.trace_id, record.span_id))
        if phase == 1:
            if span is None:
                start(record)
            continue
        if span is None:  # ends as it starts
            span = start(record)
        for name, attributes in record.events:
            span.add_event(name, dict(attributes))
        if record.status_code == STATUS_ERROR:
            span.set_status(Status(StatusCode.ERROR, record.status_message or None))
        span.end(end_time=record.end_time_ns + shift)
    provider.shutdown()
    return list(exporter.get_finished_spans()), registry
