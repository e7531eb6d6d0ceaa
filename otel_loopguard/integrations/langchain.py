"""LangChain / LangGraph: stop a looping tool call before it runs.

Two ways in, a few lines each::

    from otel_loopguard.integrations.langchain import LoopGuardMiddleware, guard_tool

    # LangChain 1.x agents (create_agent builds a LangGraph graph):
    agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(processor)])

    # Any LangGraph ToolNode, or anything else that runs LangChain tools:
    node = ToolNode([guard_tool(search, processor)])

Before each call, the guard asks the processor's run whether the call would be one too many. In
enforce mode it then raises ``ToolLoopError`` (``abort``; the run ends with it) or skips the tool
and returns the ``[loop-detected] ...`` hint as the ``ToolMessage`` content (``hint``; the
message has ``status="error"`` and an ``artifact`` with ``error == "loop-detected"``). In observe
mode the tool always runs and the guard only reports.

The run is the current OpenTelemetry trace. When LangChain is instrumented (OpenInference,
OpenLLMetry or the official GenAI instrumentation on the provider that holds the processor),
the instrumentation records every tool call and the guard uses its spans. Otherwise the guard
records each call itself in a GenAI ``execute_tool`` span, under the span that is current or,
when none is, under a synthetic parent: one trace per agent invocation (the middleware keeps a
run id in the agent state) or per message thread (``guard_tool`` and plain ``ToolNode``).

The middleware also sees each model call: one that no model span records (no instrumentation,
or one that skips the model) gets a ``chat`` span of loopguard's own, so that the tool calls
its response asks for in parallel are one batch (``ModelCallTurn``).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Annotated, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from otel_loopguard.enforce import ToolCallScope, ToolGuard
from otel_loopguard.enforce._verdict import GuardVerdict, check, warning
from otel_loopguard.integrations._common import (
    OWN_SCOPE,
    blocked_span,
    finished,
    observed,
    record_result,
    release_run,
    scope_name,
    synthetic_context,
    warn_once,
)
from otel_loopguard.integrations._langchain_common import (
    _HAVE_LANGCHAIN,
    _argument_forms,
    _openinference_span,
    _require_langchain,
    _response_message,
    _turn_attributes,
)
from otel_loopguard.integrations._langchain_tool import guard_tool, supplying_tool
from otel_loopguard.integrations._turns import ModelCallTurn
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision

if _HAVE_LANGCHAIN:
    from otel_loopguard.integrations._langchain_common import ToolMessage

__all__ = ["GuardVerdict", "LoopGuardMiddleware", "LoopGuardToolCallWrapper", "guard_tool"]

_MAX_TOOL_COPIES: Final = 256
"""Tools whose copy ``LoopGuardToolCallWrapper`` keeps (``_supplying``)."""
RUN_KEY: Final = "loopguard_run_id"
"""Agent-state key where ``LoopGuardMiddleware`` keeps the id of the current invocation."""


def _is_langchain_instrumentation(span: Any) -> bool:
    name = scope_name(span)
    return span.is_recording() and name != OWN_SCOPE and ("langchain" in name or
                                                          "langgraph" in name)


def _thread_trace_id(state: Any) -> int | None:
    """Return a trace id for the run from the agent state: our run id, else the first message."""
    if isinstance(state, Mapping):
        run = state.get(RUN_KEY)
        if isinstance(run, str):
            try:
                return int(run, 16)
            except ValueError:
                pass
        messages = state.get("messages")
    else:
        messages = getattr(state, "messages", None)
    if isinstance(messages, list) and messages:
        first = getattr(messages[0], "id", None)
        if first:
            return int.from_bytes(hashlib.sha256(str(first).encode()).digest()[:16], "big")
    return None


@contextmanager
def _attached(ctx: Context | None) -> Iterator[None]:
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def _hint_message(verdict: GuardVerdict, tool_call: Mapping[str, Any]) -> ToolMessage:
    decision = verdict.decision
    return ToolMessage(
        content=str(verdict.hint_result()), tool_call_id=tool_call.get("id") or "",
        name=tool_call.get("name"), status="error",
        artifact={"error": "loop-detected", "code": decision.code,
                  "action": decision.action.label, "tool": decision.tool,
                  "count": decision.evidence[0].count if decision.evidence else 0})


def _message_outcome(message: Any) -> tuple[Any, str | None]:
    """Return (result, error text or None) of a tool node's answer."""
    if isinstance(message, ToolMessage):
        content = message.content
        return content, (str(content) or "error") if message.status == "error" else None
    return None, None


