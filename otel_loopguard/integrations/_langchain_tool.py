"""``guard_tool``: a copy of one LangChain tool whose function prechecks each call."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Final

from opentelemetry import trace

from otel_loopguard.enforce import ToolCallScope, ToolGuard, _encode, _model_arguments
from otel_loopguard.enforce._verdict import GuardVerdict, annotate, check, warning
from otel_loopguard.integrations._common import (
    finished,
    is_instrumentation_tool_span,
    observed,
    supplier,
    warn_once,
)
from otel_loopguard.integrations._langchain_common import (
    _HAVE_LANGCHAIN,
    _argument_forms,
    _openinference_span,
    _require_langchain,
)
from otel_loopguard.processor import LoopGuardSpanProcessor

if _HAVE_LANGCHAIN:
    from otel_loopguard.integrations._langchain_common import BaseTool, StructuredTool, Tool

__all__ = ["guard_tool", "supplying_tool"]

_INJECTED: Final = frozenset({"config", "callbacks", "run_manager"})
"""Parameters LangChain injects into a tool function: never part of the call's arguments."""
_VARIADIC: Final = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def guard_tool(tool: BaseTool, processor: LoopGuardSpanProcessor, *,
               tracer_provider: trace.TracerProvider | None = None,
               capture_content: bool = True) -> BaseTool:
    """Return a copy of ``tool`` whose calls are guarded (a ``StructuredTool`` or ``Tool``).

    The copy keeps the tool's name, description, schema and settings; its function prechecks
    each call. In enforce mode a blocked call raises ``ToolLoopError`` (abort) or returns the
    ``[loop-detected]`` hint as its result (hint). Inside an instrumented LangChain the
    instrumentation's tool span is used; otherwise the call runs in loopguard's own span, under
    the span that is current: open one around each agent run, or every call is a run of its own
    (and a warning is logged once).

    Note: a ``ToolNode(handle_tool_errors=True)`` turns the abort's ``ToolLoopError`` into an
    error message to the model; leave ``handle_tool_errors`` at its default (it re-raises other
    exceptions) or use ``LoopGuardMiddleware`` / ``LoopGuardToolCallWrapper``.

    Raises:
        TypeError: for a tool that is neither a ``StructuredTool`` nor a ``Tool``.
        ImportError: when langchain-core is not installed.
    """
    _require_langchain()
    if not isinstance(tool, StructuredTool | Tool):
        raise TypeError(f"guard_tool supports StructuredTool and Tool (what @tool makes), got "
                        f"{type(tool).__name__}; use LoopGuardMiddleware or "
                        "LoopGuardToolCallWrapper instead")
    guard = _ToolFunctionGuard(processor, tool, tracer_provider, capture_content)
    return _copy(tool, guard.wrap, guard.wrap_async)


def supplying_tool(tool: BaseTool, processor: LoopGuardSpanProcessor) -> BaseTool:
    """Return a copy of ``tool`` that hands the engine each call's content, or ``tool`` itself.

    For ``LoopGuardToolCallWrapper``, which prechecks a call outside the instrumentation's tool
    span (it starts inside the tool node): inside that span, the copy's function hands the
    engine the call's arguments and result by the span's id, for when the span records
    neither (content capture off). No precheck of its own. A tool of another kind is returned
    as it is.
    """
    if not isinstance(tool, StructuredTool | Tool):
        return tool
    guard = _ToolFunctionGuard(processor, tool, None, True)
    return _copy(tool, guard.wrap_supplying, guard.wrap_supplying_async)


def _copy(tool: StructuredTool | Tool, wrap: Callable[[Any], Any],
          wrap_async: Callable[[Any], Any]) -> BaseTool:
    """Return a copy of ``tool`` whose function and coroutine are wrapped."""
    update: dict[str, Any] = {}
    if tool.func is not None:
        update["func"] = wrap(tool.func)
    if tool.coroutine is not None:
        update["coroutine"] = wrap_async(tool.coroutine)
    return tool.model_copy(update=update)


