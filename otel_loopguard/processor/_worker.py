"""The processor's background worker: detection off the agent's thread.

``on_end`` appends the ended span to a bounded queue and returns; one daemon thread takes the
spans in order, runs the detectors and hands each span to the downstream processor, as
``BatchSpanProcessor`` defers its export. The agent's thread pays for one ``deque.append``.

The worker runs in rounds, as ``BatchSpanProcessor`` exports in batches: it takes what has queued
every 20 ms (every 40, 80... up to 1 s while nothing comes), or at once when 64 spans wait, or
when ``flush`` or ``shutdown`` asks. Not once per span: a Python thread that has just run on
another core leaves the agent's next ``span.end()`` about twice as slow (on a 2-core VM, 38 µs
instead of 19 µs right after the worker handled a span, 25 µs with both threads on one core:
the cache lines both threads write, reference counts of shared objects among them, move between
cores), so rounds keep most of the agent's spans clear of it. A span waits at most 20 ms for
detection while spans keep coming, at most 1 s after a quiet second.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from otel_loopguard.state import after_fork_in_child

__all__ = ["SpanWorker"]

logger = logging.getLogger("otel_loopguard")

_ROUND_SECONDS: Final = 0.02
"""The worker's wait between rounds while spans keep coming."""
_LONGEST_WAIT_SECONDS: Final = 1.0
"""The wait between two looks at an empty queue once the process is quiet (doubling up to it)."""
_ROUND_SPANS: Final = 64
"""Spans waiting that start a round at once (``submit`` wakes the worker)."""
_SHUTDOWN_SECONDS: Final = 30.0
"""How long the processor waits for the worker at ``shutdown`` and before a guard's decision."""
_MAX_LOGGED_KINDS: Final = 64
"""Kinds of item errors the worker logs (each once); errors of further kinds are not logged."""


class _Marker:
    """An item the worker answers by setting ``done`` once everything before it is handled.

    The stop marker may carry ``then``: called on the worker's thread, before ``done``, when a
    handler asked for the shutdown (``stop_later``).
    """

    __slots__ = ("done", "stop", "then")

    def __init__(self, *, stop: bool = False) -> None:
        self.done = threading.Event()
        self.stop = stop
        self.then: Callable[[], object] | None = None


class SpanWorker:
    """A bounded queue of items handled in order by one daemon thread.

    Thread-safe: ``submit`` is called on any application thread and never blocks; ``handle``
    runs on the worker thread only, one item at a time, so whatever it touches needs no lock
    against other items. After ``os.fork`` the child starts with an empty queue and its own
    thread (the parent's thread does not exist there).

    Args:
        handle: called with each item, on the worker thread; what it raises is logged (the
            first of each kind of error) and dropped (the worker never dies).
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
        self._logged: set[type[BaseException]] = set()
        """The kinds of item errors logged so far (the worker thread's alone)."""
        self._start()
        after_fork_in_child(self._start)

    def _start(self) -> None:
        if hasattr(self, "queue"):  # after a fork: the same deque (callers hold it), emptied
            self.queue.clear()
        else:
            self.queue: deque[Any] = deque()
            """Items waiting, the one being handled first: it leaves once it is handled, so the
            queue is empty exactly when the worker has caught up (one test, no call)."""
        self._wake = threading.Event()
        """Set to start a round at once: by ``flush``, ``shutdown`` and a full round."""
        self._stopped = False
        self._stopping = _Marker(stop=True)
        """The last item the worker handles, queued by ``shutdown``."""
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        """Return how many items wait (the one being handled included)."""
        return len(self.queue)

    @property
    def stopped(self) -> bool:
        """Whether ``shutdown`` was called: ``submit`` refuses every item from then on."""
        return self._stopped

    def caught_up(self) -> bool:
        """Return True when nothing is queued and the worker is not handling an item."""
        return not self.queue

    def submit(self, item: Any) -> bool:
        """Queue ``item``; return False (nothing queued) when the queue is full or stopped."""
        queue = self.queue
        if len(queue) >= self.max_queue_size or self._stopped:
            return False
        queue.append(item)
        if len(queue) == _ROUND_SPANS:  # otherwise the worker's next round takes it
            self._wake.set()
        return True

    def flush(self, timeout_seconds: float) -> bool:
        """Wait until every item queued before this call is handled; False on timeout.

        An empty queue has nothing to wait for (the item being handled stays queued until it is
        done), so an idle worker is not woken, whatever the timeout.
        """
        if not self.queue:
            return True
        return self._wait_for(_Marker(), timeout_seconds)

    def shutdown(self, timeout_seconds: float) -> bool:
        """Handle what is queued, then stop the thread; False when it did not finish in time.

        ``submit`` refuses items from the start: an item offered while the queue drains would
        land behind the worker's last one and never be handled; refused, its caller hands it on.
        """
        if self._stopped:
            return self._stopping.done.wait(timeout_seconds) or not self._thread.is_alive()
        self._stopped = True
        return self._wait_for(self._stopping, timeout_seconds)

    def on_worker_thread(self) -> bool:
        """Return whether the caller runs on the worker's thread (inside ``handle``)."""
        return threading.current_thread() is self._thread

    def stop_later(self, then: Callable[[], object]) -> None:
        """From a handler: stop once the items queued so far are handled, then call ``then``.

        The worker cannot wait for itself: ``shutdown`` on its thread would return at once and
        leave the thread running, with nothing to stop it, and every later ``shutdown`` waiting
        in vain. ``then`` runs on the worker's thread after the last item (what the caller would
        have done after ``shutdown`` returned); nothing if the worker is already stopping.
        """
        if self._stopped:
            return
        self._stopped = True
        self._stopping.then = then
        self.queue.append(self._stopping)
        self._wake.set()

    def _wait_for(self, marker: _Marker, timeout_seconds: float) -> bool:
        if threading.current_thread() is self._thread:  # a handler flushing: already in order
            return True
        if not self._thread.is_alive():
            return True
        if self._stopped and marker is not self._stopping:  # nothing can queue behind it
            return self._stopping.done.wait(timeout_seconds)
        self.queue.append(marker)  # markers are never refused: they hold nothing
        self._wake.set()
        return marker.done.wait(timeout_seconds)

    def _run(self) -> None:
        queue, wake = self.queue, self._wake
        wait = _ROUND_SECONDS
        while True:
            try:  # the item stays queued while it is handled: ``caught_up`` stays False
                item = queue[0]
            except IndexError:  # the round is over: wait for the next one
                wake.wait(wait)
                wake.clear()  # whoever set it queued first: the next round finds it
                wait = _ROUND_SECONDS if queue else min(wait * 2, _LONGEST_WAIT_SECONDS)
                continue
            if type(item) is _Marker:
                queue.popleft()
                if item.then is not None:
                    try:
                        item.then()
                    except BaseException:
                        logger.exception("otel-loopguard: error in the background worker")
                item.done.set()
                if item.stop:
                    return
                continue
            try:
                self._handle(item)
            except BaseException as exc:  # the worker must outlive any item
                self._log_once(exc)
            queue.popleft()  # only this thread takes items: the one just handled

    def _log_once(self, exc: BaseException) -> None:
        """Log an item's error with its traceback the first time its kind is seen.

        The processor's handler contains its own errors, so what reaches here is mostly the
        downstream processor's: one failing on every span must not log a traceback per span.
        """
        kind = type(exc)
        if kind not in self._logged and len(self._logged) < _MAX_LOGGED_KINDS:
            self._logged.add(kind)
            logger.error("otel-loopguard: error in the background worker (logged once per "
                         "kind of error)", exc_info=exc)

