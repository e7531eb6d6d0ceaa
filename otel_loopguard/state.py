"""Where open runs live: ``InMemoryRunStateStore``, bounded by count (LRU) and idle time."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_loopguard._findings import loop_action
from otel_loopguard._fork import after_fork_in_child
from otel_loopguard.assembly import SiblingAgents
from otel_loopguard.engine import RunState
from otel_loopguard.types import Action, Clock, Decision
from otel_loopguard.waste import RunWaste

__all__ = ["MAX_NS", "InMemoryRunStateStore", "RunEntry", "after_fork_in_child", "seconds_to_ns"]

MAX_NS: Final = 1 << 62
"""About 146 years: any longer duration means "never" in practice."""


def seconds_to_ns(seconds: float) -> int:
    """Return ``seconds`` in whole nanoseconds, at most ``MAX_NS`` (``1e300`` cannot overflow).

    For every idle time and age limit (runs here, open spans in the processor, traces in
    ``serve``), so a huge setting in a config file means "never" instead of an overflow.
    """
    ns = seconds * 1e9
    return int(ns) if ns < MAX_NS else MAX_NS


@dataclass(slots=True)
class RunEntry:
    """One open run: the engine's state plus what the processor tracks around it."""

    run_id: str
    state: RunState
    last_touch_ns: int
    template: str | None = None
    tool_calls: int = 0
    model_turns: int = 0
    own_turns: int = 0
    """The model turns an integration recorded in a span of its own (``model_turns`` counts
    them too, once processed): a guard that counts the run's turns around a model call tells
    the instrumentation's from those (``GuardRuns.run_under``)."""
    seen_model: bool = False
    siblings: SiblingAgents = field(default_factory=SiblingAgents)
    """The agent spans started so far, for sibling handoffs."""
    looped: Action = Action.CONTINUE
    """The highest action of the run's loop findings (budget findings left out)."""
    unfed: tuple[RunWaste, int, Mapping[str, Any]] | None = None
    """The latest model turn whose usage the run's waste has not been given: the waste it is
    for, the turn's number and its span's attributes (the processor reads the usage once a
    loop finding makes it count; see ``LoopGuardSpanProcessor._model_turn``)."""

    def note_loop(self, decision: Decision) -> Action:
        """Take ``decision`` into ``looped`` (hold the run's lock); return ``looped`` before."""
        previous = self.looped
        if decision.flagged:
            self.looped = max(previous, loop_action(decision))
        return previous


class InMemoryRunStateStore:
    """Open runs, least recently used first, at most ``max_runs`` and ``ttl_seconds`` idle.

    Thread-safe: one short lock, held only to look up, insert, move or drop entries; never
    while detectors, metrics or callbacks run. ``on_evict(reason, count)`` is called after the
    lock is released. Fork-safe: the child process starts with an empty store and a new lock.
    """

    def __init__(self, new_state: Callable[[], RunState], *, max_runs: int = 10_000,
                 ttl_seconds: float = 3600.0, clock: Clock | None = None,
                 on_evict: Callable[[str, int], None] | None = None) -> None:
        """Create an empty store; ``new_state`` makes the engine state of a new run."""
        import time

        self._new_state = new_state
        self.max_runs = max_runs
        self._ttl_ns = seconds_to_ns(ttl_seconds)
        self._clock: Clock = clock or time.monotonic_ns
        self._on_evict = on_evict
        self._runs: OrderedDict[str, RunEntry] = OrderedDict()
        self._lock = threading.Lock()
        after_fork_in_child(self._reinit_after_fork)

    def __len__(self) -> int:
        """Return the number of open runs."""
        return len(self._runs)

    def get_or_create(self, run_id: str) -> tuple[RunEntry, bool]:
        """Return the run's entry (created if new) and whether it was created."""
        now = self._clock()
        with self._lock:
            runs = self._runs
            entry = runs.get(run_id)
            if entry is not None:  # the common case: one more call of an open run
                entry.last_touch_ns = now
                runs.move_to_end(run_id)
                return entry, False
            entry = RunEntry(run_id=run_id, state=self._new_state(), last_touch_ns=now)
            runs[run_id] = entry
            evicted = self._evict_locked(now)
        self._report(evicted)
        return entry, True

    def get(self, run_id: str) -> RunEntry | None:
        """Return the run's entry, or None."""
        return self._runs.get(run_id)

    def release(self, run_id: str) -> RunEntry | None:
        """Drop a finished run (its root span ended) and return it."""
        with self._lock:
            return self._runs.pop(run_id, None)

    def expire(self) -> None:
        """Drop runs idle for longer than the TTL (also done on every insert)."""
        with self._lock:
            evicted = self._evict_locked(self._clock())
        self._report(evicted)

    def _evict_locked(self, now: int) -> list[tuple[str, int]]:
        runs, ttl, capacity = self._runs, 0, 0
        while runs:
            oldest = next(iter(runs.values()))
            if now - oldest.last_touch_ns <= self._ttl_ns:
                break
            runs.popitem(last=False)
            ttl += 1
        while len(runs) > self.max_runs:
            runs.popitem(last=False)
            capacity += 1
        return [(reason, n) for reason, n in (("ttl", ttl), ("capacity", capacity)) if n]

    def _report(self, evicted: list[tuple[str, int]]) -> None:
        if self._on_evict is not None:
            for reason, count in evicted:
                self._on_evict(reason, count)

    def _reinit_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._runs = OrderedDict()
