"""The spans that are still open, so tool calls can find their agent and its span."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from otel_loopguard.adapters import agent_of
from otel_loopguard.otlp._sdk import raw_attributes

__all__ = ["MAX_DEPTH", "LiveSpans"]

_MAX_OPEN: Final = 100_000
MAX_DEPTH: Final = 64
"""How far ``ancestors`` walks up (a cycle or a very deep tree stops there)."""
_MAX_DEPTH: Final = MAX_DEPTH


class LiveSpans:
    """Open spans by span id (bounded: the oldest are forgotten past ``max_open``).

    Thread-safe for the operations used: single dict stores, pops and reads, which are atomic
    in CPython; a walk that races with an ending span just stops early.
    """

    def __init__(self, max_open: int = _MAX_OPEN) -> None:
        """Create an empty table."""
        self.spans: dict[int, Any] = {}
        self.max_open = max_open

    def __len__(self) -> int:
        """Return how many spans are open."""
        return len(self.spans)

    def add(self, span: Any) -> None:
        """Remember an open span."""
        spans = self.spans
        spans[span.context.span_id] = span
        if len(spans) > self.max_open:
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del spans[next(iter(spans))]

    def trim(self) -> None:
        """Forget the oldest open spans beyond ``max_open``."""
        spans = self.spans
        while len(spans) > self.max_open:
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del spans[next(iter(spans))]

    def remove(self, span_id: int) -> None:
        """Forget an ended span."""
        self.spans.pop(span_id, None)

    def ancestors(self, parent_id: int | None) -> Iterator[Any]:
        """Yield the open ancestors, nearest first, starting at ``parent_id``."""
        for _ in range(_MAX_DEPTH):
            if parent_id is None:
                return
            span = self.spans.get(parent_id)
            if span is None:
                return
            yield span
            parent = span.parent
            parent_id = parent.span_id if parent is not None and not parent.is_remote else None

    def agent_span(self, parent_id: int | None) -> Any:
        """Return the nearest open agent span, or None."""
        found = self._nearest_agent(parent_id)
        return found[0] if found is not None else None

    def agent_name(self, parent_id: int | None) -> str | None:
        """Return the name of the nearest open agent span, or None."""
        found = self._nearest_agent(parent_id)
        return found[1] if found is not None else None

    def _nearest_agent(self, parent_id: int | None) -> tuple[Any, str] | None:
        """Return the nearest open agent span and its agent name (``ancestors``, unrolled)."""
        spans = self.spans
        for _ in range(_MAX_DEPTH):
            if parent_id is None:
                return None
            span = spans.get(parent_id)
            if span is None:
                return None
            name = agent_of(span.name, raw_attributes(span))
            if name is not None:
                return span, name
            parent = span.parent
            parent_id = parent.span_id if parent is not None and not parent.is_remote else None
        return None

    def agent_span_id(self, parent_id: int | None) -> str | None:
        """Return the hex id of the nearest open agent span, or None."""
        span = self.agent_span(parent_id)
        return format(span.context.span_id, "016x") if span is not None else None

    def root_span(self, span: Any) -> Any:
        """Return the outermost open ancestor of ``span``, or None."""
        parent = span.parent
        last = None
        for last in self.ancestors(parent.span_id if parent is not None else None):  # noqa: B007
            pass
        return last
