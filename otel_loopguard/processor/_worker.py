"""The processor's background worker: detection off the agent's thread.

``on_end`` appends the ended span to a bounded queue and returns; one daemon thread takes the
spans in order, runs the detectors and hands each span to the downstream processor, as
``BatchSpanProcessor`` defers its export. The agent's thread pays for one ``deque.append`` and,
when the worker sleeps, one ``Event.set``.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Final

__all__ = ["SpanWorker"]

logger = logging.getLogger("otel_loopguard")

_IDLE_WAIT_SECONDS: Final = 1.0
"""Longest sleep between two looks at the queue (a safety net; appends wake the worker)."""


class _Marker:
    """An item the worker answers by setting ``done`` once everything before it is handled."""

    __slots__ = ("done", "stop")

    def __init__(self, *, stop: bool = False) -> None:
        self.done = threading.Event()
        self.stop = stop


class SpanWorker:
    """A bounded queue of items handled in order by one daemon thread.

    Thread-safe: ``submit`` is called on any application thread and never blocks; ``handle``
    runs on the worker thread only, one item at a time, so whatever it touches needs no lock
    against other items. After ``os.fork`` the child starts with an empty queue and its own
    thread (the parent's thread does not exist there).

    Args:
        handle: called with each item, on the worker thread; what it raises is logged and
            dropped (the worker never dies).
        max_queue_size: items waiting before ``submit`` refuses more.
        name: the thread's name.
    """

    def __init__(self, handle: Callable[[Any], object], *, max_queue_size: int,
                 name: str = "otel-loopguard") -> None:
        if max_queue_size < 1:
            raise ValueError(f"max_queue_size must be >= 1, got {max_queue_size}")
        self._handle = handle
        self.max_queue_size = max_queue_size
        self._name = name
        self._start()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_restarter(weakref.WeakMethod(self._start)))

    def _start(self) -> None:
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._idle = False
        """True while the worker sleeps (or is about to): ``submit`` then wakes it."""
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        """Return how many items wait."""
        return len(self._queue)

    def caught_up(self) -> bool:
        """Return True when nothing is queued and the worker is not handling an item."""
        return self._idle and not self._queue

    def submit(self, item: Any) -> bool:
        """Queue ``item``; return False (nothing queued) when the queue is full or stopped."""
        queue = self._queue
        if len(queue) >= self.max_queue_size or self._stopped:
            return False
        queue.append(item)
        # The worker sets ``_idle`` before it looks at the queue a last time and sleeps, so an
        # item appended after that look finds ``_idle`` set and wakes it.
        if self._idle:
            self._wake.set()
        return True

    def flush(self, timeout_seconds: float) -> bool:
        """Wait until every item queued before this call is handled; False on timeout."""
        return self._wait_for(_Marker(), timeout_seconds)

    def shutdown(self, timeout_seconds: float) -> bool:
        """Handle what is queued, then stop the thread; False when it did not finish in time."""
        if self._stopped:
            return True
        marker = _Marker(stop=True)
        done = self._wait_for(marker, timeout_seconds)
        self._stopped = True
        return done

    def _wait_for(self, marker: _Marker, timeout_seconds: float) -> bool:
        if threading.current_thread() is self._thread:  # a handler flushing: already in order
            return True
        if self._stopped or not self._thread.is_alive():
            return True
        self._queue.append(marker)  # markers are never refused: they hold nothing
        self._wake.set()
        return marker.done.wait(timeout_seconds)

    def _run(self) -> None:
        queue, wake = self._queue, self._wake
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                wake.clear()
                self._idle = True
                if not queue:
                    wake.wait(_IDLE_WAIT_SECONDS)
                self._idle = False
                continue
            if type(item) is _Marker:
                item.done.set()
                if item.stop:
                    return
                continue
            try:
                self._handle(item)
            except BaseException:  # the worker must outlive any item
                logger.exception("otel-loopguard: error in the background worker")


def _restarter(start: weakref.WeakMethod[Callable[[], None]]) -> Callable[[], None]:
    """Return the fork hook that restarts a worker, if it still exists, in the child."""
    def restart() -> None:
        method = start()
        if method is not None:
            method()
    return restart
