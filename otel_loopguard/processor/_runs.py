"""The run a span belongs to, by ``run_key``, and the runs each trace holds until its root ends."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor._live import LiveSpans
from otel_loopguard.signature import digest
from otel_loopguard.state import after_fork_in_child

__all__ = ["SpanRuns"]

_MAX_TRACE_RUNS: Final = 1024
"""Runs a trace keeps noted for its root's end to drop, the newest: a trace whose root stays
open through more agent invocations than this (``run_key = "agent"``: a batch job running an
agent per item) forgets the oldest, whose runs the run TTL or the run store's LRU ends."""
_MAX_RUN_KEY_CHARS: Final = 256
"""Longest conversation id kept as it is in a run id (the run store's key, ``loopguard.run_id``)."""
_MAX_ENDED: Final = 4096
"""Traces whose root span ended, the newest: a span of one that ends later (its parent ended
too) opens a run that no root's end will release (``SpanRuns.root_ended``)."""


class SpanRuns:
    """The run of each span, and the traces with a run open, so a root's end finds its runs.

    Thread-safe: a trace's note is read without a lock and added or dropped under one short
    lock. After ``os.fork`` the child forgets every trace (its run store starts empty) and gets
    a new lock.

    Args:
        config: the processor's settings (``run_key``, ``conversation_keys``, ``max_runs``).
        live: the processor's open spans (agent and conversation lookups).
    """

    def __init__(self, config: LoopGuardConfig, live: LiveSpans) -> None:
        self.config = config
        self.live = live
        self.traces: OrderedDict[int, _TraceRuns] = OrderedDict()
        """The traces with a run open, so a root's end finds its own runs (at most max_runs)."""
        self.lock = threading.Lock()
        self.ended: set[int] = set()
        """Traces whose root span ended lately, the newest (``root_ended``)."""
        self.ended_before: set[int] = set()
        """The ``_MAX_ENDED`` traces whose root ended before those of ``ended``."""
        after_fork_in_child(self.forget)

    def run_id(self, span: ReadableSpan, attrs: Mapping[str, Any], trace_id: int) -> str:
        """Return the run of ``span`` by ``run_key``, noted as its trace's unless it spans traces.

        A conversation's run outlives its traces (TTL and LRU end it); any other run, the
        trace's own or an agent invocation's, ends with the trace's root span (``pop``).
        """
        trace = self.trace(trace_id)
        key = self.config.run_key
        if key != "trace":
            parent_id = span.parent.span_id if span.parent is not None else None
            if key == "conversation":
                run_id = trace.conversation = trace.conversation or self._conversation(
                    attrs, parent_id)
            else:  # the agent invocation's run, named as ``check`` names it
                agent = self.live.agent_span_id(parent_id)
                run_id = trace.note(f"{trace_id:032x}/{agent}") if agent else None
            if run_id:
                return run_id
        # the trace; or, while the run key is not known yet (a chat span before the tool spans
        # that carry it), this span alone: a later one may find it
        return trace.own or trace.own_run(trace_id)

    def run_under(self, parent_id: int, trace_id: int) -> str:
        """Return ``run_id`` of a span of trace ``trace_id`` under ``parent_id``, not started yet.

        A span whose attributes name no conversation: the integrations ask it of the span a
        model call's own span would have as its parent. The same rule as ``run_id``, which
        keeps it inline (it runs for every tool and model span; a shared call there costs
        ~700 instructions each).
        """
        trace = self.trace(trace_id)
        key = self.config.run_key
        if key == "conversation":
            trace.conversation = trace.conversation or self._conversation({}, parent_id)
            if trace.conversation:
                return trace.conversation
        elif key != "trace":
            agent = self.live.agent_span_id(parent_id)
            if agent:
                return trace.note(f"{trace_id:032x}/{agent}")
        return trace.own or trace.own_run(trace_id)

    def trace(self, trace_id: int) -> _TraceRuns:
        """Return the note of a trace with a run open, made if new (the oldest past max_runs go)."""
        found = self.traces.get(trace_id)
        if found is not None:
            return found
        with self.lock:
            trace = self.traces.setdefault(trace_id, _TraceRuns())
            while len(self.traces) > self.config.max_runs:
                self.traces.popitem(last=False)
        return trace

    def _conversation(self, attrs: Mapping[str, Any], parent_id: int | None) -> str | None:
        keys = self.config.conversation_keys
        for source in (attrs, *(s.attributes or {} for s in self.live.ancestors(parent_id))):
            for key in keys:
                value = source.get(key)
                if value:
                    text = str(value)  # a run key: a long id keeps its start and a hash
                    return text if len(text) <= _MAX_RUN_KEY_CHARS else \
                        f"{text[:_MAX_RUN_KEY_CHARS - 17]}~{digest(text)}"
        return None

    def forget(self) -> None:
        """In a forked child: no trace has a run (the store starts empty), a new lock."""
        self.lock = threading.Lock()
        self.traces.clear()
        self.ended, self.ended_before = set(), set()

    def pop(self, trace_id: int) -> list[str]:
        """Forget a trace whose root span ended; return the runs its end drops."""
        with self.lock:
            trace = self.traces.pop(trace_id, None)
        return list(trace.runs) if trace is not None else []

    def root_ended(self, trace_id: int) -> None:
        """Note that a root span of ``trace_id`` ended (the newest ``_MAX_ENDED`` at least).

        Every root span ends through here, on the application's thread: one ``set.add``. The
        note is two sets, the newer filling and the older full; when the newer holds
        ``_MAX_ENDED``, it becomes the older and the oldest go. No lock: a root noted while
        another thread swaps the sets may be forgotten early, and its late spans then open a
        run the run TTL ends, as before this note. (An ``OrderedDict`` trimmed one entry per
        root cost 2.4x the time per root once full.)
        """
        newer = self.ended
        newer.add(trace_id)
        if len(newer) >= _MAX_ENDED:
            self.ended_before, self.ended = newer, set()

    def root_has_ended(self, trace_id: int) -> bool:
        """Return whether a root span of ``trace_id`` ended lately (``root_ended``)."""
        return trace_id in self.ended or trace_id in self.ended_before


class _TraceRuns:
    """What the processor knows of a trace with a run open: its runs, its conversation."""

    __slots__ = ("conversation", "own", "runs")

    def __init__(self) -> None:
        self.own: str | None = None
        """The trace's own run id (32 hex digits), once ``own_run`` made it."""
        self.conversation: str | None = None
        """``run_key = "conversation"``: the trace's conversation id, once a span names it."""
        self.runs: dict[str, None] = {}
        """The runs its root's end drops, oldest first: the trace's own, or its agent
        invocations' (a dict, not a list: an agent span's start notes its parent's run, rarely
        the latest, and a trace may note up to ``_MAX_TRACE_RUNS``)."""

    def own_run(self, trace_id: int) -> str:
        """Return the trace's own run id, noted as one of its runs (made once per trace)."""
        self.own = self.note(format(trace_id, "032x"))
        return self.own

    def note(self, run_id: str) -> str:
        """Note ``run_id`` as one of the runs the trace's root's end drops; return it."""
        runs = self.runs
        if run_id not in runs:
            runs[run_id] = None
            if len(runs) > _MAX_TRACE_RUNS:
                del runs[next(iter(runs))]
        return run_id
