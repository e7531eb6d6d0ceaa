"""OpenAI Agents SDK: stop a looping function tool before it runs, with tool guardrails.

::

    from otel_loopguard.integrations.openai_agents import guard_tools, raise_tool_loop_errors

    agent = Agent(name="triage", tools=guard_tools([search], processor))
    with raise_tool_loop_errors():          # abort mode: the tripwire becomes a ToolLoopError
        result = await Runner.run(agent, "I want a refund")

A tool *input* guardrail asks the processor's run, before each call, whether the call would be
one too many. In enforce mode it then trips (``abort``: the run ends with the SDK's
``ToolInputGuardrailTripwireTriggered``, whose ``output.output_info`` is a :class:`GuardVerdict`;
``tool_loop_error(exc)`` returns the ``ToolLoopError``) or rejects the call (``hint``: the model
gets the ``[loop-detected] ...`` hint as the tool's output and the tool does not run). In observe
mode it always allows the call and reports the verdict.

The run is the current OpenTelemetry trace. When the SDK is instrumented (OpenInference,
OpenLLMetry or the official GenAI instrumentation on the provider that holds the processor), the
instrumentation's tool span is current in the guardrail and the processor already records every
call, so the guardrail only annotates that span. Otherwise the guardrails open a GenAI
``execute_tool`` span per call themselves (the input guardrail starts it, the *output* guardrail
records the result and ends it), under the span that is current or, when none is, under a
synthetic parent in a trace whose id is the SDK's trace id.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final

try:
    from agents import (  # type: ignore[import-not-found, unused-ignore]
        FunctionTool,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolInputGuardrailTripwireTriggered,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
        default_tool_error_function,
        get_current_span,
        get_current_trace,
    )
except ImportError:  # the module stays importable; using it raises ImportError
    _HAVE_SDK = False

    class ToolInputGuardrailTripwireTriggered(Exception):  # type: ignore[no-redef]
        """Stand-in: never raised without the SDK."""

else:
    _HAVE_SDK = True

try:  # where the SDK keeps a tool's failure_error_function (0.24)
    from agents.tool import (  # type: ignore[import-not-found, unused-ignore]
        resolve_function_tool_failure_error_function,
        set_function_tool_failure_error_function,
    )
except ImportError:
    _HAVE_FAILURE_HOOK = False
else:
    _HAVE_FAILURE_HOOK = True

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.enforce import _encode
from otel_loopguard.enforce._verdict import GuardVerdict, annotate, check, warning
from otel_loopguard.exceptions import ToolLoopError
from otel_loopguard.integrations._common import (
    OWN_SCOPE,
    finished,
    is_instrumentation_tool_span,
    observed,
    record_result,
    release_run,
    supplier,
    synthetic_context,
    tool_span_attributes,
    warn_once,
)
from otel_loopguard.processor import LoopGuardSpanProcessor

__all__ = [
    "GuardVerdict",
    "LoopGuardToolGuardrails",
    "guard_tools",
    "loopguard_tool_guardrail",
    "raise_tool_loop_errors",
    "tool_loop_error",
]

_STATE: Final = "_otel_loopguard"
"""Attribute set on the SDK's ``ToolContext`` (shared by a call's input and output guardrails)."""
_RUN: Final = "_otel_loopguard_run"
"""Attribute set on the run's ``Usage`` object: the synthetic trace id of an untraced run."""
_ERROR: Final = "_otel_loopguard_error"
"""Attribute set on the SDK's ``ToolContext``: the error of a tool that raised."""
_WRAPPED: Final = "__otel_loopguard_wraps__"
"""Attribute of loopguard's wrapper of a ``failure_error_function``: the function it wraps."""
_SDK_ERROR: Final = (
    default_tool_error_function(None, Exception())  # type: ignore[arg-type, unused-ignore]
    if _HAVE_SDK else None)
"""The SDK's default model-facing text for a tool that raised."""


def _require_sdk() -> None:
    if not _HAVE_SDK:
        raise ImportError("otel_loopguard.integrations.openai_agents needs the OpenAI Agents "
                          "SDK: pip install openai-agents")


class _Pending:
    __slots__ = ("span", "supply", "verdict")

    def __init__(self, verdict: GuardVerdict, span: Any,
                 supply: Callable[[str], None] | None = None) -> None:
        self.verdict = verdict
        self.span = span
        self.supply = supply
        """Hands the engine the result when the instrumentation's span records no content
        (``enforce._host.supplier``), as the arguments were."""


