"""Spans repeated within a trace, recognised in bounded memory (``check`` counts each span once).

Exporters retry, dumps overlap and the same file gets passed twice: a span seen again (same
trace id and span id) is a copy, and checking it twice would count one failing call as two.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import OrderedDict
from typing import Final

__all__ = ["SpanDeduplicator"]

_HOT_TRACES: Final = 10_000
_MAX_COLD_IDS: Final = 4_000_000
_TRACE_COST: Final = 32
"""What remembering one cold trace costs beyond its ids (key, array, dict slot), in ids of
8 bytes: without it, a file of one-span traces grew the cold store by 250 bytes a span."""


class SpanDeduplicator:
    """Tells new spans from copies by (trace id, span id), in bounded memory.

    The span ids of the ``hot_traces`` traces touched most recently are kept in sets; older
    traces keep theirs as sorted arrays of 64-bit hashes (8 bytes a span), ``max_cold_ids`` in
    all (32 MB; each cold trace also counts as ``_TRACE_COST`` ids for its own overhead);
    beyond that the oldest traces are forgotten, and a copy of one of their spans counts as
    new. Not thread-safe.
    """

    def __init__(self, hot_traces: int = _HOT_TRACES, max_cold_ids: int = _MAX_COLD_IDS) -> None:
        self.hot_traces = hot_traces
        self.max_cold_ids = max_cold_ids
        self.duplicates = 0
        """Copies recognised so far."""
        self._hot: OrderedDict[str, set[int]] = OrderedDict()
        self._cold: OrderedDict[str, array[int]] = OrderedDict()
        self._cold_ids = 0
        self._last: tuple[str, set[int]] = ("", set())
        """The trace of the previous span and its ids: spans of a trace mostly come together."""

    def is_new(self, trace_id: str, span_id: str) -> bool:
        """Return False (and count a duplicate) when this span of this trace was seen before."""
        key = hash(span_id)
        last_trace, ids = self._last
        if trace_id != last_trace:
            found = self._hot.get(trace_id)
            if found is None:
                if self._in_cold(trace_id, key):
                    self.duplicates += 1
                    return False
                found = self._warm(trace_id)
            else:
                self._hot.move_to_end(trace_id)
            ids = found
            self._last = (trace_id, ids)
        if key in ids:
            self.duplicates += 1
            return False
        ids.add(key)
        return True

    def _in_cold(self, trace_id: str, key: int) -> bool:
        cold = self._cold.get(trace_id)
        if cold is None:
            return False
        at = bisect_left(cold, key)
        return at < len(cold) and cold[at] == key

    def _warm(self, trace_id: str) -> set[int]:
        """Make ``trace_id`` hot (with its cold ids, if any); cool the least recent hot trace."""
        cold = self._cold.pop(trace_id, None)
        ids: set[int] = set()
        if cold is not None:
            self._cold_ids -= len(cold) + _TRACE_COST
            ids.update(cold)
        self._hot[trace_id] = ids
        if len(self._hot) > self.hot_traces:
            oldest, oldest_ids = self._hot.popitem(last=False)
            frozen = array("q", sorted(oldest_ids))
            self._cold[oldest] = frozen
            self._cold_ids += len(frozen) + _TRACE_COST
            while self._cold_ids > self.max_cold_ids:
                _, dropped = self._cold.popitem(last=False)
                self._cold_ids -= len(dropped) + _TRACE_COST
        return ids
