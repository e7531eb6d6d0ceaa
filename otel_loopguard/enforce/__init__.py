"""Enforce mode for tool code you call directly: a decorator and a context manager.

``ToolGuard`` opens an OTel GenAI ``execute_tool`` span for each call (so the tool needs no other
instrumentation), asks the run's state *before* the call runs whether it would be one call too
many, and then, in enforce mode, aborts with ``ToolLoopError``, or skips the tool and hands the
model a ``[loop-detected]`` hint. In observe mode the tool always runs and the span records what
enforce would have done.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar, cast, overload

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from otel_loopguard.evidence import evidence_attributes
from otel_loopguard.exceptions import LoopGuardError, ToolLoopError
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision

if TYPE_CHECKING:
    from otel_loopguard.state import RunEntry

__all__ = ["GuardedCall", "LoopDetectedResult", "ToolCallScope", "ToolGuard", "decide"]

P = ParamSpec("P")
R = TypeVar("R")

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


@dataclass(frozen=True, slots=True)
class GuardedCall:
    """What the guard decided on one call before it ran, and the run it belongs to."""

    run_id: str
    entry: RunEntry
    decision: Decision
    """The precheck decision (the strongest over the argument forms)."""
    enforcement: str | None
    """``abort`` or ``hint`` when the call is blocked; None when it may run."""
    key: str
    """The span id of the call's tool span, under which it counts as running."""

    def finish(self, processor: LoopGuardSpanProcessor) -> None:
        """Stop counting the call as running (once its span has ended)."""
        with self.entry.state.lock:
            processor.engine.call_finished(self.entry.state, self.key)


def decide(processor: LoopGuardSpanProcessor, span: Any, tool: str,
           arguments: Sequence[Any], *, captured: bool = True) -> GuardedCall:
    """Precheck a call of ``tool`` in the run of ``span``, choose the enforcement, count it.

    The one verdict of enforce mode, for ``ToolGuard`` and the framework integrations.
    ``arguments`` lists equivalent forms of the call's arguments (the first is the main one);
    the strongest decision wins. A call that may run is counted as running in its run
    (``LoopEngine.call_started``, under the span's id) from now until its span is processed,
    so calls started in parallel meet the budgets and ladders together. A blocked call is
    handed to ``on_decision`` and counted in ``loopguard_enforced_total``.

    Raises:
        LoopGuardError: from ``on_decision`` into the run it was called for.
    """
    config, engine = processor.config, processor.engine
    run_id, entry = processor.run_for_span(span)
    key = format(span.get_span_context().span_id, "016x")
    state = entry.state
    with state.lock:
        decision = max((engine.precheck(state, tool, args) for args in arguments),
                       key=lambda d: d.action)  # the first of the strongest
        if decision.action < Action.STOP or config.mode != "enforce":
            enforcement = None
        elif config.enforcement == "hint_then_abort":
            enforcement = "abort" if state.hinted else "hint"
            state.hinted = True
        else:
            enforcement = config.enforcement
        if enforcement is None:
            engine.call_started(state, tool, arguments[0], key, captured=captured)
        else:  # the call never runs, so process never sees it
            engine.notify(state, decision)
    if enforcement is not None:
        processor.record_enforcement(entry, enforcement)
    return GuardedCall(run_id, entry, decision, enforcement, key)


class ToolCallScope:
    """One guarded call: record its result (or error) on the span."""

    def __init__(self, span: Span, decision: Decision, blocked: LoopDetectedResult | None,
                 capture: bool) -> None:
        """Wrap the call's span."""
        self.span = span
        self.decision = decision
        """The precheck decision for this call."""
        self.blocked = blocked
        """In hint mode: the synthetic result to return instead of running the tool."""
        self._capture = capture

    def set_result(self, result: Any) -> None:
        """Record the tool's result (``gen_ai.tool.call.result``) on the span."""
        if self._capture:
            self.span.set_attribute("gen_ai.tool.call.result", _encode(result))