class LoopGuardToolGuardrails:
    """A tool input guardrail and a tool output guardrail bound to one processor.

    ``input`` prechecks the call (and opens its span when the SDK is not instrumented);
    ``output`` records the result on that span and, with ``hint_on_warn``, appends the
    ``[loop-warning]`` hint to a string result. Attach both to a ``FunctionTool`` with
    :meth:`attach` (or :func:`guard_tools`). Thread-safe; one instance may guard many tools and
    runs.

    Args:
        processor: the installed ``LoopGuardSpanProcessor`` (its runs and settings are used).
        tracer_provider: the provider the processor is installed on, for the spans loopguard
            opens when the SDK is not instrumented; default the global provider.
        capture_content: record arguments and results on those spans (needed for detection).
        name: the guardrails' name in the SDK's results and traces.
    """

    def __init__(self, processor: LoopGuardSpanProcessor, *,
                 tracer_provider: trace.TracerProvider | None = None,
                 capture_content: bool = True, name: str = "loopguard") -> None:
        """Build both guardrails.

        Raises:
            ImportError: when the OpenAI Agents SDK is not installed.
        """
        _require_sdk()
        self.processor = processor
        self.config = processor.config
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(OWN_SCOPE)
        self._capture = capture_content
        self._warned: set[str] = set()
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._on_input, name=name)
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._on_output, name=name)

    def attach(self, tool: FunctionTool) -> FunctionTool:
        """Add the guardrails to ``tool`` (in place; idempotent) and return it.

        The input guardrail goes last among the tool's input guardrails (it opens the call's
        span, so it should only run once the others have allowed the call); the output
        guardrail goes first (it records the tool's own result). Loopguard guardrails already
        on the tool (from an earlier ``guard_tools``, say for each new agent) are replaced:
        stacked, each would check and record every call again.
        """
        inputs = [g for g in tool.tool_input_guardrails or []
                  if not _is_loopguard(g, LoopGuardToolGuardrails._on_input)]
        tool.tool_input_guardrails = [*inputs, self.input]
        outputs = [g for g in tool.tool_output_guardrails or []
                   if not _is_loopguard(g, LoopGuardToolGuardrails._on_output)]
        tool.tool_output_guardrails = [self.output, *outputs]
        _note_failures(tool)
        return tool

    # --- the guardrails ---------------------------------------------------------------------
    def _on_input(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        try:
            verdict = self._precheck(data)
        except Exception as exc:
            self.processor.guard.handle("enforce", exc)
            return ToolGuardrailFunctionOutput.allow()
        if verdict is None:  # loopguard's span is not recorded: nothing can be guarded
            return ToolGuardrailFunctionOutput.allow()
        if verdict.enforcement == "abort":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=verdict)
        if verdict.enforcement == "hint":
            return ToolGuardrailFunctionOutput.reject_content(str(verdict.hint_result()),
                                                              output_info=verdict)
        return ToolGuardrailFunctionOutput.allow(output_info=verdict)

    def _precheck(self, data: ToolInputGuardrailData) -> GuardVerdict | None:
        ctx = data.context
        tool, arguments = ctx.tool_name, ctx.tool_arguments
        current = trace.get_current_span()
        if is_instrumentation_tool_span(current) and observed(self.processor, current):
            # Instrumented: the instrumentation's tool span is current and records the call.
            verdict = check(self.processor, current, tool, [arguments])
            annotate(current, verdict)
            # With its content capture off (or only the result hidden), the engine gets the
            # call's own arguments and result, or calls of unknown outcome are never the same
            # and nothing stops; it uses them only where the span lacks them.
            supply = None if verdict.blocked else supplier(self.processor, current, arguments)
            self._remember(ctx, _Pending(verdict, None, supply))
            return verdict
        span = self._tracer.start_span(
            f"execute_tool {tool}", context=self._parent_context(ctx),
            attributes=tool_span_attributes(tool, arguments, self._capture))
        if not span.is_recording():  # no SDK provider: nothing records, nothing is guarded
            warn_once(self._warned, "unrecorded", (
                f"otel-loopguard: the span loopguard opens for {tool!r} is not recorded, so no "
                "call is guarded: its tracer provider is not an SDK TracerProvider (pass "
                "tracer_provider=, the provider the processor is on, or set it globally "
                "first)"))
            return None
        try:
            verdict = check(self.processor, span, tool, [arguments])
            annotate(span, verdict)
        except BaseException:
            span.end()
            raise
        if verdict.blocked or not self._has_output_guardrail(data):
            span.end()
            if not verdict.blocked:
                warn_once(self._warned, "no-output", (
                    "otel-loopguard: the SDK is not instrumented and the loopguard output "
                    "guardrail is not attached to this tool, so tool results are not recorded "
                    "and loops cannot be stopped; use guard_tools() or attach both guardrails"))
            return verdict
        self._remember(ctx, _Pending(verdict, span))
        weakref.finalize(ctx, _end_orphan, span)  # the tool raised through the SDK
        return verdict

    def _on_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        pending = _take(data.context)
        if pending is None:
            return ToolGuardrailFunctionOutput.allow()
        output = data.output
        if pending.span is not None:
            try:
                error = _tool_error(output, data.context)
                record_result(pending.span, output, capture=self._capture, error=error)
                pending.span.end()
            except Exception as exc:
                self.processor.guard.handle("enforce", exc)
        if pending.supply is not None:
            pending.supply(_encode(output))  # never raises: text as it is, else JSON or repr
        finished(self.processor, pending.verdict)  # if its span's end has not already
        suffix = warning(pending.verdict, self.config)
        if suffix is not None and isinstance(output, str):
            return ToolGuardrailFunctionOutput.reject_content(output + suffix,
                                                              output_info=pending.verdict)
        return ToolGuardrailFunctionOutput.allow(output_info=pending.verdict)

    # --- runs -------------------------------------------------------------------------------
    def _parent_context(self, ctx: Any) -> Context | None:
        """Return the parent of loopguard's own tool span: the current span, or the run's."""
        if trace.get_current_span().get_span_context().is_valid:
            return None  # a span the application opened around the run
        usage = getattr(ctx, "usage", None)
        trace_id = getattr(usage, _RUN, None)
        if trace_id is None:
            sdk_trace = getattr(get_current_trace(), "trace_id", "") or ""
            try:
                trace_id = int(sdk_trace.removeprefix("trace_"), 16) if sdk_trace.startswith(
                    "trace_") else random.getrandbits(128)
            except ValueError:
                trace_id = random.getrandbits(128)
            try:
                setattr(usage, _RUN, trace_id)
                weakref.finalize(usage, release_run, self.processor, trace_id)
            except (AttributeError, TypeError):
                warn_once(self._warned, "no-run", (
                    "otel-loopguard: cannot tell the runs of this SDK apart; open a span "
                    "around each agent run so its tool calls form one run"))
        return synthetic_context(trace_id)

    @staticmethod
    def _has_output_guardrail(data: ToolInputGuardrailData) -> bool:
        name = data.context.tool_name
        for tool in getattr(data.agent, "tools", None) or ():
            if isinstance(tool, FunctionTool) and tool.name == name:
                return any(_is_loopguard(g, LoopGuardToolGuardrails._on_output)
                           for g in tool.tool_output_guardrails or ())
        return True  # not found (e.g. MCP): assume attached rather than lose the result

    def _remember(self, ctx: Any, pending: _Pending) -> None:
        try:
            setattr(ctx, _STATE, pending)
        except (AttributeError, TypeError):
            if pending.span is not None:
                pending.span.end()


