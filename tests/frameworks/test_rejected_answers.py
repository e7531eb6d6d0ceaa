"""A harness rejecting the model's answer again and again, live, under real instrumentations.

The ``idle_turns`` detector's loop: model turns that call no tool, each answer refused the same
way. Three harnesses, each with its scripted model (no LLM, no network):

- smolagents ``CodeAgent`` (family ``openinference``): the model answers in prose, without the
  code block the agent parses, in other words each time; smolagents replies "Error in code
  parsing ... Here is your code snippet: <the answer>". The model is smolagents'
  ``OpenAIServerModel`` with a scripted client: OpenInference writes model spans only for the
  model classes smolagents exports.
- pydantic-ai (family ``pydantic-ai``): an output validator raising ``ModelRetry`` on each answer
  in prose; and an output type whose tool the model calls with the same invalid arguments.
- LangChain ``create_agent`` with ``ToolStrategy`` (families ``langchain-*``): the model calls
  the structured-output tool with the same invalid arguments, and LangChain answers "Error:
  Failed to parse structured output ... Please fix your mistakes." Run in a subprocess per
  instrumentation, as in ``test_enforce_langchain.py``: an instrumentor patches LangChain for the
  whole process, and OpenLLMetry's does not survive an uninstrument/instrument cycle.

Each looping run warns ``IDLE_TURNS`` on its 4th model span and each one after it in the
streak, live (``LoopGuardSpanProcessor`` on the real provider) and in ``check`` on the exported
spans; a healthy control (one rejection, then a valid answer) is quiet.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.replay import Checker
from otel_loopguard.replay.tracefile import iter_spans

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "recordings"))
from record import to_otlp_json_lines
from scripted_agents import FORWARD

FAMILY = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", "")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ImportWarning")]

PROSE = [
    "I think the refund policy allows returns within thirty days of purchase.",
    "Customers may return items within 30 days; refunds go to the original payment method.",
    "Based on my knowledge, a refund is possible if the item is unused and returned in a month.",
    "The answer is that refunds are granted for purchases returned within a thirty day window.",
    "Refunds: yes, within thirty days, provided you still have the receipt for the order.",
    "You can get your money back if you send the product back within the first month.",
]
"""Six answers in prose, each worded differently: every one is rejected."""
WARNED = [None, None, None, 4, 5, 6]
"""``loopguard.count`` on six model spans answering in text, each rejected: warn from the 4th."""
CALLS_WARNED = [None, None, None, None, 4, 5, 6]
"""The same on seven model spans asking for a call, six rejected, the 7th accepted: a turn
that asked for a call is idle once the next turn shows the call never ran, so each warning is
on the span after the idle turn."""


def _needs(family: str, *modules: str) -> None:
    """Import ``modules``, skipping when absent unless ``family`` is the one being run."""
    for module in modules:
        if family == FAMILY:
            importlib.import_module(module)  # .ci/frameworks.sh: must be there
        else:
            pytest.importorskip(module, reason=f"{family} not installed "
                                               f"(tests/frameworks/requirements-{family}.txt)")


_INSTRUMENTED: set[str] = set()


def _provider_for(name: str, instrument: Callable[[TracerProvider], None]) -> None:
    """Instrument ``name`` once per module, on a provider that forwards to ``FORWARD``.

    ``FORWARD`` is the forwarder ``test_live_agent_frameworks.py`` puts on its providers too:
    whichever module instruments a framework first (a second ``instrument()`` of an
    OpenInference instrumentor does nothing), its spans reach the running test.
    """
    if name not in _INSTRUMENTED:
        provider = TracerProvider()
        provider.add_span_processor(FORWARD)
        instrument(provider)
        _INSTRUMENTED.add(name)


def _live(run: Callable[[], None], tmp_path: Path) -> dict[str, Any]:
    """Run ``run`` under a LoopGuardSpanProcessor; return what it marked and what check says."""
    exporter, registry = InMemorySpanExporter(), CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=registry, raise_internal_errors=True)
    FORWARD.targets = (processor,)
    try:
        run()
    finally:
        FORWARD.targets = ()
    processor.force_flush()
    assert processor.guard.errors == 0
    assert registry.get_sample_value("loopguard_internal_errors_total") in (None, 0.0)
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    processor.shutdown()
    return _seen(spans, tmp_path)


def _is_model_span(attributes: dict[str, Any]) -> bool:
    return attributes.get("openinference.span.kind") == "LLM" \
        or attributes.get("gen_ai.operation.name") == "chat"


def _seen(spans: list[ReadableSpan], tmp_path: Path) -> dict[str, Any]:
    """The model spans' ``loopguard.count`` (None when unmarked), other marked spans, and the
    codes ``check`` finds in the exported spans."""
    models = [dict(s.attributes or {}) for s in spans if _is_model_span(dict(s.attributes or {}))]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(spans)), encoding="utf-8")
    reports = Checker(LoopGuardConfig()).run(iter_spans(str(path), strict=True))
    return {
        "models": [a.get("loopguard.count") if a.get("loopguard.detector") == "idle_turns"
                   else None for a in models],
        "actions": sorted({a["loopguard.action"] for a in models if "loopguard.action" in a}),
        "others": sorted(s.name for s in spans if not _is_model_span(dict(s.attributes or {}))
                         and any(k.startswith("loopguard.") for k in s.attributes or {})),
        "check": [[d.code, d.action.label] for r in reports for d in r.findings],
    }


INVALID = {"days": "about thirty"}
"""A structured answer that fails validation (``days`` is an integer)."""
LOOPED = {"actions": ["warn"], "others": [], "check": [["IDLE_TURNS", "warn"]] * 3}
"""The rest of what ``_seen`` sees of a loop: ``check`` finds the three warnings too."""
QUIET = {"actions": [], "others": [], "check": []}


# ----------------------------------------------------------------------------- smolagents


def _smolagents(answers: list[str]) -> Callable[[], None]:
    _needs("openinference", "smolagents", "openinference.instrumentation.smolagents")
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import CodeAgent, OpenAIServerModel

    _provider_for("smolagents",
                  lambda provider: SmolagentsInstrumentor().instrument(tracer_provider=provider))
    steps = list(answers)

    class Completions:
        def create(self, **kwargs: Any) -> Any:
            content = steps.pop(0) if steps else "I cannot answer in code."  # at the limit
            message = SimpleNamespace(role="assistant", content=content, tool_calls=None)
            return SimpleNamespace(choices=[SimpleNamespace(message=message,
                                                            finish_reason="stop")],
                                   usage=SimpleNamespace(prompt_tokens=10, completion_tokens=5))

    class ScriptedServerModel(OpenAIServerModel):  # type: ignore[misc]
        """smolagents' OpenAI model on a scripted client (no network)."""

        def create_client(self) -> Any:
            return SimpleNamespace(chat=SimpleNamespace(completions=Completions()))

    def run() -> None:
        agent = CodeAgent(tools=[], model=ScriptedServerModel(model_id="scripted"),
                          max_steps=len(PROSE), verbosity_level=0)
        agent.run("What is the refund policy?")

    return run


