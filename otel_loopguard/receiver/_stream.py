"""Time-based run grouping for spans that arrive late, in batches and out of order (``serve``).

Spans are buffered per trace. A trace is assembled and run through the engine when

* its root span has arrived and ``reorder_window_seconds`` of wall-clock time have passed since
  (time of arrival, not span times: spans reach a receiver only after they end, in export
  batches, in any order), or
* a span whose parent is remote (``SpanRecord.parent_is_remote``: a service running under a
  propagated context sends no root) arrived as long ago and no span of the trace still waits
  for a local parent (else it waits for more spans, its root, or the idle TTL), or
* it is a coding agent's session (``coding_agents``), which has no root: what arrived of it
  ``reorder_window_seconds`` ago, each such segment continuing the session's run, or
* it has been idle (no new span) for ``idle_ttl_seconds``, or
* the buffer is full (``max_traces`` traces, ``max_spans`` spans or ``max_bytes`` bytes, as
  ``span_bytes`` counts them): the trace touched least recently is checked and handed on
  early, never dropped, and counted as a ``capacity`` eviction.

Spans repeated within a trace (an exporter retrying a request that did get through) are checked
once. Spans of a trace that has closed are late: counted and forwarded, never checked; after a
close on a remote-parented span, only those of the segments checked (``_traces``): the
others open a new segment of the trace, as a second call of the service would.

Assembly, run grouping and the engine are those of ``check`` (a :class:`Checker` underneath), so
the reports are the same as ``check``'s whenever each trace is complete when it closes.
Conversation-keyed runs span traces; they close after ``idle_ttl_seconds`` without a new trace.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any, Final

from otel_loopguard._findings import loop_action
from otel_loopguard.adapters import DEFAULT_ADAPTERS
from otel_loopguard.assembly import LONE_TOOL_CALL_HINT
from otel_loopguard.coding_agents._records import fill_copy, is_session_run
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.evidence import evidence_attributes
from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics, uncapped_label
from otel_loopguard.receiver._size import spans_bytes
from otel_loopguard.receiver._traces import (
    ClosedTrace,
    ClosedTraces,
    OpenTrace,
    segment_complete,
)
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.state import seconds_to_ns
from otel_loopguard.types import Action, Decision, SpanAdapter, SpanRecord, ToolCall
from otel_loopguard.waste import Waste

__all__ = ["ClosedTrace", "StreamingChecker"]

_DEFAULT_REORDER_WINDOW_SECONDS: Final = 5.0
_DEFAULT_MAX_SPANS: Final = 1_000_000
_DEFAULT_MAX_BYTES: Final = 128 << 20
_MIN_CLOSED_MEMORY: Final = 10_000
_SPAN_ID: Final = attrgetter("span_id")
_LOG: Final = logging.getLogger("otel_loopguard")


class StreamingChecker:
    """Groups streamed spans into runs by time and checks them like ``check`` does.

    Not thread-safe: ``serve`` calls it from its one worker thread only (the size properties may
    be read from any thread).

    Args:
        config: detector and run settings (``run_key``, ``max_runs``, ``run_ttl_seconds`` ...).
        adapters: span adapters; default GenAI, OpenInference, OpenLLMetry, Logfire.
        metrics: where tool calls and findings are counted; default None (not counted).
        reorder_window_seconds: how long after its root span arrived a trace waits for
            stragglers (5.0).
        idle_ttl_seconds: a trace without a new span for this long closes even without its
            root, and so does a conversation run without a new trace; default
            ``config.run_ttl_seconds``.
        max_traces: open traces before the least recently touched is closed early; default
            ``config.max_runs``.
        max_spans: buffered spans before the least recently touched trace is closed early
            (1,000,000).
        max_bytes: buffered bytes (``span_bytes``, SDK spans included when kept) before the
            least recently touched trace is closed early (128 MiB).
        clock: monotonic nanoseconds; default ``time.monotonic_ns``.
        on_trace: called with every ``ClosedTrace`` (and with late spans); when set, ``add``
            keeps the payloads and the evidence is collected (used for forwarding).
        raise_internal_errors: let errors in assembly or detection propagate (tests).
    """

    def __init__(self, config: LoopGuardConfig | None = None, *,
                 adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS,
                 metrics: LoopGuardMetrics | None = None,
                 reorder_window_seconds: float = _DEFAULT_REORDER_WINDOW_SECONDS,
                 idle_ttl_seconds: float | None = None, max_traces: int | None = None,
                 max_spans: int = _DEFAULT_MAX_SPANS, max_bytes: int = _DEFAULT_MAX_BYTES,
                 clock: Callable[[], int] = time.monotonic_ns,
                 on_trace: Callable[[ClosedTrace], object] | None = None,
                 raise_internal_errors: bool = False) -> None:
        self.config = config or LoopGuardConfig()
        if reorder_window_seconds < 0:
            raise ValueError(f"reorder_window_seconds must be >= 0, got {reorder_window_seconds}")
        if max_spans < 1:
            raise ValueError(f"max_spans must be >= 1, got {max_spans}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.metrics = metrics
        self.on_trace = on_trace
        self._clock = clock
        self._window_ns = seconds_to_ns(reorder_window_seconds)
        ttl = self.config.run_ttl_seconds if idle_ttl_seconds is None else idle_ttl_seconds
        self._idle_ns = seconds_to_ns(ttl)
        self.max_traces = max_traces or self.config.max_runs
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self._mode = self.config.mode
        self._checker = Checker(self.config, adapters=adapters, on_event=self._on_event,
                                clock=clock, on_waste=self._on_waste if metrics else None)
        self.guard = InternalErrorGuard(metrics.record_internal_error if metrics else None,
                                        raise_errors=raise_internal_errors)
        # Traces in least-recently-touched order; traces whose window started, in that order.
        self._traces: OrderedDict[str, OpenTrace] = OrderedDict()
        self._rooted: OrderedDict[str, int] = OrderedDict()
        self._closed = ClosedTraces(max(self.max_traces, _MIN_CLOSED_MEMORY))
        self._highest: dict[str, Action] = {}
        """Open run → the highest action of its loop findings (budgets left out)."""
        self._evidence: dict[str, dict[str, Any]] = {}
        self._calls: dict[tuple[str | None, str, str | None], list[int]] = {}
        """(template, tool, service) → [tool calls, runs they were the first of], not yet in
        the metrics: counted once per ``add``, ``poll`` or ``flush``, in first-seen order."""
        self.buffered_spans = 0
        self.buffered_bytes = 0
        self.late_spans = 0
        self.duplicate_spans = 0
        self._warned_unparented = False

    @property
    def open_traces(self) -> int:
        """Return how many traces are buffered."""
        return len(self._traces)

    @property
    def open_runs(self) -> int:
        """Return how many runs are held: buffered traces plus open conversation runs."""
        return len(self._traces) + self._checker.open_runs

    def add(self, spans: Sequence[SpanRecord], payloads: Sequence[Any] | None = None, *,
            received_ns: int | None = None) -> list[RunReport]:
        """Buffer a batch of spans; return the reports of runs closed early to stay in bounds.

        Spans of a trace that already closed are late: they are counted in ``late_spans``,
        handed to ``on_trace`` (flagged ``late``) and otherwise ignored; in a trace closed on a
        remote-parented span, only the copies and children of spans already checked are.

        Args:
            spans: the batch, in any order.
            payloads: one object per span, handed back in ``ClosedTrace.payloads``.
            received_ns: when the batch arrived (``clock`` time); default now. The reorder
                window and the idle TTL count from arrival, not from processing.
        """
        now = self._clock() if received_ns is None else received_ns
        keep = self.on_trace is not None
        sizes = spans_bytes(spans, payloads)
        late: list[int] = []
        traces, rooted, closed = self._traces, self._rooted, self._closed
        added = 0
        current: str | None = None
        trace: OpenTrace | None = None
        known: set[str] | None = None  # the span ids of its segments checked, if it has any
        for index, span in enumerate(spans):
            trace_id = span.trace_id
            if trace_id != current:  # a request holds each trace's spans together, mostly
                current = trace_id
                trace, known = self._touch(trace_id, now)
            if known is not None and (span.span_id in known or span.parent_span_id in known):
                closed.remember(known, span.span_id)
                late.append(index)
                continue
            if trace is None:
                if known is None and trace_id in closed:
                    late.append(index)
                    continue
                trace = traces[trace_id] = OpenTrace([], [] if keep else None, now)
                if is_session_run(trace_id):  # no root ever comes: checked window by window
                    trace.root_seen_ns = now
                    rooted[trace_id] = now
            trace.spans.append(span)
            size = sizes[index]
            trace.bytes += size
            added += size
            kept = trace.payloads
            if kept is not None:  # each span's payload and size, for ``on_trace``
                kept.append(payloads[index] if payloads is not None else None)
                trace.sizes.append(size)
            if span.parent_span_id is None:
                if not trace.has_root:
                    self._root_arrived(trace_id, trace, now)
            elif span.parent_is_remote and trace.root_seen_ns is None:
                trace.root_seen_ns = now
                rooted[trace_id] = now
        self.buffered_bytes += added
        self.buffered_spans += len(spans) - len(late)
        if late:
            self._late(spans, payloads, late, sizes)
        return self._counted(self._shrink())

    def poll(self, now_ns: int | None = None) -> list[RunReport]:
        """Close the traces and runs that are due; return their reports.

        Args:
            now_ns: the time to judge by; default ``clock()``. A receiver with a backlog passes
                the arrival time of the last batch it added, so that spans still queued behind
                it are not late merely because processing lags.
        """
        now = self._clock() if now_ns is None else now_ns
        out: list[RunReport] = []
        while self._rooted:
            trace_id, seen = next(iter(self._rooted.items()))
            if now - seen < self._window_ns:
                break
            trace = self._traces[trace_id]
            if trace.has_root or is_session_run(trace_id) or segment_complete(trace.spans):
                self._close(trace_id, out)
            else:  # a downstream service's span, its caller's still to come: wait for them
                del self._rooted[trace_id]
                trace.waiting = True
        while self._traces:
            trace_id, trace = next(iter(self._traces.items()))
            if now - trace.touched_ns < self._idle_ns:
                break
            self._close(trace_id, out, evicted="ttl")
        expired = self._collect(self._checker.expire(now - self._idle_ns))
        if expired and self.metrics is not None:
            self.metrics.record_eviction("ttl", len(expired))
        return self._counted(out + expired)

    def flush(self) -> list[RunReport]:
        """Close every trace and run (shutdown); return their reports."""
        out: list[RunReport] = []
        while self._traces:
            self._close(next(iter(self._traces)), out)
        return self._counted(out + self._collect(self._checker.flush()))

    # --- internals ---------------------------------------------------------------------------
    def _touch(self, trace_id: str, now: int) -> tuple[OpenTrace | None, set[str] | None]:
        """Return the open trace (None if not open) and its checked segments' span ids."""
        trace = self._traces.get(trace_id)
        if trace is not None:
            self._traces.move_to_end(trace_id)
            trace.touched_ns = now
            if trace.waiting:  # a new span: it may be the parent that was missing
                trace.waiting = False
                self._rooted[trace_id] = now
        return trace, self._closed.segments(trace_id)

    def _root_arrived(self, trace_id: str, trace: OpenTrace, now: int) -> None:
        """Start the trace's window at its own root (again after a remote-parented span's)."""
        trace.has_root, trace.waiting, trace.root_seen_ns = True, False, now
        self._rooted.pop(trace_id, None)
        self._rooted[trace_id] = now

    def _shrink(self) -> list[RunReport]:
        out: list[RunReport] = []
        while self._traces and (len(self._traces) > self.max_traces
                                or self.buffered_spans > self.max_spans
                                or self.buffered_bytes > self.max_bytes):
            self._close(next(iter(self._traces)), out, evicted="capacity")
        return out

    def _close(self, trace_id: str, out: list[RunReport], evicted: str | None = None) -> None:
        trace = self._traces.pop(trace_id)
        self._rooted.pop(trace_id, None)
        self.buffered_spans -= len(trace.spans)
        self.buffered_bytes -= trace.bytes
        self._closed.close(trace_id, trace.spans,
                           segmented=not trace.has_root and trace.root_seen_ns is not None)
        if evicted is not None and self.metrics is not None:
            self.metrics.record_eviction(evicted)
        self._evidence = {}
        if len(set(map(_SPAN_ID, trace.spans))) < len(trace.spans):
            self._dedupe(trace)
        try:
            out.extend(self._collect(self._checker.feed_trace(trace_id, trace.spans)))
        except Exception as exc:
            self.guard.handle("serve", exc)
        if self.on_trace is not None:
            self._hand_over(ClosedTrace(trace_id, trace.spans, trace.payloads, self._evidence,
                                        sizes=trace.sizes))

    def _dedupe(self, trace: OpenTrace) -> None:
        """Drop repeated span ids (exporters retry, so delivery is at least once).

        In a coding agent's session, the two copies of one call (its log event and its span)
        carry different parts of it: the copy kept is completed from the other (``fill_copy``),
        whichever arrived first, as ``check`` does.
        """
        seen: dict[str, SpanRecord] = {}
        keep: list[int] = []
        session = is_session_run(trace.spans[0].trace_id)
        for index, span in enumerate(trace.spans):
            kept = seen.get(span.span_id)
            if kept is None:
                seen[span.span_id] = span
                keep.append(index)
            elif session:
                fill_copy(kept, span)
        if not session:  # received spans only, as ``_late``
            self.duplicate_spans += len(trace.spans) - len(keep)
        trace.spans = [trace.spans[i] for i in keep]
        if trace.payloads is not None:  # kept for ``on_trace``, with the sizes
            trace.sizes = [trace.sizes[i] for i in keep]
            trace.payloads = [trace.payloads[i] for i in keep]

    def _collect(self, reports: Iterator[RunReport]) -> list[RunReport]:
        out = list(reports)
        for report in out:
            self._highest.pop(report.run_id, None)
            if report.unparented_tool_calls:
                self._unparented(report.unparented_tool_calls)
        return out

    def _unparented(self, count: int) -> None:
        """Report tool calls with no parent and no conversation id (logged once)."""
        if self.metrics is not None:
            self.metrics.record_unparented(self.config.run_key, count)
        if not self._warned_unparented:
            self._warned_unparented = True
            _LOG.warning("otel-loopguard serve: %s", LONE_TOOL_CALL_HINT)

    def _late(self, spans: Sequence[SpanRecord], payloads: Sequence[Any] | None,
              indices: list[int], sizes: list[int]) -> None:
        # received spans only: a coding agent's records are loopguard's, not the sender's
        self.late_spans += sum(not is_session_run(spans[i].trace_id) for i in indices)
        if self.on_trace is None:
            return
        picked = [spans[i] for i in indices]
        extra = [payloads[i] if payloads is not None else None for i in indices]
        self._hand_over(ClosedTrace("", picked, extra, late=True,
                                    sizes=[sizes[i] for i in indices]))

    def _hand_over(self, closed: ClosedTrace) -> None:
        try:
            self.on_trace(closed)  # type: ignore[misc]  # checked by the callers
        except Exception as exc:
            self.guard.handle("forward", exc)

    def _counted(self, reports: list[RunReport]) -> list[RunReport]:
        """Put the tool calls counted since the last time into the metrics; return ``reports``.

        Called before any other metric with a capped label is recorded too, so that label
        values meet their caps in the order the calls came, as if each was counted at once.
        """
        calls, self._calls = self._calls, {}
        if calls:
            record = self.metrics.record_calls  # type: ignore[union-attr]  # counted with metrics
            for (template, tool, service), (count, runs) in calls.items():
                try:
                    record(template, tool, count, runs=runs, service=service)
                except Exception as exc:
                    self.guard.handle("serve", exc)
        metrics = self.metrics
        if metrics is not None and metrics.multiprocess:  # a gauge set here, not read at scrape
            metrics.refresh_open_runs()
        return reports

    def _on_waste(self, report: RunReport, waste: Waste) -> None:
        self._counted([])
        self.metrics.record_waste(report.prompt_template, waste,  # type: ignore[union-attr]  # set
                                  report.trace_ids[-1] if report.trace_ids else None,
                                  service=report.service_name)

    def _on_event(self, report: RunReport, decision: Decision, event: Any) -> None:
        metrics = self.metrics
        if metrics is not None and isinstance(event, ToolCall):
            key = (report.prompt_template, event.tool, report.service_name)
            counts = self._calls.get(key)
            if counts is None:
                counts = self._calls[key] = [0, 0]
            counts[0] += 1
            if report.tool_calls == 1:
                counts[1] += 1
        if not decision.flagged:
            return
        if metrics is not None:
            self._counted([])
        previous = self._highest.get(report.run_id, Action.CONTINUE)
        looped = loop_action(decision)
        if looped > previous:
            self._highest[report.run_id] = looped
        template = report.prompt_template
        if metrics is not None:
            trace_id = getattr(event, "trace_id", None) or (
                report.trace_ids[-1] if report.trace_ids else None)
            label = metrics.record_decision(template, decision, self._mode, previous,
                                            trace_id=trace_id, service=report.service_name)
        else:
            label = uncapped_label(template)
        if self.on_trace is not None and decision.span_id:
            self._evidence[decision.span_id] = evidence_attributes(decision, report.run_id,
                                                                   self._mode, label)