def _is_loopguard(guardrail: Any, method: Any) -> bool:
    """Return True when ``guardrail`` runs ``method`` of a ``LoopGuardToolGuardrails``."""
    function = getattr(guardrail, "guardrail_function", None)
    return getattr(function, "__func__", None) is method


def _take(ctx: Any) -> _Pending | None:
    pending = getattr(ctx, _STATE, None)
    if pending is not None:
        with suppress(AttributeError):
            delattr(ctx, _STATE)
    return pending if isinstance(pending, _Pending) else None


def _tool_error(output: Any, ctx: Any) -> str | None:
    """Return the error of a tool that raised (the SDK handed the model a message), or None.

    The SDK attaches the error to its function span: ``str(exc)`` when a custom
    ``failure_error_function`` is set, a redacted text otherwise (as instrumentations see it).
    With the SDK's tracing disabled its spans keep nothing: the error a custom
    ``failure_error_function`` was given (``_note_failures``) or the default one's text says it.
    """
    noted = getattr(ctx, _ERROR, None)
    if noted is not None:
        with suppress(AttributeError):
            delattr(ctx, _ERROR)
    error = getattr(get_current_span(), "error", None)
    if isinstance(error, dict):
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else None
        return str(detail or error.get("message") or "error")
    if isinstance(noted, str):
        return noted
    if isinstance(output, str) and output == _SDK_ERROR:
        return output
    return None