def test_smolagents_code_agent_answering_in_prose_warns(tmp_path: Path) -> None:
    """Six answers without a code block, each quoted back in smolagents' parsing error: the
    feedback repeats once the quote is out, and the 4th turn warns; then the last turn (asked
    for a final answer at the step limit) has new input."""
    seen = _live(_smolagents(PROSE), tmp_path)
    assert seen == {"models": [*WARNED, None], **LOOPED}


def test_smolagents_code_agent_rejected_once_is_quiet(tmp_path: Path) -> None:
    """One answer in prose, then code calling final_answer: no finding."""
    seen = _live(_smolagents([PROSE[0], "Thought: answer.\n<code>\nfinal_answer('30 days')\n"
                                        "</code>"]), tmp_path)
    assert seen == {"models": [None, None], **QUIET}


# ----------------------------------------------------------------------------- pydantic-ai


def _pydantic_ai(answers: list[Any], *, structured: bool) -> Callable[[], None]:
    """A pydantic-ai agent rejecting answers: text by an output validator raising
    ``ModelRetry``, or (``structured``) calls of its output tool failing validation."""
    _needs("pydantic-ai", "pydantic_ai")
    from pydantic import BaseModel
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    _provider_for("pydantic-ai", lambda provider: Agent.instrument_all(
        InstrumentationSettings(tracer_provider=provider)))
    steps = list(answers)

    class Refund(BaseModel):
        days: int

    def model(messages: Any, info: AgentInfo) -> ModelResponse:
        answer = steps.pop(0)
        if structured:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, answer,
                                                     tool_call_id=f"call_{len(steps)}")])
        return ModelResponse(parts=[TextPart(answer)])

    agent: Any = Agent(FunctionModel(model), name="triage", retries=len(answers) - 1,
                       output_type=Refund if structured else str)

    @agent.output_validator
    def starts_with_refund(output: Any) -> Any:
        if not structured and not output.startswith("REFUND:"):
            raise ModelRetry("Your answer must start with 'REFUND:'. Please fix it.")
        return output

    def run() -> None:
        with contextlib.suppress(UnexpectedModelBehavior):  # retries exhausted: the loop ran
            agent.run_sync("What is the refund policy?")

    return run


