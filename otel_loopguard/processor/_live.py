"""The spans that are still open, so tool calls can find their agent and its span."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Final

from otel_loopguard.adapters import agent_of, is_model_turn
from otel_loopguard.assembly import MAX_ANCESTRY, nearest_agent
from otel_loopguard.otlp._sdk import raw_attributes
from otel_loopguard.state import seconds_to_ns

__all__ = ["MAX_DEPTH", "LiveSpans"]

_MAX_OPEN: Final = 100_000
_DEFAULT_MAX_AGE_SECONDS: Final = 3600.0
_FIRST_LOOK: Final = 1024
"""A table this small is never looked at: a leak of 1,024 spans is a few megabytes."""
MAX_DEPTH: Final = MAX_ANCESTRY
"""How far ``ancestors`` walks up (a cycle or a very deep tree stops there)."""
_MAX_MODEL_PARENTS: Final = 1024
"""Parents whose model spans ``models`` keeps (the oldest go first)."""
_MAX_MODELS: Final = 16
"""Model spans ``models`` keeps per parent, newest: a start costs at most this many lookups,
however many model spans one parent holds open (a real agent holds one; the worker would have
to lag 16 model turns of one agent for a call's open model span to be dropped)."""


class LiveSpans:
    """Open spans by span id, bounded by count (``max_open``) and by age (``max_age_seconds``).

    The one writer (``LoopGuardSpanProcessor.on_start``) stores a span in ``spans`` and calls
    ``bound`` once the table holds more than ``limit`` spans; ``bound`` then sets a new
    ``limit``, twice the size left (at least 1,024, at most ``max_open``), so most starts cost
    one store and one comparison. Spans are kept in start order (a dict keeps its insertion
    order), so the oldest is always first: a span the application never ends is forgotten at
    the next look once it is older than ``max_age_seconds`` (the run TTL: its run is gone by
    then), and past ``max_open`` the oldest eighth goes.

    Thread-safe for the operations used: single dict stores, pops and reads, which are atomic
    in CPython; a walk that races with an ending span just stops early.
    """

    def __init__(self, max_open: int = _MAX_OPEN,
                 max_age_seconds: float = _DEFAULT_MAX_AGE_SECONDS) -> None:
        """Create an empty table."""
        self.spans: dict[int, Any] = {}
        self.max_open = max_open
        self._max_age_ns = seconds_to_ns(max_age_seconds)
        self.limit = min(_FIRST_LOOK, max_open)
        """The size past which the next start calls ``bound``."""
        self._last_hex: tuple[int, str] = (-1, "")
        """The latest span id ``_hex`` formatted, and its text."""
        self.models: dict[int, tuple[tuple[int, int], ...]] = {}
        """Parent span id → (span id, start) of its child spans named as model spans that may
        stay open (``may_name_model``), oldest first: written as they start, pruned at the
        next one."""

    def __len__(self) -> int:
        """Return how many spans are open."""
        return len(self.spans)

    def bound(self) -> None:
        """Forget the spans older than the age bound, and the oldest eighth past ``max_open``."""
        spans = self.spans
        oldest_kept = time.time_ns() - self._max_age_ns
        with contextlib.suppress(RuntimeError):  # another thread changed the table: next time
            excess = len(spans) - self.max_open
            if excess > 0:
                excess += self.max_open // 8
            stale = []
            for span_id, span in spans.items():
                if excess <= 0:
                    started = getattr(span, "start_time", None)
                    if started is None or started >= oldest_kept:
                        break
                stale.append(span_id)
                excess -= 1
            for span_id in stale:
                spans.pop(span_id, None)
        self.limit = min(self.max_open, max(_FIRST_LOOK, 2 * len(spans)))

    def model_started(self, span: Any) -> None:
        """Note a span named as a model span that may stay open (on the thread that starts it).

        Only its id and start are kept, not the span (a model span with content holds the
        prompts). The earlier ones its parent keeps that have left ``spans`` go (a tool span
        that ends later ended after them), and past ``_MAX_MODELS`` the oldest. Two model spans
        started at once under one parent, on two threads, may lose one (the rule then falls
        back to the ended turns).
        """
        parent = span.parent
        if parent is None:
            return
        spans, models = self.spans, self.models
        kept = [m for m in models.get(parent.span_id, ()) if m[0] in spans]
        models[parent.span_id] = (*kept[1 - _MAX_MODELS:],
                                  (span.context.span_id, span.start_time or 0))
        if len(models) > _MAX_MODEL_PARENTS:
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del models[next(iter(models))]

    def in_open_model(self, parent_id: int | None, start_ns: int) -> bool:
        """Return whether a model span, a sibling started by ``start_ns``, is still open.

        The assembly's rule for a tool span ending now (``start_ns``: its start, ``parent_id``:
        its parent): its model turn is that span's. "Open": not yet handled (``spans``), so
        the answer follows end order, not how far behind the worker is. One lookup, a miss
        for frameworks without such spans.
        """
        spans = self.spans
        for span_id, started in self.models.get(parent_id, ()) if parent_id is not None else ():
            model = spans.get(span_id) if started <= start_ns else None
            if model is not None and is_model_turn(model.name, raw_attributes(model)):
                return True
        return False

    def ancestors(self, parent_id: int | None) -> Iterator[Any]:
        """Yield the open ancestors, nearest first, starting at ``parent_id``."""
        for _ in range(MAX_DEPTH):
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
        """Return the nearest open agent span and its agent name (the assembly's rule)."""
        spans = self.spans

        def step(span_id: int) -> tuple[str | None, int | None] | None:
            span = spans.get(span_id)
            if span is None:
                return None
            parent = span.parent
            return (agent_of(span.name, raw_attributes(span)),
                    parent.span_id if parent is not None and not parent.is_remote else None)

        found = nearest_agent(parent_id, step)
        return None if found is None else (spans[found[0]], found[1])

    def agent_span_id(self, parent_id: int | None) -> str | None:
        """Return the hex id of the nearest open agent span, or None.

        A model or tool span's parent is most often the agent span itself: that costs one
        lookup and one ``agent_of``, without the walk's frames.
        """
        parent = self.spans.get(parent_id) if parent_id is not None else None
        if parent is None or parent_id is None:
            return None
        if agent_of(parent.name, raw_attributes(parent)) is not None:
            return self._hex(parent_id)
        span = self.agent_span(parent_id)
        return self._hex(span.context.span_id) if span is not None else None

    def _hex(self, span_id: int) -> str:
        """Return ``span_id`` in 16 hex digits; the latest one's text is kept.

        A run's model spans ask for their agent span's id again and again, and ``format`` costs
        as much as the rest of the lookup (2.6k instructions). Races only format twice.
        """
        last = self._last_hex
        if last[0] == span_id:
            return last[1]
        text = format(span_id, "016x")
        self._last_hex = (span_id, text)
        return text

    def root_span(self, span: Any) -> Any:
        """Return the outermost open ancestor of ``span``, or None."""
        parent = span.parent
        last = None
        for last in self.ancestors(parent.span_id if parent is not None else None):  # noqa: B007
            pass
        return last
