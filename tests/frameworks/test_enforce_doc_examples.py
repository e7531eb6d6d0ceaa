"""docs/enforce.md's OpenAI Agents SDK, LangChain and LangGraph examples, run as written, offline.

The three blocks name a real model (``"gpt-4.1-mini"``) and export over OTLP, so
``tests/test_doc_examples.py`` cannot run them. Here each block is read from the page (no copy
of its code) and executed in this process, with two things swapped at the narrowest point:

* the model: the name the block gives resolves to a scripted model that loops, asking for
  ``search(query="refund policy")`` again and again (the Agents SDK's
  ``agents.testing.ScriptedModel``, through ``MultiProvider.get_model``; LangChain's
  ``FakeMessagesListChatModel``, through the ``init_chat_model`` that ``create_agent`` calls
  for a model given by name);
* ``OTLPSpanExporter``: an ``InMemorySpanExporter``, so the spans the block exports are read.

The global tracer provider is reset for each test, so the block's ``set_tracer_provider`` takes
effect (loopguard's guards read it) and the previous one is back afterwards.

Skips where the framework is not installed; under ``.ci/frameworks.sh`` (with
``LOOPGUARD_FRAMEWORK_FAMILY``) a framework of the family that is missing is an error.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

sys.path.insert(0, str(Path(__file__).parent))  # _langchain_chat, imported where LangChain is
PAGE = Path(__file__).resolve().parents[2] / "docs" / "enforce.md"
FAMILY = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", "")
MODEL = "gpt-4.1-mini"
"""The model the blocks name."""
LOOP_ARGS = {"query": "refund policy"}
ASKED = 8
"""Identical calls the scripted model asks for before it answers."""
RUNS = 4
"""Calls that run, with the default config, before the guard stops the loop (the 5th)."""
RESULT = "no results"
"""What the blocks' ``search`` returns."""
RUN_HERE = ("agents", "langchain", "langgraph")
"""The ``requires=`` of the page's blocks this module runs."""
SKIP = "skip=tests/frameworks/test_enforce_doc_examples.py-runs-it"
"""Their marker's word that keeps ``tests/test_doc_examples.py`` from running them."""
_BLOCK = re.compile(r"(?:<!--\s*example:(?P<words>[^>]*?)-->\n)?```python\n(?P<code>.*?)^```$",
                    re.DOTALL | re.MULTILINE)


def _require(module: str, family_prefix: str) -> None:
    """Skip unless ``module`` imports; in a family of the framework it must import."""
    if FAMILY.startswith(family_prefix):
        importlib.import_module(module)  # .ci/frameworks.sh: the family's packages must be there
    else:
        pytest.importorskip(module, reason=f"{module} not installed "
                                           f"(tests/frameworks/requirements-{family_prefix}*.txt)")


def _blocks() -> list[tuple[dict[str, str], str]]:
    """docs/enforce.md's Python blocks: the words of their ``<!-- example: -->`` marker, code."""
    page = PAGE.read_text(encoding="utf-8")
    return [(dict(w.partition("=")[::2] for w in (m["words"] or "").split()), m["code"])
            for m in _BLOCK.finditer(page)]


def _example(requires: str) -> str:
    """docs/enforce.md's Python block marked ``requires=<requires>``, as written; with the
    page's Python block before it first when it is marked ``continues``."""
    blocks = _blocks()
    found = [i for i, (words, _) in enumerate(blocks) if words.get("requires") == requires]
    assert len(found) == 1, f"docs/enforce.md: {len(found)} Python blocks requires={requires}"
    words, code = blocks[found[0]]
    if "continues" in words:
        code = blocks[found[0] - 1][1] + code
    return code


def _run(code: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"enforce_doc_{name}"}
    exec(compile(code, f"{PAGE}:{name}", "exec"), namespace)
    return namespace


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """``OTLPSpanExporter()`` is an in-memory exporter; the global provider can be set again."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    exporter = InMemorySpanExporter()
    monkeypatch.setattr("opentelemetry.exporter.otlp.proto.grpc.trace_exporter.OTLPSpanExporter",
                        lambda *args, **kwargs: exporter)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    yield exporter


def _flushed(namespace: dict[str, Any], exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The spans the block's provider exported, once every processor has handed them on."""
    provider = namespace["provider"]
    assert trace.get_tracer_provider() is provider  # the block's set_tracer_provider took effect
    assert provider.force_flush()
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


def _search_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in spans if (s.attributes or {}).get("gen_ai.tool.name") == "search"),
                  key=lambda s: s.start_time or 0)