def test_pydantic_ai_output_validator_rejecting_each_answer_warns(tmp_path: Path) -> None:
    """pydantic-ai sends ``ModelRetry``'s message as a user message after the answer (no
    quote): the same feedback each time, and the 4th turn warns."""
    assert _live(_pydantic_ai(PROSE, structured=False), tmp_path) == {"models": WARNED, **LOOPED}


def test_pydantic_ai_output_validator_rejecting_once_is_quiet(tmp_path: Path) -> None:
    seen = _live(_pydantic_ai([PROSE[0], "REFUND: within 30 days"], structured=False), tmp_path)
    assert seen == {"models": [None, None], **QUIET}


def test_pydantic_ai_invalid_structured_output_again_warns(tmp_path: Path) -> None:
    """The output tool called six times with the same invalid arguments, each call with a new
    id, then valid ones: the same rejection (a ``tool_call_response`` naming that id) each
    time."""
    seen = _live(_pydantic_ai([INVALID] * 6 + [{"days": 30}], structured=True), tmp_path)
    assert seen == {"models": CALLS_WARNED, **LOOPED}


def test_pydantic_ai_structured_output_fixed_after_one_rejection_is_quiet(
        tmp_path: Path) -> None:
    seen = _live(_pydantic_ai([INVALID, {"days": 30}], structured=True), tmp_path)
    assert seen == {"models": [None, None], **QUIET}


# ----------------------------------------------------------------------------- LangChain

INSTRUMENTATIONS = {
    "openinference": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "traceloop": ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor"),
    "otel-genai": ("opentelemetry.instrumentation.genai.langchain", "LangChainInstrumentor"),
}
_GENAI_ENV = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
              "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


def _langchain_scenarios(instrumentation: str, tmp_path: Path) -> dict[str, Any]:
    """In the subprocess: run both LangChain scenarios under ``instrumentation``."""
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from pydantic import BaseModel

    module, name = INSTRUMENTATIONS[instrumentation]
    if instrumentation == "otel-genai":
        os.environ.update(_GENAI_ENV)
    _provider_for("langchain", lambda provider: getattr(importlib.import_module(module), name)()
                  .instrument(tracer_provider=provider))

    class NamedChat(FakeMessagesListChatModel):
        """A scripted chat model with a name: the official GenAI instrumentation writes no
        model span for a model it cannot name."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> NamedChat:
            return self

        def _get_invocation_params(self, stop: list[str] | None = None,
                                   **kwargs: Any) -> dict[str, Any]:
            return {**super()._get_invocation_params(stop=stop, **kwargs),
                    "model_name": "scripted-1"}

    class Refund(BaseModel):
        """The refund policy."""

        days: int

    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return "no results"

    def agent_run(answers: list[dict[str, Any]]) -> Callable[[], None]:
        responses = [AIMessage(content="", tool_calls=[{"name": "Refund", "args": args,
                                                        "id": f"call_{n}"}])
                     for n, args in enumerate(answers)]
        agent = create_agent(NamedChat(responses=responses), tools=[search],
                             response_format=ToolStrategy(Refund), name="triage")
        return lambda: agent.invoke({"messages": [{"role": "user",
                                                   "content": "What is the refund policy?"}]})

    return {"looping": _live(agent_run([INVALID] * 6 + [{"days": 30}]), tmp_path),
            "healthy": _live(agent_run([INVALID, {"days": 30}]), tmp_path)}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.fixture(scope="module", params=sorted(INSTRUMENTATIONS))
def langchain_seen(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    module = INSTRUMENTATIONS[request.param][0]
    if not _installed("langchain.agents") or not _installed(module):
        if f"langchain-{request.param}" == FAMILY:
            pytest.fail(f"{module} is missing in the {FAMILY} venv")
        pytest.skip(f"{module} not installed (tests/frameworks/requirements-langchain-*.txt)")
    proc = subprocess.run([sys.executable, str(Path(__file__)), request.param,
                           str(tmp_path_factory.mktemp("langchain"))],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_langchain_invalid_structured_output_again_warns(langchain_seen: dict[str, Any]) -> None:
    """``ToolStrategy``'s tool called six times with the same invalid arguments, then valid
    ones: each rejection (a tool message, no tool span) is the same, and the 4th rejected turn
    warns, on the 5th model span (``CALLS_WARNED``)."""
    assert langchain_seen["looping"] == {"models": CALLS_WARNED, **LOOPED}


def test_langchain_structured_output_fixed_after_one_rejection_is_quiet(
        langchain_seen: dict[str, Any]) -> None:
    assert langchain_seen["healthy"] == {"models": [None, None], **QUIET}


if __name__ == "__main__":  # the subprocess of ``langchain_seen``
    print(json.dumps(_langchain_scenarios(sys.argv[1], Path(sys.argv[2]))))
