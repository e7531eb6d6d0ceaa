"""The one verdict of enforce mode: precheck a call, choose the enforcement, annotate the span.

``ToolGuard`` and every framework integration decide through ``check`` and record through
``annotate``, so a guarded call is judged the same way whichever hook made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.trace import Status, StatusCode

from otel_loopguard.enforce._host import span_key
from otel_loopguard.evidence import evidence_attributes
from otel_loopguard.exceptions import ToolLoopError
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision

if TYPE_CHECKING:
    from otel_loopguard.state import RunEntry

__all__ = ["BLOCKED", "GuardVerdict", "LoopDetectedResult", "annotate", "check", "warning"]

BLOCKED: Final = "loopguard.blocked"
"""Span attribute: the tool body did not run because the guard blocked it."""
LOOP_DETECTED: Final = "loop-detected"


class LoopDetectedResult(str):
    """The synthetic tool result of hint mode: ``[loop-detected] ...`` for the model.

    It is a ``str`` (so frameworks pass it to the model as the tool's output) carrying
    ``error == "loop-detected"`` and the ``decision``, so callers can tell it from a real
    result.
    """

    error: str
    decision: Decision

    def __new__(cls, decision: Decision) -> LoopDetectedResult:
        """Build the hint text from ``decision``."""
        text = f"[loop-detected] {decision.hint}"
        obj = super().__new__(cls, text)
        obj.error = LOOP_DETECTED
        obj.decision = decision
        return obj

    def __reduce__(self) -> tuple[type[LoopDetectedResult], tuple[Decision]]:
        """Copy and pickle from the decision (``str``'s way would pass the text as one)."""
        return type(self), (self.decision,)


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
    key: str = ""
    """The id of the span the call counts as running under (empty when it is not counted)."""
    entry: RunEntry | None = field(default=None, repr=False, compare=False)
    """The run's entry, while the call counts as running in it."""

    def finish(self, processor: LoopGuardSpanProcessor) -> None:
        """Stop counting the call as running in its run (once its span has ended).

        Processing the call's span does so too; calling both is safe (the second does nothing).
        """
        if self.entry is not None:
            with self.entry.state.lock:
                processor.engine.call_finished(self.entry.state, self.key)

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
    """Precheck a call of ``tool`` in the run of ``run_span`` and choose the enforcement.

    ``arguments`` lists equivalent forms of the call's arguments (the first is the main one);
    the strongest decision wins, so a call matches its earlier calls however the instrumentation
    recorded them. Counts the enforcement in ``loopguard_enforced_total``.

    A call allowed to run counts as running in its run from now (``LoopEngine.call_started``,
    under ``run_span``'s id) until the span with that id is processed or ``finish`` is called,
    so calls started in parallel meet the budgets and ladders together; ``captured`` says
    whether its result will be recorded.
    """
    config = processor.config
    run_id, entry = processor.run_for_span(run_span)
    key = span_key(run_span)
    previous = Action.CONTINUE
    with entry.state.lock:
        decisions = [processor.engine.precheck(entry.state, tool, args) for args in arguments]
        decision = max(decisions, key=lambda d: d.action)  # the first of the strongest
        if decision.action < Action.STOP or config.mode != "enforce":
            enforcement = None
        elif config.enforcement == "hint_then_abort":
            enforcement = "abort" if entry.state.hinted else "hint"
            entry.state.hinted = True
        else:
            enforcement = config.enforcement
        if enforcement is None:
            processor.engine.call_started(entry.state, tool, arguments[0], key,
                                          captured=captured)
        else:  # the call never runs, so process never sees it
            processor.engine.notify(entry.state, decision)
            previous = entry.note_loop(decision)
    if enforcement is not None:
        try:  # the verdict stands whatever counting it does: a failing metric stops nothing less
            processor.record_enforcement(entry, enforcement)
            _count_stop(processor, entry.template, decision, previous, run_span)
        except Exception as exc:
            processor.guard.handle("enforce", exc)
        return GuardVerdict(decision, config.mode, enforcement, run_id)
    return GuardVerdict(decision, config.mode, enforcement, run_id, key, entry)


def _count_stop(processor: LoopGuardSpanProcessor, template: str | None, decision: Decision,
                previous: Action, run_span: Any) -> None:
    """Count the finding of a stopped call, as detection counts any finding.

    The call never runs, so the processor never counts it; without this, an enforced stop
    showed only in ``loopguard_enforced_total``: never ``action="stop"`` in
    ``loopguard_loop_detected_total`` or ``runs_flagged``, and a stop budget never in
    ``loopguard_budget_exceeded_total`` (so ``LoopGuardBudgetExhausted`` could not fire in
    enforce mode). ``previous``: the run's highest loop action before it.
    """
    metrics = processor.metrics
    if metrics is not None:
        metrics.record_decision(template, decision, processor.config.mode, previous,
                                trace_id=format(run_span.get_span_context().trace_id, "032x"))


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