def _stopped(spans: list[ReadableSpan], enforcement: str, count: int) -> None:
    """``count`` search spans say the call was blocked, by ``enforcement``, with the hint."""
    blocked = [s for s in _search_spans(spans) if (s.attributes or {}).get("loopguard.blocked")]
    assert len(blocked) == count
    for span in blocked:
        attrs = span.attributes or {}
        assert attrs["loopguard.enforcement"] == enforcement
        assert attrs["loopguard.precheck.code"] == "STAGNANT_RESULT"
        assert "same arguments" in str(attrs["loopguard.hint"])
        if enforcement == "abort":
            assert span.status.status_code.name == "ERROR"


def _printed(out: str) -> list[str]:
    """The lines the block printed (an instrumentation left over by an earlier test module may
    print its own notices, e.g. OpenInference's "Missing `tracer`" after ``uninstrument()``)."""
    return [line for line in out.splitlines()
            if line.startswith(("Tool ", "loopguard hinted:", "Done."))]


def _aborted(line: str) -> None:
    """The ``ToolLoopError`` text the block printed: the (RUNS + 1)th call was stopped."""
    assert line.startswith(f'Tool "search" was called {RUNS + 1} times with identical arguments'
                           " - aborting to prevent a loop"), line


def test_the_page_marks_the_blocks_run_here() -> None:
    """The blocks run here are marked ``skip=<this module>``, not ``network``: the marker keeps
    tests/test_doc_examples.py from running them without their framework, and names where
    they run; a block so marked that this module does not run would be run nowhere."""
    marked = sorted(words.get("requires", "") for words, _ in _blocks()
                    if SKIP.partition("=")[2] == words.get("skip"))
    assert marked == sorted(RUN_HERE)
    assert not [words for words, _ in _blocks()
                if words.get("requires") in RUN_HERE and "network" in words]


