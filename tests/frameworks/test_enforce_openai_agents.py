"""Enforce mode inside the OpenAI Agents SDK: loopguard's tool guardrails, with the real SDK.

Runs where openai-agents is installed (``/work/rec-venvs/agents-*``, or the venvs that
``.ci/frameworks.sh`` builds); skips elsewhere. The agent is driven offline by the SDK's own
fake model, ``agents.testing.ScriptedModel``, scripted to loop: it asks for
``search({"query": "refund policy"})`` again and again, and each call returns the same empty
result.

Most tests run the SDK *uninstrumented*: the guardrails record each call in their own spans.
``test_instrumented_*`` run the same scenarios in a subprocess with each installed
instrumentation (OpenInference, OpenLLMetry, official GenAI) on the provider that holds the
processor, where the instrumentation's spans are used instead; a subprocess because an
instrumentor patches the SDK for the whole process (see ``test_live_frameworks.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

FAMILY = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", "")
if FAMILY.startswith("agents-"):
    importlib.import_module("agents")  # .ci/frameworks.sh: the family's packages must be there
else:
    pytest.importorskip("agents", reason="openai-agents not installed "
                                         "(tests/frameworks/requirements-agents-*.txt)")

from agents import (  # noqa: E402
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailTripwireTriggered,
    function_tool,
)
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from opentelemetry.context import Context  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from prometheus_client import CollectorRegistry  # noqa: E402

from otel_loopguard import Action, LoopGuardConfig, LoopGuardSpanProcessor, ToolLoopError  # noqa: E402
from otel_loopguard.integrations.openai_agents import (  # noqa: E402
    GuardVerdict,
    LoopGuardToolGuardrails,
    guard_tools,
    loopguard_tool_guardrail,
    raise_tool_loop_errors,
    tool_loop_error,
)

LOOP_QUERY = {"query": "refund policy"}
LOOP_RESULT = json.dumps({"results": [], "note": "no results"})
STOP_AT_3 = {"stagnation_warn": 2, "stagnation_replan": 2, "stagnation_stop": 3}
"""The 3rd identical call with the same result is the one too many: 2 calls run."""
WARN_2_REPLAN_3_STOP_4 = {"stagnation_warn": 2, "stagnation_replan": 3, "stagnation_stop": 4}
INSTRUMENTATIONS = {
    "openinference": ("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
    "traceloop": ("opentelemetry.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
    "otel-genai": ("opentelemetry.instrumentation.genai.openai_agents",
                   "OpenAIAgentsInstrumentor"),
}
_GENAI_ENV = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
              "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
_NO_CONTENT_ENV = {"openinference": {"OPENINFERENCE_HIDE_INPUTS": "true",
                                     "OPENINFERENCE_HIDE_OUTPUTS": "true"},
                   "traceloop": {"TRACELOOP_TRACE_CONTENT": "false"},
                   "otel-genai": {}}  # its default: no content unless _GENAI_ENV
"""Each instrumentation with its content capture off (``<name>:no-content``)."""


# ----------------------------------------------------------------------------- harness
class Harness:
    """Loopguard on a provider, and a scripted looping agent whose tool counts its executions."""

    def __init__(self, provider: TracerProvider | None = None, **config: Any) -> None:
        self.registry = CollectorRegistry()
        self.exporter = InMemorySpanExporter()
        self.provider = provider or TracerProvider()
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(**config), downstream=SimpleSpanProcessor(self.exporter),
            registry=self.registry, raise_internal_errors=True)
        if provider is None:
            self.provider.add_span_processor(self.processor)
        self.executions: list[dict[str, Any]] = []
        self.model: ScriptedModel | None = None

    def search_tool(self) -> FunctionTool:
        executions = self.executions

        @function_tool
        def search(query: str) -> str:
            """Search the knowledge base."""
            executions.append({"query": query})
            return LOOP_RESULT

        return search

    def agent(self, calls: Sequence[dict[str, Any]], *, guard: bool = True,
              tools: list[Any] | None = None, tool_name: str = "search") -> Agent[Any]:
        steps: list[Any] = [[function_call(tool_name, args, call_id=f"call_{i}")]
                            for i, args in enumerate(calls, 1)]
        steps.append([assistant_message("Done.")])
        self.model = ScriptedModel(steps)
        tools = tools if tools is not None else [self.search_tool()]
        if guard:
            tools = guard_tools(tools, self.processor, tracer_provider=self.provider)
        return Agent(name="triage", instructions="You are support triage.", tools=tools,
                     model=self.model)

    def run(self, calls: Sequence[dict[str, Any]], **kwargs: Any) -> Any:
        run_config = kwargs.pop("run_config", None)
        agent = self.agent(calls, **kwargs)
        return asyncio.run(Runner.run(agent, "I want a refund", max_turns=30,
                                      run_config=run_config))

    def tool_outputs(self) -> list[Any]:
        """What the model received as tool results, in its last call."""
        assert self.model is not None and self.model.last_call is not None
        return [item["output"] for item in self.model.last_call.input
                if isinstance(item, dict) and item.get("type") == "function_call_output"]

    def sample(self, name: str, **labels: str) -> float:
        self.processor.force_flush()  # detection runs on the processor's worker thread
        return self.registry.get_sample_value(name, labels) or 0.0

    def finished_spans(self) -> list[ReadableSpan]:
        """The exported spans, once the processor has checked and passed on every one."""
        self.processor.force_flush()
        return list(self.exporter.get_finished_spans())

    def enforced(self, enforcement: str) -> float:
        return self.sample("loopguard_enforced_total", prompt_template="unknown",
                           enforcement=enforcement)

    def tool_spans(self) -> list[ReadableSpan]:
        return sorted((s for s in self.finished_spans()
                       if (s.attributes or {}).get("gen_ai.tool.name") == "search"),
                      key=lambda s: s.start_time or 0)


@pytest.fixture
def make(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("OPENAI_API_KEY", "")  # the SDK's own trace exporter stays idle
    made: list[Harness] = []

    def factory(**config: Any) -> Harness:
        made.append(Harness(**config))
        return made[-1]

    yield factory
    for harness in made:
        harness.provider.shutdown()


def _verdicts(result: Any) -> list[GuardVerdict]:
    return [r.output.output_info for r in result.tool_input_guardrail_results
            if isinstance(r.output.output_info, GuardVerdict)]


# ----------------------------------------------------------------------------- hint
@pytest.mark.parametrize(("config", "runs"), [(STOP_AT_3, 2), ({}, 4)],
                         ids=["stagnation_stop=3", "defaults"])
def test_looping_model_stops_executing_the_tool_after_the_configured_calls(
        make: Any, config: dict[str, Any], runs: int) -> None:
    h = make(mode="enforce", enforcement="hint", **config)
    result = h.run([LOOP_QUERY] * 7)
    assert len(h.executions) == runs
    assert result.final_output == "Done."
    outputs = h.tool_outputs()
    assert len(outputs) == 7
    assert outputs[:runs] == [LOOP_RESULT] * runs
    assert all(o.startswith("[loop-detected] ") for o in outputs[runs:])


def test_hint_mode_gives_the_model_the_hint_as_the_tool_result(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    result = h.run([LOOP_QUERY] * 4)
    outputs = h.tool_outputs()
    hint = outputs[2]
    assert hint.startswith('[loop-detected] You have called "search" with the same arguments 3')
    assert "Do not call it again" in hint
    # The run's items agree with what the model received.
    items = [i.output for i in result.new_items if type(i).__name__ == "ToolCallOutputItem"]
    assert items == outputs
    verdicts = _verdicts(result)
    assert [v.enforcement for v in verdicts] == [None, None, "hint", "hint"]
    assert verdicts[2].decision.action is Action.STOP
    assert hint == f"[loop-detected] {verdicts[2].decision.hint}"
    assert [r.output.behavior["type"] for r in result.tool_input_guardrail_results] == [
        "allow", "allow", "reject_content", "reject_content"]


def test_hint_then_abort(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint_then_abort", **STOP_AT_3)
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as info:
        h.run([LOOP_QUERY] * 5)
    assert len(h.executions) == 2
    assert h.tool_outputs()[2].startswith("[loop-detected] ")  # the first stop: a hint
    assert tool_loop_error(info.value) is not None  # the second: abort
    assert h.enforced("hint") == 1 and h.enforced("abort") == 1


def test_hint_on_warn_appends_the_hint_to_the_real_result(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", hint_on_warn=True)  # warn 3, replan 4, stop 5
    h.run([LOOP_QUERY] * 4)
    assert len(h.executions) == 4
    outputs = h.tool_outputs()
    assert outputs[:2] == [LOOP_RESULT] * 2
    for output in outputs[2:]:
        real, _, warning = output.partition("\n\n[loop-warning] ")
        assert real == LOOP_RESULT
        assert warning.startswith('You have called "search"')


# ----------------------------------------------------------------------------- abort
def test_abort_mode_ends_the_run_with_the_tripwire_carrying_the_decision(make: Any) -> None:
    h = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as info:
        h.run([LOOP_QUERY] * 5)
    assert len(h.executions) == 2
    verdict = info.value.output.output_info
    assert isinstance(verdict, GuardVerdict)
    assert verdict.enforcement == "abort" and verdict.mode == "enforce"
    assert verdict.decision.action is Action.STOP
    assert verdict.decision.code == "STAGNANT_RESULT"
    error = tool_loop_error(info.value)
    assert isinstance(error, ToolLoopError)
    assert error.tool_name == "search" and error.repeats == 3
    assert str(error) == ('Tool "search" was called 3 times with identical arguments'
                          " - aborting to prevent a loop")
    assert error.decision == verdict.decision
    assert h.model is not None and len(h.model.calls) == 3  # the run stopped at that turn


def test_raise_tool_loop_errors_turns_the_tripwire_into_tool_loop_error(make: Any) -> None:
    h = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    with pytest.raises(ToolLoopError) as info, raise_tool_loop_errors():
        h.run([LOOP_QUERY] * 5)
    assert isinstance(info.value.__cause__, ToolInputGuardrailTripwireTriggered)
    assert info.value.repeats == 3
    assert tool_loop_error(ValueError("unrelated")) is None


@pytest.mark.parametrize("tracing_disabled", [False, True], ids=["sdk-tracing", "no-sdk-tracing"])
def test_a_tool_failing_the_same_way_is_blocked_at_the_second_call(
        make: Any, tracing_disabled: bool) -> None:
    # With the SDK's tracing disabled its span keeps no error, and the failure text used to be
    # recorded as the call's result: the 401 ran 4 times, stopped as a stagnant result.
    h = make(mode="enforce", enforcement="abort")
    attempts: list[int] = []

    @function_tool(failure_error_function=lambda ctx, exc: f"{type(exc).__name__}: {exc}")
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        attempts.append(account_id)
        raise PermissionError("401 unauthorized")

    with pytest.raises(ToolInputGuardrailTripwireTriggered) as info:
        h.run([{"account_id": 42}] * 5, tools=[fetch_account], tool_name="fetch_account",
              run_config=RunConfig(tracing_disabled=tracing_disabled))
    assert attempts == [42]
    error = tool_loop_error(info.value)
    assert error is not None and error.decision.code == "PERMANENT_FAILURE"
    failed = next(s for s in h.finished_spans()
              if (s.attributes or {}).get("gen_ai.tool.name") == "fetch_account")
    assert "401" in (failed.status.description or "")


# ----------------------------------------------------------------------------- observe
def test_observe_mode_changes_nothing_and_reports_what_enforce_would_do(make: Any) -> None:
    calls = [LOOP_QUERY] * 6
    bare = make(mode="observe")
    baseline = bare.run(calls, guard=False)

    observe = make(mode="observe", enforcement="abort")
    result = observe.run(calls)
    assert observe.executions == bare.executions and len(bare.executions) == 6
    assert observe.tool_outputs() == bare.tool_outputs() == [LOOP_RESULT] * 6
    assert result.final_output == baseline.final_output == "Done."

    verdicts = _verdicts(result)
    assert [v.decision.action.label for v in verdicts] == [
        "continue", "continue", "warn", "replan", "stop", "stop"]
    assert {v.mode for v in verdicts} == {"observe"}
    assert [v.would_block for v in verdicts] == [False] * 4 + [True] * 2
    assert not any(v.blocked for v in verdicts)
    spans = observe.tool_spans()
    assert [s.attributes.get("loopguard.would_block") for s in spans] == [None] * 4 + [True] * 2
    assert not any("loopguard.blocked" in s.attributes for s in spans)
    assert observe.sample("loopguard_loop_detected_total", prompt_template="unknown",
                          detector="stagnation", action="stop", mode="observe") == 2
    assert observe.enforced("abort") == observe.enforced("hint") == 0

    # Enforce mode takes the same decisions, up to the call it blocks.
    enforce = make(mode="enforce", enforcement="hint")
    enforced = enforce.run(calls)
    assert [v.decision.action for v in _verdicts(enforced)][:5] == [
        v.decision.action for v in verdicts][:5]


# ----------------------------------------------------------------------------- metrics, spans
def test_enforcements_are_counted_and_the_blocked_span_says_why(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    h.run([LOOP_QUERY] * 5)
    assert h.enforced("hint") == 3
    assert h.sample("loopguard_tool_calls_total", prompt_template="unknown",
                    tool="search") == 2  # blocked calls are not counted as calls
    spans = h.tool_spans()
    assert len(spans) == 5
    ran, blocked = spans[:2], spans[2:]
    assert all("gen_ai.tool.call.result" in s.attributes for s in ran)
    for span in blocked:
        attrs = span.attributes
        assert attrs["loopguard.blocked"] is True
        assert attrs["loopguard.enforcement"] == "hint"
        assert attrs["loopguard.precheck.code"] == "STAGNANT_RESULT"
        assert attrs["loopguard.precheck.action"] == "stop"
        assert "same arguments 3 times" in attrs["loopguard.hint"]
        assert "gen_ai.tool.call.result" not in attrs
    assert len({s.context.trace_id for s in spans}) == 1  # one run, one trace

    abort = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        abort.run([LOOP_QUERY] * 5)
    last = abort.tool_spans()[-1]
    assert last.attributes["loopguard.enforcement"] == "abort"
    assert last.status.status_code.name == "ERROR"
    assert abort.enforced("abort") == 1


# ----------------------------------------------------------------------------- runs
def test_each_run_is_guarded_on_its_own(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    h.run([LOOP_QUERY] * 2)
    h.run([LOOP_QUERY] * 2)  # another SDK trace: another run
    assert len(h.executions) == 4
    assert h.enforced("hint") == 0
    assert len({s.context.trace_id for s in h.tool_spans()}) == 2


def test_concurrent_runs_do_not_share_state(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    agents = [h.agent([LOOP_QUERY] * 3) for _ in range(2)]

    async def both() -> list[Any]:
        return list(await asyncio.gather(*(Runner.run(a, "I want a refund") for a in agents)))

    results = asyncio.run(both())
    assert len(h.executions) == 4  # 2 per run
    for result in results:
        assert [v.enforcement for v in _verdicts(result)] == [None, None, "hint"]


def test_runs_are_told_apart_with_sdk_tracing_disabled(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    off = RunConfig(tracing_disabled=True)
    h.run([LOOP_QUERY] * 3, run_config=off)
    h.run([LOOP_QUERY] * 3, run_config=off)
    assert len(h.executions) == 4
    assert h.enforced("hint") == 2


def test_a_span_around_the_run_is_the_run(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    tracer = h.provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent triage") as run_span:
        h.run([LOOP_QUERY] * 2)
        h.run([LOOP_QUERY] * 2)  # same span, same run: its calls are the 3rd and 4th
    assert len(h.executions) == 2
    assert h.enforced("hint") == 2
    assert {s.context.trace_id for s in h.tool_spans()} == {run_span.get_span_context().trace_id}


def test_input_guardrail_alone_warns_when_it_cannot_see_results(
        make: Any, caplog: pytest.LogCaptureFixture) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    search = h.search_tool()
    search.tool_input_guardrails = [loopguard_tool_guardrail(h.processor,
                                                             tracer_provider=h.provider)]
    h.run([LOOP_QUERY] * 3, tools=[search], guard=False)
    assert len(h.executions) == 3  # results are not recorded: repetition alone never stops
    assert "output guardrail is not attached" in caplog.text


def test_a_provider_that_records_nothing_guards_nothing_and_says_so_once(
        make: Any, caplog: pytest.LogCaptureFixture) -> None:
    """guard_tools on a provider that is not an SDK TracerProvider (none set globally): every
    call runs, one warning names the fix, and no internal error is raised."""
    from opentelemetry.trace import NoOpTracerProvider

    h = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    tools = guard_tools([h.search_tool()], h.processor, tracer_provider=NoOpTracerProvider())
    result = h.run([LOOP_QUERY] * 5, tools=tools, guard=False)
    assert result.final_output == "Done."
    assert len(h.executions) == 5
    warnings = [r.getMessage() for r in caplog.records if "is not recorded" in r.getMessage()]
    assert len(warnings) == 1 and "tracer_provider=" in warnings[0]


def test_guardrails_attach_once_and_keep_the_tools_own(make: Any) -> None:
    h = make(mode="enforce")
    search = h.search_tool()
    guardrails = LoopGuardToolGuardrails(h.processor)
    assert guardrails.attach(guardrails.attach(search)) is search
    assert search.tool_input_guardrails == [guardrails.input]
    assert search.tool_output_guardrails == [guardrails.output]


def test_guarding_a_tool_again_replaces_its_loopguard_guardrails(make: Any) -> None:
    # An agent built per request guards the module's tools again each time: the guardrails
    # used to stack, so each call was checked and recorded once per guard_tools (duplicate
    # spans and counts) and the loop was stopped ever earlier (after 1 call by the 3rd agent).
    h = make(mode="enforce", enforcement="hint")
    search = h.search_tool()
    own = ToolInputGuardrail(guardrail_function=lambda data: ToolGuardrailFunctionOutput.allow(),
                             name="own")
    search.tool_input_guardrails = [own]
    for _ in range(3):
        h.executions.clear()
        agent = h.agent([LOOP_QUERY] * 7, tools=[search])
        asyncio.run(Runner.run(agent, "I want a refund", max_turns=30))
        assert len(h.executions) == 4
        assert search.tool_input_guardrails[0] is own
        assert len(search.tool_input_guardrails) == 2
        assert len(search.tool_output_guardrails) == 1
    assert h.sample("loopguard_tool_calls_total", prompt_template="unknown", tool="search") == 12
    assert h.enforced("hint") == 9
    assert len(h.tool_spans()) == 21


# ----------------------------------------------------------------------------- instrumented
class _Slot(SpanProcessor):
    """Forwards to the processor of the current scenario (one instrumented provider)."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.target is not None:
            self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)


