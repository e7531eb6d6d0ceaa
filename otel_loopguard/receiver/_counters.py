"""The receiver's own metrics: requests, spans and forwarding by outcome, and its queue."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from otel_loopguard.metrics._names import (
    FORWARD_FAILURES,
    FORWARD_REASONS,
    FORWARDED,
    FORWARDED_LOG_RECORDS,
    LOG_FORWARD_FAILURES,
    LOG_FORWARD_REASONS,
    RECEIVER_LOG_RECORDS,
    RECEIVER_QUEUE,
    RECEIVER_REQUESTS,
    RECEIVER_SPANS,
)

__all__ = ["LOG_RECORDS", "QUEUE", "REQUESTS", "SPANS", "QueueCollector", "ReceiverCounters"]

REQUESTS: Final = RECEIVER_REQUESTS
"""Counter {protocol, outcome}: export requests by result (ok, partial, throttled, ...)."""
SPANS: Final = RECEIVER_SPANS
"""Counter {outcome}: spans accepted, rejected (malformed), late (their trace had closed) or
duplicate (a span id seen twice in a trace, e.g. an exporter retry), or lost (acknowledged by a
previous run that was killed; counted at start with ``state_file``)."""
LOG_RECORDS: Final = RECEIVER_LOG_RECORDS
"""Counter {outcome}: log records accepted or rejected (malformed), as a logs request's answer
counts them."""
QUEUE: Final = RECEIVER_QUEUE
"""Gauge: decoded batches waiting for the worker."""


class QueueCollector(Collector):
    """The queue's gauge, read when Prometheus scrapes (``size``: the batches waiting)."""

    def __init__(self, size: Callable[[], int]) -> None:
        """Read the queue's length with ``size``."""
        self._size = size

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the gauge."""
        yield GaugeMetricFamily(QUEUE, "Decoded batches waiting for the worker.",
                                value=self._size())


SPAN_OUTCOMES: Final = ("accepted", "rejected", "late", "duplicate", "lost")
LOG_RECORD_OUTCOMES: Final = ("accepted", "rejected")
REQUEST_OUTCOMES: Final = ("ok", "partial", "invalid", "unauthenticated", "too_large",
                           "unsupported", "throttled", "cancelled")
"""The outcomes of a request an alert or panel reads (the rarer server errors: when they come)."""


class ReceiverCounters:
    """The receiver's counters in ``registry`` (None: counted nowhere)."""

    def __init__(self, registry: CollectorRegistry | None, *, forwarding: bool) -> None:
        """Make the counters; with ``forwarding``, a series per failure reason from the start."""
        self.requests = Counter(REQUESTS[:-6], "OTLP export requests by protocol and outcome.",
                                ["protocol", "outcome"], registry=registry)
        self.spans = Counter(SPANS[:-6], "Received spans by outcome (accepted, rejected, "
                             "late, duplicate, lost).", ["outcome"], registry=registry)
        self.log_records = Counter(LOG_RECORDS[:-6], "Received log records by outcome "
                                   "(accepted, rejected).", ["outcome"], registry=registry)
        self._forwarded = Counter(FORWARDED[:-6], "Spans forwarded to --forward-endpoint.",
                                  registry=registry)
        self._forward_failures = Counter(
            FORWARD_FAILURES[:-6], "Spans not forwarded, by reason (export_failed, queue_full, "
            "unencodable).", ["reason"], registry=registry)
        self._forwarded_logs = Counter(
            FORWARDED_LOG_RECORDS[:-6], "Log records forwarded to --forward-endpoint.",
            registry=registry)
        self._log_forward_failures = Counter(
            LOG_FORWARD_FAILURES[:-6], "Log records not forwarded, by reason (export_failed, "
            "queue_full).", ["reason"], registry=registry)
        # Every series of a known label value from the start, at 0: one first seen at n reads
        # as no increase to rate() and increase(), so a panel or alert missed the first burst.
        for outcome in SPAN_OUTCOMES:
            self.spans.labels(outcome)
        for outcome in LOG_RECORD_OUTCOMES:
            self.log_records.labels(outcome)
        for protocol in ("http", "grpc"):
            for outcome in REQUEST_OUTCOMES:
                self.requests.labels(protocol, outcome)
        if forwarding:
            for reason in FORWARD_REASONS:  # a series per reason from the start, for rate()
                self._forward_failures.labels(reason)
            for reason in LOG_FORWARD_REASONS:
                self._log_forward_failures.labels(reason)

    def count_forwarded(self, outcome: str, spans: int) -> None:
        """Count spans the forwarder exported, or did not (``outcome``: the reason)."""
        if outcome == "exported":
            self._forwarded.inc(spans)
        else:
            self._forward_failures.labels(outcome).inc(spans)

    def count_forwarded_logs(self, outcome: str, records: int) -> None:
        """Count log records the log forwarder exported, or did not."""
        if outcome == "exported":
            self._forwarded_logs.inc(records)
        else:
            self._log_forward_failures.labels(outcome).inc(records)
