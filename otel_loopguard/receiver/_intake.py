"""The receiver's worker thread: decoded batches in, runs checked, their reports out.

One thread owns the run state (``StreamingChecker``), so detection never runs concurrently.
With a backlog, time stands at the arrival of the last batch taken: a trace's reorder window
counts arrivals, never the worker's lag behind them.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from otel_loopguard.receiver._state import ReceiverState
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay.checker import RunReport

__all__ = ["STOP", "Flush", "IntakeWorker"]


class Flush:
    """A marker in the queue: set ``done`` once the worker has checked everything before it."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


STOP: Final = object()
"""The marker that ends the worker."""


class IntakeWorker(ReceiverState):
    """``LoopGuardReceiver``'s worker loop (a base class: it shares the receiver's state)."""

    stream: StreamingChecker
    on_report: Callable[[RunReport], object] | None
    _last_received_ns: int
    _taken_spans: int
    _late_seen: int
    _duplicates_seen: int

    if TYPE_CHECKING:  # the receiver's
        def _take_bytes(self, size: int) -> None: ...

    def _work(self) -> None:
        tick = min(0.25, max(0.01, self.options.reorder_window_seconds / 4))
        while True:
            try:
                item = self._queue.get(timeout=tick)
            except queue.Empty:
                item = None
            if item is STOP:
                self._step(self.stream.flush)
                return
            if isinstance(item, Flush):
                self._step(self.stream.flush)
                item.done.set()
            elif item is not None:
                self._last_received_ns = item.received_ns
                self._taken_spans += len(item.spans)
                self._step(functools.partial(self.stream.add, item.spans, item.payloads,
                                             received_ns=item.received_ns))
                self._take_bytes(-item.held_bytes)
            # With a backlog, time stands at the arrival of the last batch taken: a trace's
            # window only counts arrivals, never the worker's lag behind them.
            now = self._clock() if self._queue.empty() else self._last_received_ns
            self._step(functools.partial(self.stream.poll, now))

    def _step(self, action: Callable[[], list[RunReport]]) -> None:
        try:
            reports = action()
        except Exception as exc:
            self.guard.handle("serve", exc)
            return
        if self._journal is not None:
            waiting = self.forwarder.pending_spans if self.forwarder is not None else 0
            self._journal.settle(self._taken_spans - self.stream.buffered_spans - waiting)
        late = self.stream.late_spans - self._late_seen
        if late:
            self._late_seen += late
            self._counters.spans.labels("late").inc(late)
        duplicates = self.stream.duplicate_spans - self._duplicates_seen
        if duplicates:
            self._duplicates_seen += duplicates
            self._counters.spans.labels("duplicate").inc(duplicates)
        if self.on_report is None:
            return
        for report in reports:
            try:
                self.on_report(report)
            except Exception as exc:
                self.guard.handle("on_report", exc)