def _scenarios(instrumentation: str) -> dict[str, Any]:
    """Run hint, abort and observe under ``instrumentation``; return what was seen (JSON).

    ``<name>:no-content``: with its content capture off.
    """
    instrumentation, _, variant = instrumentation.partition(":")
    module, name = INSTRUMENTATIONS[instrumentation]
    if variant == "no-content":
        os.environ.update(_NO_CONTENT_ENV[instrumentation])
    elif instrumentation == "otel-genai":
        os.environ.update(_GENAI_ENV)
    slot = _Slot()
    provider = TracerProvider()
    provider.add_span_processor(slot)
    getattr(importlib.import_module(module), name)().instrument(tracer_provider=provider)
    out: dict[str, Any] = {}
    for scenario, config in (("hint", {"mode": "enforce", "enforcement": "hint", **STOP_AT_3}),
                             ("abort", {"mode": "enforce", "enforcement": "abort", **STOP_AT_3}),
                             ("observe", {"mode": "observe", **STOP_AT_3}),
                             ("warn", {"mode": "enforce", "enforcement": "hint",
                                       "hint_on_warn": True, **WARN_2_REPLAN_3_STOP_4})):
        h = Harness(provider, **config)
        slot.target = h.processor
        seen: dict[str, Any] = {}
        try:
            result = h.run([LOOP_QUERY] * (5 if scenario == "warn" else 4))
            seen["verdicts"] = [v.decision.action.label for v in _verdicts(result)]
        except ToolInputGuardrailTripwireTriggered as exc:
            seen["error"] = str(tool_loop_error(exc))
        spans = list(h.finished_spans())
        tools = [s for s in spans if (s.attributes or {}).get("gen_ai.tool.name") == "search"
                 or (s.attributes or {}).get("tool.name") == "search"
                 or ((s.attributes or {}).get("openinference.span.kind") == "TOOL"
                     and s.name == "search")]
        seen.update(
            executions=len(h.executions), outputs=h.tool_outputs(),
            scopes=sorted({s.instrumentation_scope.name for s in tools
                           if s.instrumentation_scope is not None}),
            blocked=sum(1 for s in tools if (s.attributes or {}).get("loopguard.blocked")),
            would_block=sum(1 for s in tools if (s.attributes or {}).get("loopguard.would_block")),
            tool_calls=h.sample("loopguard_tool_calls_total", prompt_template="unknown",
                                tool="search"),
            enforced=h.enforced("hint") + h.enforced("abort"),
            observe_stops=h.sample("loopguard_loop_detected_total", prompt_template="unknown",
                                   detector="stagnation", action="stop", mode="observe"))
        out[scenario] = seen
        slot.target = None
    return out


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.fixture(scope="module", params=sorted(INSTRUMENTATIONS))
def instrumented(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _instrumented(request.param)


@pytest.fixture(scope="module", params=sorted(INSTRUMENTATIONS))
def instrumented_without_content(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _instrumented(request.param, ":no-content")


def _instrumented(instrumentation: str, variant: str = "") -> dict[str, Any]:
    module = INSTRUMENTATIONS[instrumentation][0]
    if not _installed(module):
        if f"agents-{instrumentation}" == FAMILY:
            pytest.fail(f"{module} is missing in the {FAMILY} venv")
        pytest.skip(f"{module} not installed")
    proc = subprocess.run([sys.executable, str(Path(__file__)), instrumentation + variant],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "OPENAI_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_instrumented_hint_uses_the_instrumentation_spans(instrumented: dict[str, Any]) -> None:
    hint = instrumented["hint"]
    assert hint["executions"] == 2
    assert hint["outputs"][:2] == [LOOP_RESULT] * 2
    assert all(o.startswith("[loop-detected] ") for o in hint["outputs"][2:])
    assert hint["verdicts"] == ["continue", "replan", "stop", "stop"]
    assert "otel_loopguard.enforce" not in hint["scopes"]  # no span of loopguard's own
    assert hint["blocked"] == 2  # the instrumentation's tool spans are marked
    assert hint["tool_calls"] == 2  # every executed call counted once
    assert hint["enforced"] == 2


def test_instrumented_abort(instrumented: dict[str, Any]) -> None:
    abort = instrumented["abort"]
    assert abort["executions"] == 2
    assert abort["error"].startswith('Tool "search" was called 3 times')
    assert abort["blocked"] == 1 and abort["enforced"] == 1


def test_instrumented_observe_changes_nothing(instrumented: dict[str, Any]) -> None:
    observe = instrumented["observe"]
    assert observe["executions"] == 4
    assert observe["outputs"] == [LOOP_RESULT] * 4
    assert observe["verdicts"] == ["continue", "replan", "stop", "stop"]
    assert observe["blocked"] == 0 and observe["enforced"] == 0
    assert observe["would_block"] == 2
    assert observe["observe_stops"] == 2
    assert observe["tool_calls"] == 4


def test_instrumented_hint_on_warn_still_stops_the_loop(instrumented: dict[str, Any]) -> None:
    # The output guardrail appends the warning after the tool returned, so the
    # instrumentation's tool span records the result with it; each warning names the call's
    # count, so every warned call used to look like a new result and the loop was never
    # stopped (5 of 5 calls ran).
    warn = instrumented["warn"]
    assert warn["executions"] == 3
    outputs = warn["outputs"]
    assert outputs[0] == LOOP_RESULT
    assert [o.partition("\n\n[loop-warning] ")[0] for o in outputs[1:3]] == [LOOP_RESULT] * 2
    assert all(o.startswith("[loop-detected] ") for o in outputs[3:])
    assert warn["verdicts"] == ["continue", "warn", "replan", "stop", "stop"]
    assert warn["tool_calls"] == 3 and warn["enforced"] == 2


def test_instrumented_without_content_still_stops_the_loop(
        instrumented_without_content: dict[str, Any]) -> None:
    """With the instrumentation's content capture off, its tool spans carry no arguments and
    no results, so the calls could never be told the same and nothing was stopped (the tool
    ran every time); the guardrails hand the engine the call's own arguments and result."""
    hint = instrumented_without_content["hint"]
    assert hint["executions"] == 2
    assert hint["outputs"][:2] == [LOOP_RESULT] * 2
    assert all(o.startswith("[loop-detected] ") for o in hint["outputs"][2:])
    assert hint["blocked"] == 2 and hint["tool_calls"] == 2


if __name__ == "__main__":  # the subprocess of the ``instrumented`` fixture
    print(json.dumps(_scenarios(sys.argv[1])))
