"""What the framework integrations share: the precheck against a run, span annotations, runs.

No framework is imported here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from otel_loopguard.enforce import BLOCKED, GuardedCall, LoopDetectedResult, _encode, decide
from otel_loopguard.evidence import evidence_attributes
from otel_loopguard.exceptions import ToolLoopError
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision

__all__ = ["GuardVerdict", "annotate", "check", "finished", "is_instrumentation_tool_span",
           "observed"]

_log = logging.getLogger("otel_loopguard.integrations")

OWN_SCOPE: Final = "otel_loopguard.enforce"
"""Instrumentation scope of the spans loopguard opens itself (the same as ``ToolGuard``'s)."""
_MASK64: Final = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """What the guard decided on one tool call, before it ran.

    The OpenAI Agents guardrails put it in ``ToolGuardrailFunctionOutput.output_info`` (so it
    shows in ``RunResult.tool_input_guardrail_results`` and in the tripwire exception).
    """

    decision: Decision
    """The precheck decision (the same in observe and enforce mode)."""
    mode: str
    """``observe`` or ``enforce``: the processor's mode."""
    enforcement: str | None
    """``abort`` or ``hint`` when the call was blocked; None when it was allowed to run."""
    run_id: str
    """The run the call belongs to (the processor's run id)."""
    call: GuardedCall | None = field(default=None, compare=False, repr=False)
    """The allowed call as it counts as running in its run (see :func:`finished`)."""

    @property
    def blocked(self) -> bool:
        """Return True when the guard stopped the call (enforce mode only)."""
        return self.enforcement is not None

    @property
    def would_block(self) -> bool:
        """Return True when enforce mode would stop the call (also in observe mode)."""
        return self.decision.action is Action.STOP

    def hint_result(self) -> LoopDetectedResult:
        """Return the ``[loop-detected] ...`` text that replaces the tool's result."""
        return LoopDetectedResult(self.decision)

    def error(self) -> ToolLoopError:
        """Return the ``ToolLoopError`` for this decision."""
        return ToolLoopError(self.decision)


def check(processor: LoopGuardSpanProcessor, run_span: Any, tool: str,
          arguments: Sequence[Any], *, captured: bool = True) -> GuardVerdict:
    """Precheck a call of ``tool`` whose tool span is ``run_span`` and choose the enforcement.

    ``arguments`` lists equivalent forms of the call's arguments (the first is the main one);
    the strongest decision wins, so a call matches its earlier calls however the instrumentation
    recorded them. A call that may run counts as running until its span is processed (see
    ``enforce.decide``). Counts the enforcement in ``loopguard_enforced_total``.
    """
    guarded = decide(processor, run_span, tool, arguments, captured=captured)
    return GuardVerdict(guarded.decision, processor.config.mode, guarded.enforcement,
                        guarded.run_id, guarded if guarded.enforcement is None else None)


def finished(processor: LoopGuardSpanProcessor, verdict: GuardVerdict | None) -> None:
    """Stop counting an allowed call as running, once it has returned or raised.

    ``run_span`` of :func:`check` may be a span around the tool's own (a LangChain chain span),
    whose end says nothing about the call: the integration says when the call is over.
    """
    if verdict is not None and verdict.call is not None:
        try:
            verdict.call.finish(processor)
        except Exception as exc:
            processor.guard.handle("enforce", exc)


def annotate(span: Any, verdict: GuardVerdict) -> None:
    """Record a flagged verdict on the call's span, as ``ToolGuard`` does.

    ``loopguard.precheck.*`` evidence; ``loopguard.blocked``, ``loopguard.enforcement`` and
    ``loopguard.hint`` when blocked (the processor then does not count the span as a call);
    ``loopguard.would_block`` in observe mode; status ERROR on abort.
    """
    decision = verdict.decision
    if not decision.flagged:
        return
    attrs: dict[str, Any] = {
        key.replace("loopguard.", "loopguard.precheck.", 1): value
        for key, value in evidence_attributes(decision, verdict.run_id, verdict.mode).items()}
    if verdict.enforcement is not None:
        attrs[BLOCKED] = True
        attrs["loopguard.enforcement"] = verdict.enforcement
        attrs["loopguard.hint"] = decision.hint
    elif decision.action is Action.STOP:
        attrs["loopguard.would_block"] = True
    span.set_attributes(attrs)
    if verdict.enforcement == "abort":
        span.set_status(Status(StatusCode.ERROR, decision.code))


def warning(verdict: GuardVerdict, config: Any) -> str | None:
    """Return the ``[loop-warning]`` suffix for an allowed call under ``hint_on_warn``, or None."""
    if (config.hint_on_warn and verdict.mode == "enforce" and verdict.enforcement is None
            and Action.WARN <= verdict.decision.action < Action.STOP):
        return f"\n\n[loop-warning] {verdict.decision.hint}"
    return None


def scope_name(span: Any) -> str:
    """Return the instrumentation scope name of an SDK span, or ``""``."""
    scope = getattr(span, "instrumentation_scope", None)
    return str(getattr(scope, "name", "") or "")


def span_attributes(span: Any) -> Mapping[str, Any]:
    """Return the attributes of an SDK span (empty for a non-recording span)."""
    attrs = getattr(span, "attributes", None)
    return attrs if isinstance(attrs, Mapping) else {}


def is_instrumentation_tool_span(span: Any) -> bool:
    """Return True when ``span`` is an open tool span made by a framework instrumentation.

    OpenInference (``openinference.span.kind=TOOL``), OpenLLMetry (``traceloop.span.kind=tool``)
    and the GenAI conventions (``gen_ai.operation.name=execute_tool``) all mark the tool span at
    start; loopguard's own spans are excluded.
    """
    if span is None or not span.is_recording() or scope_name(span) == OWN_SCOPE:
        return False
    attrs = span_attributes(span)
    return (attrs.get("openinference.span.kind") == "TOOL"
            or attrs.get("traceloop.span.kind") == "tool"
            or attrs.get("gen_ai.operation.name") == "execute_tool")


def observed(processor: LoopGuardSpanProcessor, span: Any) -> bool:
    """Return True when ``processor`` sees ``span`` (it is on the processor's provider).

    An instrumentation wired to another provider records calls the processor never sees; the
    guard must then record them itself.
    """
    context = span.get_span_context()
    return bool(context.is_valid) and next(processor.live.ancestors(context.span_id),
                                           None) is not None


def synthetic_context(trace_id: int) -> Context:
    """Return a context whose parent is a (never exported) local span of trace ``trace_id``.

    Used when no span is open around an uninstrumented agent run: the guard's tool spans of one
    run then share a trace, which is the processor's run.
    """
    trace_id &= (1 << 128) - 1
    trace_id = trace_id or 1
    span_id = ((trace_id >> 64) ^ trace_id) & _MASK64 or 1
    parent = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def release_run(processor: LoopGuardSpanProcessor, trace_id: int) -> None:
    """Drop the state of a finished synthetic run (it has no root span whose end would)."""
    processor.store.release(format(trace_id, "032x"))


def tool_span_attributes(tool: str, arguments: Any, capture: bool) -> dict[str, Any]:
    """Return the GenAI attributes of an ``execute_tool`` span, as ``ToolGuard`` writes them."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if capture and arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = _encode(arguments)
    return attrs


def record_result(span: Any, result: Any, *, capture: bool, error: str | None = None) -> None:
    """Record a tool's result on its span; ``error`` sets status ERROR with that description."""
    if capture and result is not None:
        span.set_attribute("gen_ai.tool.call.result", _encode(result))
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error[:500]))


def blocked_span(tracer: trace.Tracer, context: Context | None, tool: str, arguments: Any,
                 verdict: GuardVerdict, *, capture: bool) -> None:
    """Emit the (already ended) span of a call the guard blocked before any span existed."""
    span = tracer.start_span(f"execute_tool {tool}", context=context,
                             attributes=tool_span_attributes(tool, arguments, capture))
    annotate(span, verdict)
    span.end()


def warn_once(kinds: set[str], kind: str, message: str) -> None:
    """Log ``message`` the first time ``kind`` is seen in ``kinds``."""
    if kind not in kinds:
        kinds.add(kind)
        _log.warning(message)