def _with_warning(message: Any, verdict: GuardVerdict, config: Any) -> Any:
    suffix = warning(verdict, config)
    if suffix is not None and isinstance(message, ToolMessage) and isinstance(message.content,
                                                                               str):
        return message.model_copy(update={"content": message.content + suffix})
    return message


@dataclass
class _Plan:
    """How one call is guarded: through the instrumentation's spans, or a span of our own."""

    tool: str
    arguments: Any
    verdict: GuardVerdict | None = None
    parent: Context | None = None


class LoopGuardToolCallWrapper:
    """The guard as a LangGraph tool-call wrapper; ``LoopGuardMiddleware`` uses it too.

    ``ToolNode(tools, wrap_tool_call=wrapper, awrap_tool_call=wrapper.awrap)``.

    Args:
        processor: the installed ``LoopGuardSpanProcessor`` (its runs and settings are used).
        tracer_provider: the provider the processor is installed on, for the spans loopguard
            opens; default the global provider.
        capture_content: record arguments and results on those spans (needed for detection).
        record: True: always record calls in loopguard's own spans; False: never (an
            instrumentation records them); None (default): record unless a LangChain
            instrumentation's span is found.
    """

    def __init__(self, processor: LoopGuardSpanProcessor, *,
                 tracer_provider: trace.TracerProvider | None = None,
                 capture_content: bool = True, record: bool | None = None) -> None:
        """Bind the wrapper to ``processor``.

        Raises:
            ImportError: when langchain-core is not installed.
        """
        _require_langchain()
        self.processor = processor
        self.config = processor.config
        self.record = record
        self._capture = capture_content
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer(OWN_SCOPE)
        self._guard = ToolGuard(processor, tracer_provider=provider,
                                capture_content=capture_content)
        self._warned: set[str] = set()
        self._supplying_tools: dict[int, tuple[Any, Any]] = {}
        """id of a tool → (the tool, its copy that hands the engine each call's content)."""

    # --- ToolNode / middleware entry points --------------------------------------------------
    def __call__(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Guard one tool call (sync): ``handler(request)`` runs the tool."""
        plan = self._plan(request)
        if plan.verdict is not None:  # instrumented: the instrumentation records the call
            blocked = self._enforce(plan, request)
            if blocked is not None:
                return blocked
            try:
                return self._finish(plan, handler(self._supplying(request)))
            finally:
                finished(self.processor, plan.verdict)
        with _attached(plan.parent), self._guard.call(plan.tool, plan.arguments) as scope:
            if scope.blocked is not None:
                return _hint_message(self._scope_verdict(scope), request.tool_call)
            return self._record(scope, handler(request))

    async def awrap(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Guard one tool call (async): ``await handler(request)`` runs the tool."""
        plan = self._plan(request)
        if plan.verdict is not None:
            blocked = self._enforce(plan, request)
            if blocked is not None:
                return blocked
            try:
                return self._finish(plan, await handler(self._supplying(request)))
            finally:
                finished(self.processor, plan.verdict)
        with _attached(plan.parent), self._guard.call(plan.tool, plan.arguments) as scope:
            if scope.blocked is not None:
                return _hint_message(self._scope_verdict(scope), request.tool_call)
            return self._record(scope, await handler(request))

    # --- model calls (LoopGuardMiddleware) ---------------------------------------------------
    def model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Run one model call (sync), recorded as a model turn unless an instrumentation does.

        The tool calls the response requests are then one batch (``ModelCallTurn``).
        """
        turn = self._begin_turn(request)
        try:
            response = handler(request)
        except BaseException as exc:
            self._end_turn(turn, request, None, exc)
            raise
        self._end_turn(turn, request, response, None)
        return response

    async def amodel_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async ``model_call``."""
        turn = self._begin_turn(request)
        try:
            response = await handler(request)
        except BaseException as exc:
            self._end_turn(turn, request, None, exc)
            raise
        self._end_turn(turn, request, response, None)
        return response

    def _begin_turn(self, request: Any) -> ModelCallTurn | None:
        try:
            _, parent = self._anchor(getattr(request, "state", None), warn=False)
            return ModelCallTurn.begin(self.processor, parent)
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)
            return None

    def _end_turn(self, turn: ModelCallTurn | None, request: Any, response: Any,
                  error: BaseException | None) -> None:
        if turn is None:
            return
        try:
            attributes, model = _turn_attributes(_response_message(response),
                                                 getattr(request, "model", None))
            turn.end(self.processor, self._tracer, attributes, model=model, error=error)
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)

    # --- internals ---------------------------------------------------------------------------
    def _plan(self, request: Any) -> _Plan:
        call = request.tool_call
        plan = _Plan(str(call.get("name")), call.get("args") or {})
        span, plan.parent = self._anchor(getattr(request, "state", None), warn=True)
        if span is not None:
            try:
                plan.verdict = check(self.processor, span, plan.tool,
                                     _argument_forms(plan.arguments))
            except Exception as exc:
                self.processor.guard.handle("enforce", exc)
                plan.verdict = GuardVerdict(Decision(Action.CONTINUE, tool=plan.tool),
                                            self.config.mode, None, "")
        return plan

    def _anchor(self, state: Any, *, warn: bool) -> tuple[Any, Context | None]:
        """Return where the run's calls go: the instrumentation's span, or None, and a context.

        The context is the one loopguard's own spans of the run go under (None: the current
        one): the instrumentation's span, the span that is current, or a synthetic parent
        from the agent state. ``warn``: log (once) what keeps calls from being grouped.
        """
        span = self._instrumentation_span()
        if span is not None and self.record is not True:
            return span, trace.set_span_in_context(span)
        if warn and span is None and self.record is False:
            warn_once(self._warned, "record", "otel-loopguard: record=False but no LangChain "
                      "instrumentation span was found; this call is not checked")
        if trace.get_current_span().get_span_context().is_valid:
            return None, None
        trace_id = _thread_trace_id(state)
        if trace_id is None:
            if warn:
                warn_once(self._warned, "run", (
                    "otel-loopguard: no span is open around the agent run and the state has no "
                    "messages, so tool calls cannot be grouped into runs; open a span around "
                    "the run or use LoopGuardMiddleware"))
            trace_id = random.getrandbits(128)
        return None, synthetic_context(trace_id)

    def _instrumentation_span(self) -> Any:
        current = trace.get_current_span()
        if _is_langchain_instrumentation(current) and observed(self.processor, current):
            return current
        span = _openinference_span()
        return span if span is not None and observed(self.processor, span) else None

    def _supplying(self, request: Any) -> Any:
        """Return ``request`` with its tool replaced by a copy that hands over its calls' content.

        The copy (``supplying_tool``) hands the engine each call's content from inside the
        instrumentation's tool span, which starts inside the tool node, where this wrapper does
        not run: with its content capture off that span records neither arguments nor result,
        calls of unknown content are never the same, and nothing would be stopped. One copy
        per tool.
        """
        tool = getattr(request, "tool", None)
        override = getattr(request, "override", None)
        if tool is None or override is None:
            return request
        try:
            copies = self._supplying_tools
            copy = copies.get(id(tool))
            if copy is None or copy[0] is not tool:
                if len(copies) >= _MAX_TOOL_COPIES:  # tools made per invocation: start over
                    copies.clear()
                copy = copies[id(tool)] = (tool, supplying_tool(tool, self.processor))
            return override(tool=copy[1])
        except Exception as exc:  # a request or tool of an unknown shape: as it came
            self.processor.guard.handle("enforce", exc)
            return request

    def _enforce(self, plan: _Plan, request: Any) -> Any:
        verdict = plan.verdict
        assert verdict is not None
        if not verdict.blocked:
            return None
        blocked_span(self._tracer, plan.parent, plan.tool, plan.arguments, verdict,
                     capture=self._capture)
        if verdict.enforcement == "abort":
            raise verdict.error()
        return _hint_message(verdict, request.tool_call)

    def _finish(self, plan: _Plan, message: Any) -> Any:
        assert plan.verdict is not None
        return _with_warning(message, plan.verdict, self.config)

    def _record(self, scope: ToolCallScope, message: Any) -> Any:
        result, error = _message_outcome(message)
        record_result(scope.span, result, capture=self._capture, error=error)
        return _with_warning(message, self._scope_verdict(scope), self.config)

    def _scope_verdict(self, scope: ToolCallScope) -> GuardVerdict:
        enforcement = "hint" if scope.blocked is not None else None
        return GuardVerdict(scope.decision, self.config.mode, enforcement, "")