def _encode(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class ToolGuard:
    """Guards direct tool calls with the state of a ``LoopGuardSpanProcessor``.

    Thread-safe; the decorator works on sync and async functions and keeps their signature.

    Args:
        processor: the installed processor whose runs and settings are used (``mode``,
            ``enforcement``, ``hint_on_warn``).
        tracer_provider: provider that makes the tool spans; default the global one. It must
            be the provider ``processor`` is installed on, or the calls are never observed.
        capture_content: record arguments and results on the spans (needed for detection;
            default True).
    """

    def __init__(self, processor: LoopGuardSpanProcessor, *,
                 tracer_provider: trace.TracerProvider | None = None,
                 capture_content: bool = True) -> None:
        """Bind the guard to ``processor``."""
        self.processor = processor
        self.config = processor.config
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(
            "otel_loopguard.enforce")
        self._capture = capture_content

    @contextmanager
    def call(self, tool: str, arguments: Any = None) -> Iterator[ToolCallScope]:
        """Open the tool span and check the call before it runs.

        Raises:
            ToolLoopError: in enforce mode with ``abort`` (or the second stop of
                ``hint_then_abort``), before the body runs.
        """
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": tool}
        if self._capture and arguments is not None:
            attrs["gen_ai.tool.call.arguments"] = _encode(arguments)
        guarded: GuardedCall | None = None
        try:
            with self._tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs,
                                                    record_exception=True) as span:
                guarded = self._check(span, tool, arguments)
                decision = guarded.decision if guarded else Decision(Action.CONTINUE, tool=tool)
                blocked = LoopDetectedResult(decision) if guarded and guarded.enforcement \
                    else None
                yield ToolCallScope(span, decision, blocked, self._capture)
        finally:
            if guarded is not None and guarded.enforcement is None:
                guarded.finish(self.processor)  # processing the span's end has done so

    def _check(self, span: Span, tool: str, arguments: Any) -> GuardedCall | None:
        try:
            guarded = decide(self.processor, span, tool, [arguments], captured=self._capture)
        except LoopGuardError:  # ToolLoopError, or a call from on_decision into its own run
            raise
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)
            return None
        if guarded.decision.flagged:
            try:
                self._annotate(span, guarded.decision, guarded.run_id, guarded.enforcement)
            except Exception as exc:
                self.processor.guard.handle("enforce", exc)
        if guarded.enforcement == "abort":
            span.set_status(Status(StatusCode.ERROR, guarded.decision.code))
            raise ToolLoopError(guarded.decision)
        return guarded

    def _annotate(self, span: Span, decision: Decision, run_id: str,
                  enforcement: str | None) -> None:
        attrs = {key.replace("loopguard.", "loopguard.precheck.", 1): value
                 for key, value in evidence_attributes(
                     decision, run_id, self.config.mode).items()}
        if enforcement is not None:
            attrs[BLOCKED] = True
            attrs["loopguard.enforcement"] = enforcement
            attrs["loopguard.hint"] = decision.hint
        elif decision.action is Action.STOP:
            attrs["loopguard.would_block"] = True
        span.set_attributes(attrs)

    @overload
    def tool(self, func: Callable[P, R], *, name: str | None = None) -> Callable[P, R]: ...

    @overload
    def tool(self, func: None = None, *,
             name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def tool(self, func: Callable[P, R] | None = None, *,
             name: str | None = None) -> Any:
        """Decorate a tool function (sync or async); ``@guard.tool`` or ``@guard.tool(name=)``.

        Keyword arguments (and positional ones, by parameter name) become the recorded
        arguments. In hint mode a blocked call returns a ``LoopDetectedResult`` instead of
        running the function.
        """
        if func is None:
            return functools.partial(self.tool, name=name)
        return self._wrap(func, name or func.__name__)

    def _wrap(self, func: Callable[P, R], tool: str) -> Callable[P, R]:
        signature = inspect.signature(func)

        def bound(*args: Any, **kwargs: Any) -> dict[str, Any]:
            try:
                ba = signature.bind(*args, **kwargs)
            except TypeError:
                return {"args": list(args), **kwargs}
            return dict(ba.arguments)

        if inspect.iscoroutinefunction(func):
            async_func = cast(Callable[..., Awaitable[Any]], func)

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.call(tool, bound(*args, **kwargs)) as scope:
                    if scope.blocked is not None:
                        return scope.blocked
                    result = await async_func(*args, **kwargs)
                    scope.set_result(result)
                    return self._maybe_warn(scope, result)

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.call(tool, bound(*args, **kwargs)) as scope:
                if scope.blocked is not None:
                    return cast(R, scope.blocked)
                result = func(*args, **kwargs)
                scope.set_result(result)
                return cast(R, self._maybe_warn(scope, result))

        return wrapper

    def _maybe_warn(self, scope: ToolCallScope, result: Any) -> Any:
        """With ``hint_on_warn``, append the hint to a string result (the tool still ran)."""
        if (self.config.hint_on_warn and self.config.mode == "enforce"
                and Action.WARN <= scope.decision.action < Action.STOP
                and isinstance(result, str)):
            return f"{result}\n\n[loop-warning] {scope.decision.hint}"
        return result