# ----------------------------------------------------------------------------- Agents SDK
def test_openai_agents_example_aborts_the_loop(exported: InMemorySpanExporter,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The Agents SDK block (abort): the run ends with ``ToolLoopError``, printed with its code,
    after the tool ran 4 of the 8 times the model asked; the stopped call's span says so."""
    _require("agents", "agents-")
    from agents.models.multi_provider import MultiProvider
    from agents.testing import ScriptedModel, assistant_message, function_call

    monkeypatch.setenv("OPENAI_API_KEY", "")  # the SDK's own trace exporter stays idle
    steps: list[Any] = [[function_call("search", LOOP_ARGS, call_id=f"call_{i}")]
                        for i in range(1, ASKED + 1)]
    model = ScriptedModel([*steps, [assistant_message("Done.")]])
    asked: list[str | None] = []

    def get_model(self: MultiProvider, model_name: str | None) -> ScriptedModel:
        asked.append(model_name)
        return model

    monkeypatch.setattr(MultiProvider, "get_model", get_model)
    namespace = _run(_example("agents"), "agents")
    (line,) = _printed(capsys.readouterr().out)  # not "Done.": the run never got to the answer
    assert set(asked) == {MODEL}
    _aborted(line)
    assert line.endswith(" STAGNANT_RESULT")  # print(err, err.decision.code)
    assert len(model.calls) == RUNS + 1  # stopped at the turn that asked for the 5th call
    received = [item["output"] for item in model.calls[-1].input
                if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert received == [RESULT] * RUNS  # the tool ran 4 times, not 8
    spans = _flushed(namespace, exported)
    assert len(_search_spans(spans)) == RUNS + 1
    _stopped(spans, "abort", 1)


# ----------------------------------------------------------------------------- LangChain
def _langchain_model(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``create_agent("openai:gpt-4.1-mini", ...)`` gets a new scripted looping model; returns
    the list of the models made (each remembers the messages of each call)."""
    _require("langchain.agents", "langchain-")
    import langchain.agents.factory as factory
    from _langchain_chat import ScriptedChat  # the enforce tests' looping model
    from langchain_core.messages import AIMessage

    made: list[Any] = []

    def scripted(model: str, **kwargs: Any) -> ScriptedChat:
        assert model == f"openai:{MODEL}"
        responses: list[Any] = [
            AIMessage(content="", tool_calls=[{"name": "search", "args": LOOP_ARGS,
                                               "id": f"call_{i}", "type": "tool_call"}])
            for i in range(1, ASKED + 1)]
        made.append(ScriptedChat(responses=[*responses, AIMessage("Done.")]))
        return made[-1]

    monkeypatch.setattr(factory, "init_chat_model", scripted)
    return made


def _tool_contents(messages: list[Any]) -> list[str]:
    from langchain_core.messages import ToolMessage

    return [m.content for m in messages if isinstance(m, ToolMessage)]


def _hinted(contents: list[str]) -> None:
    """4 real results, then the hint for every other call the model asked for."""
    assert len(contents) == ASKED
    assert contents[:RUNS] == [RESULT] * RUNS
    for content in contents[RUNS:]:
        assert content.startswith('[loop-detected] You have called "search" with the same '
                                  f"arguments {RUNS + 1} times"), content


def test_langchain_example_hints_the_loop(exported: InMemorySpanExporter,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The LangChain block as written (hint): the tool ran 4 of the 8 times the model asked,
    each other call's result is the hint, and the block prints one ``loopguard hinted:`` line
    per hint (``artifact["error"] == "loop-detected"``); the run ends with the model's answer."""
    made = _langchain_model(monkeypatch)
    namespace = _run(_example("langchain"), "langchain")
    printed = _printed(capsys.readouterr().out)
    (model,) = made
    messages = namespace["out"]["messages"]
    _hinted(_tool_contents(messages))
    assert messages[-1].content == "Done."
    hints = [c for c in _tool_contents(messages) if c.startswith("[loop-detected]")]
    assert printed == [f"loopguard hinted: {hint}" for hint in hints]
    assert len(model.received) == ASKED + 1
    spans = _flushed(namespace, exported)
    _stopped(spans, "hint", ASKED - RUNS)


def test_langchain_example_with_abort_raises_tool_loop_error(
        exported: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The same block with ``enforcement="abort"`` (its ``except ToolLoopError`` branch): the
    invocation ends with ``ToolLoopError`` at the 5th call, which the block prints."""
    made = _langchain_model(monkeypatch)
    code = _example("langchain")
    assert code.count('enforcement="hint"') == 1
    namespace = _run(code.replace('enforcement="hint"', 'enforcement="abort"'), "langchain-abort")
    (line,) = _printed(capsys.readouterr().out)  # the error, no hint
    _aborted(line)
    (model,) = made
    assert len(model.received) == RUNS + 1  # stopped at the turn that asked for the 5th call
    assert _tool_contents(model.received[-1]) == [RESULT] * RUNS
    spans = _flushed(namespace, exported)
    _stopped(spans, "abort", 1)


# ----------------------------------------------------------------------------- LangGraph
def test_langgraph_example_tool_nodes_hint_the_loop(exported: InMemorySpanExporter,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The LangGraph block (it continues the LangChain one): each ``ToolNode`` it builds, the
    one of ``guard_tool`` (run under a span, as the page says) and the one with the wrapper
    (no span: the run is the message thread), in a graph driven by a looping model, runs the
    tool 4 times and answers every other call with the hint."""
    _require("langgraph.prebuilt", "langchain-")
    made = _langchain_model(monkeypatch)
    import langgraph.prebuilt
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    nodes: list[Any] = []

    class RecordedToolNode(langgraph.prebuilt.ToolNode):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            nodes.append(self)

    monkeypatch.setattr(langgraph.prebuilt, "ToolNode", RecordedToolNode)
    namespace = _run(_example("langgraph"), "langgraph")
    assert len(nodes) == 2 and nodes[1] is namespace["node"]

    def graph_run(node: Any) -> list[str]:
        import langchain.agents.factory as factory

        scripted = factory.init_chat_model(f"openai:{MODEL}")  # a new looping model
        graph = StateGraph(MessagesState)
        graph.add_node("model", lambda state: {"messages": [scripted.invoke(state["messages"])]})
        graph.add_node("tools", node)
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        graph.add_edge("model", END)
        out = graph.compile().invoke({"messages": [("user", "I want a refund")]},
                                     config={"recursion_limit": 4 * ASKED})
        assert out["messages"][-1].content == "Done."
        return _tool_contents(out["messages"])

    with namespace["provider"].get_tracer("app").start_as_current_span("invoke_agent triage"):
        _hinted(graph_run(nodes[0]))  # guard_tool(search, processor)
    _hinted(graph_run(nodes[1]))  # wrap_tool_call=LoopGuardToolCallWrapper(processor)
    assert len(made) == 3  # the LangChain block's agent, then one model per graph
    spans = _flushed(namespace, exported)
    # the LangChain block's hints, then each graph's
    _stopped(spans, "hint", 3 * (ASKED - RUNS))
