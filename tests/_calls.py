"""Tool calls for engine-level tests: build them, run them through a ``LoopEngine``, read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otel_loopguard import Decision, LoopEngine, LoopGuardConfig, ToolCall

NO_RESULT = object()
"""Pass as ``result`` for a call whose result was not captured."""


def call(tool: str, arguments: Any = None, result: Any = NO_RESULT, *,
         error: str | None = None, turn: int | None = None, agent: str | None = None,
         start: int | None = None, end: int | None = None) -> dict[str, Any]:
    """Return the fields of one ``ToolCall``; ``error`` marks it failed with that message."""
    fields: dict[str, Any] = {"tool": tool, "arguments": arguments, "turn": turn,
                              "agent": agent}
    if result is not NO_RESULT:
        fields.update(result=result, has_result=True)
    if error is not None:
        fields.update(error=True, error_message=error)
    if start is not None:
        fields.update(start_time_ns=start, end_time_ns=end if end is not None else start + 1)
    return fields


def tool_call(index: int, fields: dict[str, Any]) -> ToolCall:
    """Return the ``ToolCall`` of ``fields`` as the ``index``-th call (0-based) of a run."""
    return ToolCall(**{"start_time_ns": 10 * index + 1, "end_time_ns": 10 * index + 2,
                       "span_id": f"{index + 1:016x}", **fields})


def run(calls: Sequence[dict[str, Any]], config: LoopGuardConfig | None = None,
        engine: LoopEngine | None = None) -> list[Decision]:
    """Return the decisions on ``calls``, fed in order to one new run."""
    engine = engine or LoopEngine(config)
    state = engine.new_run()
    return [engine.process(state, tool_call(i, fields)) for i, fields in enumerate(calls)]


def by(decisions: Sequence[Decision], detector: str) -> dict[int, str]:
    """Return call index -> action of ``detector``'s evidence, for the calls it fired on."""
    return {d.call_index: e.action.label for d in decisions for e in d.evidence
            if e.detector == detector}


def codes(decisions: Sequence[Decision]) -> set[str]:
    """Return every evidence code among ``decisions``."""
    return {e.code for d in decisions for e in d.evidence}


def filler(count: int, start: int = 0) -> list[dict[str, Any]]:
    """Return ``count`` distinct calls of distinct tools, each with its own result."""
    return [call(f"other_{i}", {"n": i}, f"r{i}") for i in range(start, start + count)]
