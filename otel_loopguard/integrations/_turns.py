"""A model call as a model turn of its run, when no instrumentation records it.

The tool calls one model response requests form a batch only when the run has a model span
per turn (docs/detectors.md, "Batches"). An integration that sees every model call (a
LangChain agent middleware) marks each one with a ``chat`` span of its own, unless a model span
of another instrumentation counted in the same run during the call: then the call is already a
turn, and a second span would count it twice. Both ways the exported spans hold one model span
per model call, so the live processor, ``check`` and ``serve`` count the same turns.
No framework is imported here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.state import RunEntry

__all__ = ["ModelCallTurn"]

_CHAT: Final = "chat"
"""The GenAI conventions' ``gen_ai.operation.name`` of a chat model call (a model turn)."""


class ModelCallTurn:
    """One model call of a run, from just before it until it returned or raised.

    ``begin`` notes how many model turns the run has counted (``RunEntry.model_turns``) and how
    many of them were spans of loopguard's own (``RunEntry.own_turns``); ``end`` records the
    call in a ``chat`` span of its own unless the run counted another model turn meanwhile, one
    that is not loopguard's (an instrumentation's model span, or a model client's).
    """

    __slots__ = ("entry", "own", "parent", "start_ns", "turns")

    def __init__(self, entry: RunEntry | None, parent: Context | None) -> None:
        self.entry = entry
        self.parent = parent
        """The context the span goes under (None: the current one)."""
        self.turns = self.own = 0
        if entry is not None:
            with entry.state.lock:
                self.turns, self.own = entry.model_turns, entry.own_turns
        self.start_ns = time.time_ns()

    @classmethod
    def begin(cls, processor: LoopGuardSpanProcessor, parent: Context | None) -> ModelCallTurn:
        """Start watching a model call whose span would go under ``parent`` (None: current).

        Call it just before the model call, in the context the call runs in.
        """
        context = trace.get_current_span(parent).get_span_context()
        entry = processor.run_under(context) if context.is_valid else None
        return cls(entry, parent)

    def counted(self, processor: LoopGuardSpanProcessor) -> bool:
        """Return True when a model span not loopguard's counted in the run since ``begin``."""
        entry = self.entry
        if entry is None:
            return False
        context = trace.get_current_span(self.parent).get_span_context()
        if processor.run_under(context) is not entry:  # flushes the worker's queue first
            return False  # the run ended or was evicted meanwhile: its count says nothing
        with entry.state.lock:
            return entry.model_turns - self.turns > entry.own_turns - self.own

    def end(self, processor: LoopGuardSpanProcessor, tracer: trace.Tracer,
            attributes: Mapping[str, Any], *, model: str | None = None,
            error: BaseException | None = None) -> None:
        """Record the call in a ``chat`` span of its own, unless it counted already.

        ``attributes``: what the span says of the response beyond ``gen_ai.operation.name``
        (finish reasons, token usage); ``model``: the model's name, for the span's name.
        """
        if self.counted(processor):
            return
        entry = self.entry
        if entry is not None:  # before the span ends: ``counted`` never sees it unexplained
            with entry.state.lock:
                entry.own_turns += 1
        span = tracer.start_span(f"{_CHAT} {model}" if model else _CHAT, context=self.parent,
                                 attributes={"gen_ai.operation.name": _CHAT, **attributes},
                                 start_time=self.start_ns)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}"))
        span.end()
