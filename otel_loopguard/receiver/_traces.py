"""The traces ``StreamingChecker`` holds: open ones (their spans), and what it keeps of closed ones.

A trace closes once: its later spans are late (forwarded, never checked). Not so a trace that
closed on a local root whose parent is remote (``SpanRecord.parent_is_remote``): a service
called twice in one trace (an upstream retrying, a queue consumer continuing a trace) sends a
local root per call. A later span of such a trace opens a new segment, checked like a trace of
its own, unless it belongs to a segment already checked: a copy of one of its spans (an
exporter retry) or a child of one (a straggler). Those are late, as in any other trace.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final

from otel_loopguard.types import SpanRecord

__all__ = ["ClosedTrace", "ClosedTraces", "OpenTrace", "segment_complete"]

_DEFAULT_MAX_SPAN_IDS: Final = 100_000
_SPAN_ID: Final = attrgetter("span_id")


@dataclass(slots=True)
class ClosedTrace:
    """The spans of a trace that has been checked, with the evidence for its flagged spans."""

    trace_id: str
    """The trace id; empty for late spans, which may belong to several traces."""
    spans: list[SpanRecord]
    payloads: list[Any] | None
    """Whatever was passed along with each span to ``add`` (the forwarder's source spans)."""
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``loopguard.*`` attributes by span id, for the spans with a flagged decision."""
    late: bool = False
    """True for spans that arrived after their trace had closed (not checked)."""
    sizes: list[int] = field(default_factory=list)
    """What each span holds in bytes (``span_bytes``), as counted while it was buffered."""


@dataclass(slots=True)
class OpenTrace:
    """The spans of a trace still buffered, and when it is due."""

    spans: list[SpanRecord]
    payloads: list[Any] | None
    touched_ns: int
    root_seen_ns: int | None = None
    """When its reorder window started: its root's arrival, or a remote-parented span's."""
    sizes: list[int] = field(default_factory=list)
    bytes: int = 0
    has_root: bool = False
    """Its own root (no parent) has arrived."""
    waiting: bool = False
    """Its window passed while a span still waited for a local parent: due again on a new span."""


def segment_complete(spans: Sequence[SpanRecord]) -> bool:
    """Return True when every span's parent is among ``spans``, remote, or absent.

    A trace with no root of its own is due when its reorder window passes only if nothing in
    it still waits for a local parent: its remote-parented span may be a downstream service's
    (an MCP server called by the agent), whose caller's spans have yet to arrive.
    """
    ids = set(map(_SPAN_ID, spans))
    return all(span.parent_span_id is None or span.parent_is_remote
               or span.parent_span_id in ids for span in spans)


class ClosedTraces:
    """The ids of the traces closed lately, oldest first, and their segments' span ids.

    Not thread-safe (``StreamingChecker``'s). Bounded: ``cap`` traces, and ``max_span_ids``
    span ids in all (100,000; about 10 MB): past it the oldest segmented traces forget theirs,
    and each of their later spans then opens a segment.
    """

    def __init__(self, cap: int, max_span_ids: int = _DEFAULT_MAX_SPAN_IDS) -> None:
        self._traces: OrderedDict[str, set[str] | None] = OrderedDict()
        """Trace id → the span ids of its checked segments; None when it takes no segments."""
        self._segmented: OrderedDict[str, None] = OrderedDict()
        """The traces holding span ids, in the order they last closed (the oldest forget)."""
        self._cap = cap
        self._max_span_ids = max_span_ids
        self.span_ids = 0

    def __contains__(self, trace_id: str) -> bool:
        """Return True when the trace has closed (and is still remembered)."""
        return trace_id in self._traces

    def __len__(self) -> int:
        """Return how many closed traces are remembered."""
        return len(self._traces)

    def segments(self, trace_id: str) -> set[str] | None:
        """Return the span ids of the trace's checked segments; None when it takes none."""
        return self._traces.get(trace_id)

    def close(self, trace_id: str, spans: Sequence[SpanRecord], segmented: bool) -> None:
        """Remember a trace (or a segment) just checked.

        Args:
            trace_id: its id.
            spans: its spans.
            segmented: it closed on a remote-parented root, not its own: later spans of the
                trace may open segments. A trace segmented once stays so.
        """
        known = self._traces.get(trace_id)
        if known is None and not segmented:
            self._traces[trace_id] = None
        else:
            if known is None:
                known = self._traces[trace_id] = set()
            size = len(known)
            known.update(map(_SPAN_ID, spans))
            self.span_ids += len(known) - size
            self._segmented[trace_id] = None
            self._segmented.move_to_end(trace_id)
            self._forget()
        self._traces.move_to_end(trace_id)
        if len(self._traces) > self._cap:
            oldest, ids = self._traces.popitem(last=False)
            if ids is not None:
                self.span_ids -= len(ids)
                self._segmented.pop(oldest, None)

    def remember(self, known: set[str], span_id: str) -> None:
        """Add a late span of a segmented trace to ``known`` (its own stragglers are late too)."""
        if span_id not in known:
            known.add(span_id)
            self.span_ids += 1
            self._forget()

    def _forget(self) -> None:
        while self.span_ids > self._max_span_ids and self._segmented:
            oldest, _ = self._segmented.popitem(last=False)
            ids = self._traces[oldest]
            if ids:
                self.span_ids -= len(ids)
                ids.clear()  # still segmented: its later spans all open segments
