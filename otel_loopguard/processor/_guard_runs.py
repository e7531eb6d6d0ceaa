"""What the enforce-mode guard and the framework integrations ask of the processor by hand."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from otel_loopguard.engine import LoopEngine
from otel_loopguard.exceptions import LoopGuardError
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor._runs import SpanRuns
from otel_loopguard.processor._worker import _SHUTDOWN_SECONDS, SpanWorker
from otel_loopguard.state import InMemoryRunStateStore, RunEntry

__all__ = ["GuardRuns"]


class GuardRuns:
    """``LoopGuardSpanProcessor``'s runs asked for outside the span hooks.

    The enforce-mode guard asks for the run of a live span and counts what it enforced; the
    integrations release a run that has no root span. A mixin: the attributes it declares are
    the processor's.
    """

    engine: LoopEngine
    metrics: LoopGuardMetrics | None
    store: InMemoryRunStateStore
    _runs: SpanRuns
    _worker: SpanWorker | None

    if TYPE_CHECKING:  # the processor's (ModelTurns, ToolCallChecks)
        def _learn_template(self, entry: RunEntry, template: str | None) -> None: ...

        def _ancestry(self, attrs: Mapping[str, Any], parent_id: int | None,
                      want_template: bool, want_agent: bool) -> tuple[str | None, str | None]: ...

        def _release_kept(self, trace_id: int) -> None: ...

    _deferred: dict[int, Any]

    def release_run(self, run_id: str) -> None:
        """Drop the state of a finished run that has no root span (whose end would drop it).

        In the background mode after the spans queued before this call are checked, so a
        run's last call, still queued, does not start the run anew.
        """
        worker = self._worker
        if self._deferred and len(run_id) == 32:  # a trace's run: its model spans kept aside
            try:  # go first (``DeferredTurns``)
                trace_id = int(run_id, 16)
            except ValueError:  # not a trace id: another run's, with none kept aside
                trace_id = -1
            self._release_kept(trace_id)
        if worker is None or worker.caught_up() or not worker.submit(_Release(run_id)):
            self.store.release(run_id)

    def run_for_span(self, span: Any) -> tuple[str, RunEntry]:
        """Return the run id and entry of a live span (used by the enforce-mode guard).

        In the background mode, the spans queued before are checked first, so the guard
        decides on every call that has ended.

        Raises:
            LoopGuardError: on the thread running ``on_decision`` for that run.
        """
        if self._deferred and span.context is not None:
            self._release_kept(span.context.trace_id)
        if self._worker is not None:
            self._worker.flush(_SHUTDOWN_SECONDS)
        attrs = span.attributes or {}
        run_id = self._runs.run_id(span, attrs, span.context.trace_id if span.context else 0)
        entry, _ = self.store.get_or_create(run_id)
        if entry.state.notifying and entry.state.in_callback():
            raise LoopGuardError(
                f"on_decision must not make a guarded tool call in the run it was called for "
                f"(run {run_id}); do that work after the callback returns")
        with entry.state.lock:
            if entry.template is None:
                parent = span.parent.span_id if span.parent is not None else None
                self._learn_template(entry, self._ancestry(attrs, parent, True, False)[0])
        return run_id, entry

    def run_under(self, parent: SpanContext) -> RunEntry | None:
        """Return the run of a span that would start under ``parent`` (used around model calls).

        The run whose ``model_turns`` a model span under ``parent`` adds to: an integration
        compares them before and after a model call to learn whether an instrumentation
        recorded it. In the background mode, the spans queued before are checked first. None
        on the thread running ``on_decision`` for that run (its lock is held).
        """
        if self._deferred:
            self._release_kept(parent.trace_id)
        if self._worker is not None:
            self._worker.flush(_SHUTDOWN_SECONDS)
        entry, _ = self.store.get_or_create(self._runs.run_under(parent.span_id,
                                                                 parent.trace_id))
        return None if entry.state.notifying and entry.state.in_callback() else entry

    def run_summary(self, parent: SpanContext | None = None) -> dict[str, Any] | None:
        """Return ``LoopEngine.summary`` of the run a tool call made now would belong to.

        The run of a span started under ``parent`` (default: the current span), by
        ``run_key``: call it inside the agent's span, before it ends (a trace's run ends with
        its root span). None when no span is open, or that run has no state (no tool call
        and no model span yet, or it ended; after model spans alone its counts are 0). In the
        background mode, the spans queued before are checked first. Safe to call from
        ``on_decision``: there it reads the run whose lock its thread holds.
        """
        if parent is None:
            parent = trace.get_current_span().get_span_context()
        if not parent.is_valid:
            return None
        if self._worker is not None and not self._worker.on_worker_thread():
            if self._deferred:
                self._release_kept(parent.trace_id)
            self._worker.flush(_SHUTDOWN_SECONDS)
        entry = self.store.get(self._runs.run_under(parent.span_id, parent.trace_id))
        if entry is None:
            return None
        state = entry.state
        if state.notifying and state.in_callback():  # this thread holds its lock already
            return self.engine.summary(state)
        with state.lock:
            return self.engine.summary(state)

    def record_enforcement(self, entry: RunEntry, enforcement: str) -> None:
        """Count an enforcement action (``abort`` or ``hint``) for the run's template."""
        if self.metrics is not None:
            self.metrics.record_enforcement(entry.template, enforcement)


class _Release:
    """A queued request to drop a run's state, in order with the spans queued before it."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