def _note_failures(tool: Any) -> None:
    """Make a tool's custom ``failure_error_function`` note the error on the call's context.

    The output guardrail reads the error from the SDK's span, which keeps nothing when the
    SDK's tracing is disabled (``RunConfig(tracing_disabled=True)``,
    ``OPENAI_AGENTS_DISABLE_TRACING``): the failure text then looked like a result, and a 401
    was stopped as a stagnant result at the 5th call instead of at the 2nd. Idempotent; the
    default function needs nothing (its text is known).
    """
    if not _HAVE_FAILURE_HOOK or getattr(tool, "_use_default_failure_error_function", True):
        return
    try:
        function = resolve_function_tool_failure_error_function(tool)
    except Exception:
        return
    if function is None or getattr(function, _WRAPPED, None) is not None:
        return

    def noting(ctx: Any, error: Exception) -> Any:
        with suppress(AttributeError, TypeError):
            setattr(ctx, _ERROR, str(error) or type(error).__name__)
        return function(ctx, error)

    setattr(noting, _WRAPPED, function)
    set_function_tool_failure_error_function(tool, noting)


def _end_orphan(span: Any) -> None:
    """End the span of a call whose output never reached the output guardrail."""
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, "the tool raised; no output"))
        span.end()


def loopguard_tool_guardrail(processor: LoopGuardSpanProcessor,
                             **kwargs: Any) -> ToolInputGuardrail[Any]:
    """Return a tool input guardrail that stops looping calls (``tool_input_guardrails=[...]``).

    Enough on its own when the SDK is instrumented on the processor's provider. Without an
    instrumentation, loopguard also needs its output guardrail to see results: use
    :func:`guard_tools` or :class:`LoopGuardToolGuardrails`. Keyword arguments go to
    :class:`LoopGuardToolGuardrails`.
    """
    return LoopGuardToolGuardrails(processor, **kwargs).input


def guard_tools(tools: Iterable[Any], processor: LoopGuardSpanProcessor,
                **kwargs: Any) -> list[Any]:
    """Attach loopguard's guardrails to every ``FunctionTool`` in ``tools`` and return the list.

    The tools are changed in place. Other tools (hosted tools, handoffs) are returned unchanged:
    the SDK runs no tool guardrails for them. Keyword arguments go to
    :class:`LoopGuardToolGuardrails`.
    """
    guardrails = LoopGuardToolGuardrails(processor, **kwargs)  # requires the SDK
    return [guardrails.attach(t) if isinstance(t, FunctionTool) else t for t in tools]


def tool_loop_error(exc: BaseException) -> ToolLoopError | None:
    """Return the ``ToolLoopError`` behind an exception that ended a run, or None.

    Understands the SDK's ``ToolInputGuardrailTripwireTriggered`` raised by loopguard's
    guardrail (its ``output.output_info`` is the :class:`GuardVerdict`), a ``ToolLoopError``
    itself, and either one as the cause of another exception.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ToolLoopError):
            return current
        if isinstance(current, ToolInputGuardrailTripwireTriggered):
            info = current.output.output_info
            if isinstance(info, GuardVerdict) and info.enforcement == "abort":
                return info.error()
        current = current.__cause__ or current.__context__
    return None


@contextmanager
def raise_tool_loop_errors() -> Iterator[None]:
    """Turn loopguard's tripwire into ``ToolLoopError`` (chained) inside the ``with`` block.

    Works around ``await Runner.run(...)`` and ``Runner.run_sync(...)`` alike; other tripwires
    and errors pass through unchanged.
    """
    try:
        yield
    except ToolInputGuardrailTripwireTriggered as exc:
        error = tool_loop_error(exc)
        if error is None:
            raise
        raise error from exc