class _ToolFunctionGuard:
    """The guard inside a tool's function (the tool's own span, if any, is current)."""

    def __init__(self, processor: LoopGuardSpanProcessor, tool: BaseTool,
                 tracer_provider: trace.TracerProvider | None, capture: bool) -> None:
        self.processor = processor
        self.config = processor.config
        self.name = tool.name
        self.artifact = getattr(tool, "response_format", "content") == "content_and_artifact"
        self.model_args: frozenset[str] | None = None
        """The arguments the model gives a ``StructuredTool`` (its schema's, injected ones
        left out); None for a ``Tool``, whose single input the function may name freely."""
        if isinstance(tool, StructuredTool):
            try:
                self.model_args = frozenset(tool.args)
            except Exception:  # a schema LangChain cannot describe: bind every parameter
                self.model_args = None
        self._guard = ToolGuard(processor, tracer_provider=tracer_provider,
                                capture_content=capture)
        self._warned: set[str] = set()

    def injected(self, func: Callable[..., Any]) -> frozenset[str]:
        """Return the parameters of ``func`` that LangChain fills in, not the model.

        ``config``, ``callbacks``, ``run_manager``, and for a ``StructuredTool`` every named
        parameter its schema leaves out: ``ToolRuntime``, ``InjectedState``, ``InjectedStore``,
        ``InjectedToolCallId``, ``InjectedToolArg``. They differ from call to call (the state
        holds the conversation so far), so recording them made identical calls look new.
        """
        if self.model_args is None:
            return _INJECTED
        try:
            parameters = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):
            return _INJECTED
        return _INJECTED | {p.name for p in parameters
                            if p.name not in self.model_args and p.kind not in _VARIADIC}

    @staticmethod
    def arguments(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  injected: frozenset[str] = _INJECTED) -> Any:
        try:
            bound = inspect.signature(func).bind_partial(*args, **kwargs).arguments
        except (TypeError, ValueError):
            bound = {"args": list(args), **kwargs}
        return _model_arguments({k: v for k, v in bound.items() if k not in injected})

    def precheck(self, arguments: Any) -> tuple[GuardVerdict, Callable[[str], None] | None] | None:
        """Return the verdict when an instrumentation's tool span is current, else None.

        With it, the function that hands the engine the call's result, for when that span
        records no content (its capture is off): the call's arguments are handed over at once
        (``enforce._host.supplier``), or calls of unknown content would never be the same and
        nothing would be stopped.
        """
        current = trace.get_current_span()
        span = self.instrumentation_span(current)
        if span is None:
            if not current.get_span_context().is_valid:
                warn_once(self._warned, "run", (
                    "otel-loopguard: guard_tool found no span around the agent run, so its "
                    "calls cannot be grouped into runs; open a span around the run, instrument "
                    "LangChain, or use LoopGuardMiddleware"))
            return None
        try:
            verdict = check(self.processor, span, self.name, _argument_forms(arguments))
            annotate(span, verdict)
            # OpenInference writes its span's attributes when the call ends: whether it will
            # hold the content is not known yet (the engine uses what it supplies only where
            # the span lacks it)
            supply = None if verdict.blocked else supplier(self.processor, span,
                                                           _encode(arguments))
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)
            return None
        return verdict, supply

    def instrumentation_span(self, current: Any) -> Any:
        """Return the instrumentation's tool span of this call, when the processor sees it.

        The current span (OpenLLMetry, GenAI), or OpenInference's, which it does not make
        current. None for an instrumentation on another provider: the guard records the call.
        """
        span = current if is_instrumentation_tool_span(current) else _openinference_span()
        return span if span is not None and observed(self.processor, span) else None

    def supplier_here(self, arguments: Any) -> Callable[[str], None] | None:
        """Hand the engine ``arguments`` for the instrumentation's tool span, if any.

        Returns the function that hands it the result; None outside such a span.
        """
        try:
            span = self.instrumentation_span(trace.get_current_span())
            return None if span is None else supplier(self.processor, span, _encode(arguments))
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)
            return None

    def wrap_supplying(self, func: Callable[..., Any]) -> Callable[..., Any]:
        injected = self.injected(func)

        @functools.wraps(func)
        def supplying(*args: Any, **kwargs: Any) -> Any:
            supply = self.supplier_here(self.arguments(func, args, kwargs, injected))
            return self.supplied(supply, func(*args, **kwargs))

        return supplying

    def wrap_supplying_async(self, func: Callable[..., Awaitable[Any]]
                             ) -> Callable[..., Awaitable[Any]]:
        injected = self.injected(func)

        @functools.wraps(func)
        async def supplying(*args: Any, **kwargs: Any) -> Any:
            supply = self.supplier_here(self.arguments(func, args, kwargs, injected))
            return self.supplied(supply, await func(*args, **kwargs))

        return supplying

    def supplied(self, supply: Callable[[str], None] | None, result: Any) -> Any:
        """Hand ``result`` (without its artifact) to the engine by ``supply``; return it."""
        if supply is not None:
            supply(_encode(result[0] if self.artifact and isinstance(result, tuple) else result))
        return result

    def blocked_result(self, verdict: GuardVerdict) -> Any:
        if verdict.enforcement == "abort":
            raise verdict.error()
        hint = verdict.hint_result()
        if self.artifact:
            return hint, {"error": "loop-detected", "code": verdict.decision.code}
        return hint

    def finish(self, verdict: GuardVerdict, result: Any) -> Any:
        suffix = warning(verdict, self.config)
        if suffix is None:
            return result
        if isinstance(result, str):
            return result + suffix
        if self.artifact and isinstance(result, tuple) and len(result) == 2 and isinstance(
                result[0], str):
            return result[0] + suffix, result[1]
        return result

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        injected = self.injected(func)

        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            arguments = self.arguments(func, args, kwargs, injected)
            prechecked = self.precheck(arguments)
            if prechecked is not None:
                verdict, supply = prechecked
                if verdict.blocked:
                    return self.blocked_result(verdict)
                try:
                    return self.finish(verdict, self.supplied(supply, func(*args, **kwargs)))
                finally:
                    finished(self.processor, verdict)
            with self._guard.call(self.name, arguments) as scope:
                if scope.blocked is not None:
                    return self.blocked_result(self._verdict(scope))
                result = func(*args, **kwargs)
                scope.set_result(result[0] if self.artifact and isinstance(result, tuple)
                                 else result)
                return self.finish(self._verdict(scope), result)

        return guarded

    def wrap_async(self, func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        injected = self.injected(func)

        @functools.wraps(func)
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            arguments = self.arguments(func, args, kwargs, injected)
            prechecked = self.precheck(arguments)
            if prechecked is not None:
                verdict, supply = prechecked
                if verdict.blocked:
                    return self.blocked_result(verdict)
                try:
                    return self.finish(verdict,
                                       self.supplied(supply, await func(*args, **kwargs)))
                finally:
                    finished(self.processor, verdict)
            with self._guard.call(self.name, arguments) as scope:
                if scope.blocked is not None:
                    return self.blocked_result(self._verdict(scope))
                result = await func(*args, **kwargs)
                scope.set_result(result[0] if self.artifact and isinstance(result, tuple)
                                 else result)
                return self.finish(self._verdict(scope), result)

        return guarded

    def _verdict(self, scope: ToolCallScope) -> GuardVerdict:
        enforcement = "hint" if scope.blocked is not None else None
        return GuardVerdict(scope.decision, self.config.mode, enforcement, "")