# --- LangChain 1.x agent middleware ----------------------------------------------------------
try:
    from langchain.agents.middleware import AgentMiddleware, AgentState  # type: ignore[import-not-found, unused-ignore]
    from langchain.agents.middleware.types import PrivateStateAttr  # type: ignore[import-not-found, unused-ignore]
    from langgraph.channels.untracked_value import UntrackedValue  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # langchain-core / langgraph without the langchain package
    _HAVE_MIDDLEWARE = False
else:
    _HAVE_MIDDLEWARE = True

if _HAVE_MIDDLEWARE:
    from typing_extensions import NotRequired

    class LoopGuardState(AgentState):  # type: ignore[type-arg, misc, unused-ignore]
        """Agent state with the id of the current invocation (private, not checkpointed)."""

        loopguard_run_id: NotRequired[  # type: ignore[valid-type, unused-ignore]
            Annotated[str, UntrackedValue, PrivateStateAttr]]

    class LoopGuardMiddleware(AgentMiddleware):  # type: ignore[type-arg, misc, unused-ignore]
        """LangChain 1.x agent middleware that guards every tool call of the agent.

        ``create_agent(model, tools, middleware=[LoopGuardMiddleware(processor)])``.

        Put it first in the list (the outermost ``wrap_tool_call``), so that no error-handling
        middleware turns its ``ToolLoopError`` into a message. Keyword arguments are those of
        :class:`LoopGuardToolCallWrapper`.
        """

        state_schema = LoopGuardState

        def __init__(self, processor: LoopGuardSpanProcessor, **kwargs: Any) -> None:
            """Bind the middleware to ``processor``."""
            super().__init__()
            self.wrapper = LoopGuardToolCallWrapper(processor, **kwargs)
            self.processor = processor

        def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            """Give this invocation a run id (used when no span is open around it)."""
            return {RUN_KEY: uuid.uuid4().hex}

        async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            """Async ``before_agent``."""
            return self.before_agent(state, runtime)

        def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            """Drop the invocation's synthetic run (no root span will end it)."""
            run = state.get(RUN_KEY) if isinstance(state, Mapping) else None
            if isinstance(run, str):
                with suppress(ValueError):
                    release_run(self.processor, int(run, 16))
            return None

        async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            """Async ``after_agent``."""
            return self.after_agent(state, runtime)

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            """Run the model call; record it as a model turn unless an instrumentation does."""
            return self.wrapper.model_call(request, handler)

        async def awrap_model_call(self, request: Any,
                                   handler: Callable[[Any], Awaitable[Any]]) -> Any:
            """Async ``wrap_model_call``."""
            return await self.wrapper.amodel_call(request, handler)

        def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            """Precheck the call; run it, or stop it (abort) or answer with the hint."""
            return self.wrapper(request, handler)

        async def awrap_tool_call(self, request: Any,
                                  handler: Callable[[Any], Awaitable[Any]]) -> Any:
            """Async ``wrap_tool_call``."""
            return await self.wrapper.awrap(request, handler)

else:  # pragma: no cover - exercised only without the langchain package

    class LoopGuardMiddleware:  # type: ignore[no-redef]
        """Unavailable: install ``langchain`` (1.x) for agent middleware."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            """Raise ImportError."""
            raise ImportError("LoopGuardMiddleware needs the langchain package (1.x); use "
                              "guard_tool() or LoopGuardToolCallWrapper with LangGraph")

