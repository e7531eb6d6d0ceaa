"""Envelope, error, non-call and handoff rules of the adapters, and template labels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    attribute_value,
    conversation_of,
    is_candidate,
    placed_event,
    prompt_template_of,
    template_key_roots,
    template_label,
    to_event,
    version_label,
)
from otel_loopguard.adapters._build import build_tool_call
from otel_loopguard.adapters._unwrap import unwrap_arguments, unwrap_result
from otel_loopguard.signature import tool_signature
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

INNER = json.dumps({"results": [], "request_id": "r-1"})
WARNED = ('\n\n[loop-warning] You have called "search" with the same arguments 2 times and '
          "got the same result each time; repeating it will not change the result.")
"""What enforce mode's ``hint_on_warn`` appends to a result: never part of the result."""
STRANDS_HANDOFF = {
    "gen_ai.operation.name": "execute_tool", "gen_ai.provider.name": "strands-agents",
    "gen_ai.tool.name": "handoff_to_agent", "gen_ai.tool.call.id": "tooluse_1",
    "gen_ai.tool.call.arguments": json.dumps({"agent_name": "reviewer",
                                              "message": "Please review.", "context": {}}),
    "gen_ai.tool.status": "success",
    "gen_ai.tool.call.result": '[{"text": "Handing off to reviewer: Please review."}]'}
"""Strands 1.62's span of a ``Swarm`` handoff (``OTEL_SEMCONV_STABILITY_OPT_IN`` set): no
agent attribute; the agent is the enclosing ``invoke_agent`` span's."""


def _span(attrs: dict[str, Any], name: str = "tool", status: int = 0) -> SpanRecord:
    return SpanRecord(trace_id="0" * 32, span_id="1" * 16, parent_span_id=None, name=name,
                      start_time_ns=1, end_time_ns=2, attributes=attrs, status_code=status)


def test_candidates_by_marker_or_logfire_name_whatever_a_name_was_before() -> None:
    """A name seen without markers is remembered, yet a span of that name with a marker is
    still a candidate, and Logfire names stay candidates however often they come."""
    for _ in range(3):
        assert not is_candidate("GET /orders", {"http.method": "GET"})
        assert is_candidate("Function: lookup", {})
        assert is_candidate("Handoff: a -> b", {})
    for marker in ("gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind"):
        assert is_candidate("GET /orders", {marker: "x"})


class TestArgumentEnvelopes:
    @pytest.mark.parametrize(("raw", "expected"), [
        ('{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"q": "x"}}', {"q": "x"}),
        ('{"kwargs": {"q": "x"}}', {"q": "x"}),
        ('{"args": [1], "kwargs": {"q": "x"}}', {"q": "x", "args": [1]}),
        ('{"tool_name": "search", "arguments": {"q": "x"}}', {"q": "x"}),
        ('{"kwargs": {"q": "x"}, "other": 1}', {"kwargs": {"q": "x"}, "other": 1}),
        ('{"tool_name": "search", "arguments": {"q": "x"}, "more": 1}',
         {"tool_name": "search", "arguments": {"q": "x"}, "more": 1}),
    ], ids=["smolagents", "llama-index", "positional", "mcp", "kwargs-among-others",
            "mcp-shape-with-more"])
    def test_envelopes_by_shape(self, raw: str, expected: Any) -> None:
        """Only a value of exactly the envelope's shape is unwrapped."""
        assert unwrap_arguments(raw) == expected


class TestResultEnvelopes:
    @pytest.mark.parametrize(("raw", "expected", "failed"), [
        (json.dumps({"result": INNER}), INNER, False),
        (json.dumps({"result": "boom", "is_error": True}), "boom", True),
        (json.dumps([{"text": INNER}]), INNER, False),
        (json.dumps([{"text": "a"}, {"text": "b"}]), ["a", "b"], False),
        (json.dumps({"content": [{"type": "text", "text": INNER}], "isError": False}), INNER,
         False),
        (json.dumps({"content": [{"type": "text", "text": "no"}], "isError": True}), "no", True),
        (json.dumps({"content": [{"type": "text", "text": INNER}]}), INNER, False),
        (json.dumps({"_meta": None, "content": [{"type": "text", "text": "Unknown tool: x",
                                                 "annotations": None, "_meta": None}],
                     "structuredContent": None, "isError": True}), "Unknown tool: x", True),
        (json.dumps({"blocks": [{"text": INNER}], "tool_name": "s", "raw_input": {},
                     "raw_output": INNER, "is_error": False}), INNER, False),
        (INNER + "\n\n\nYou ONLY have access to the following tools, and should NEVER", INNER,
         False),
        (INNER + WARNED, INNER, False),
        ("line one\n\nline two" + WARNED, "line one\n\nline two", False),
        (json.dumps({"type": "tool", "data": {"content": INNER + WARNED, "tool_call_id": "c1",
                                              "status": "success"}}), INNER, False),
        (json.dumps({"result": "boom" + WARNED, "is_error": True}), "boom", True),
    ], ids=["adk", "openllmetry-mcp-error", "strands", "strands-two", "mcp", "mcp-error",
            "mcp-no-is-error", "mcp-python-sdk-error", "llama-index", "crewai-reminder",
            "loop-warning", "loop-warning-multiline", "loop-warning-in-tool-message",
            "loop-warning-in-object"])
    def test_envelopes(self, raw: str, expected: Any, failed: bool) -> None:
        """Each envelope opens to the tool's own answer and its failure flag."""
        assert unwrap_result(raw) == (expected, failed)

    @pytest.mark.parametrize("raw", [
        json.dumps({"result": 1, "total": 2}),
        json.dumps([{"text": "a", "score": 1}]),
        json.dumps({"content": "plain"}),
    ], ids=["result-among-others", "text-with-more", "content-not-blocks"])
    def test_other_shapes_are_left_alone(self, raw: str) -> None:
        """A tool's own result that merely contains such a key is kept whole."""
        assert unwrap_result(raw) == (raw, False)


class TestErrorRules:
    @pytest.mark.parametrize("attrs", [
        {"error.type": "tool_error"}, {"gen_ai.tool.status": "error"}],
        ids=["error.type", "strands-status"])
    def test_attributes_say_failed(self, attrs: dict[str, Any]) -> None:
        """``error.type`` or Strands' ``gen_ai.tool.status`` fail a span whose status is UNSET."""
        span = _span({"a": "{}", **attrs})
        span.status_message = "why"
        call = build_tool_call(span, "t", "a", "r")
        assert call.error is True and call.error_message == "why" and not call.has_result

    def test_adk_status_error_result(self) -> None:
        """ADK's ``{"status": "error", "error_message": ...}`` is a structured error result."""
        from otel_loopguard.signature import VolatileMatcher, analyze_result

        info = analyze_result('{"status": "error", "error_message": "401 unauthorized"}',
                              VolatileMatcher())
        assert info.error == "401 unauthorized"


class TestNonCallsAndHandoffTools:
    def test_merged_tools(self) -> None:
        """ADK's ``(merged tools)`` span is nothing."""
        assert to_event(_span({"gen_ai.operation.name": "execute_tool",
                               "gen_ai.tool.name": "(merged tools)"})) is None

    def test_final_answer_of_smolagents_only(self) -> None:
        """smolagents' final_answer is nothing; another framework's final_answer is a call."""
        smol = {"openinference.span.kind": "TOOL", "tool.name": "final_answer",
                "input.value": '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {}}'}
        other = {"openinference.span.kind": "TOOL", "tool.name": "final_answer",
                 "input.value": '{"answer": "x"}'}
        assert to_event(_span(smol)) is None
        assert isinstance(to_event(_span(other)), ToolCall)

    @pytest.mark.parametrize(("attrs", "source", "target"), [
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_agent",
          "gen_ai.agent.name": "triage", "gen_ai.tool.call.arguments": '{"agent_name": "b"}'},
         "triage", "b"),
        ({"openinference.span.kind": "TOOL", "tool.name": "handoff",
          "input.value": '{"kwargs": {"to_agent": "b", "ctx": "<C object at 0x7f12ab34>"}}'},
         "", "b"),
        ({"openinference.span.kind": "TOOL", "tool.name": "transfer_to_billing",
          "agent.name": "triage", "input.value": "{}"}, "triage", "billing"),
        ({"traceloop.span.kind": "tool", "traceloop.entity.name": "transfer_back_to_supervisor",
          "traceloop.entity.input": "{}"}, "", "supervisor"),
        (STRANDS_HANDOFF, "", "reviewer"),
    ], ids=["adk", "llama-index", "langgraph", "langgraph-supervisor", "strands"])
    def test_handoff_tools(self, attrs: dict[str, Any], source: str, target: str) -> None:
        """A handoff tool's span is a handoff to its target, from the span's agent if named."""
        event = to_event(_span(attrs))
        assert isinstance(event, Handoff)
        assert (event.from_agent, event.to_agent) == (source, target)

    def test_handoff_tool_hands_off_from_its_agent_span(self) -> None:
        """Placed in its run, a handoff tool whose span names no agent (Strands') hands off
        from the enclosing agent span's agent; a span naming one, or a handoff span, keeps
        its own source, unless OpenInference hid it (``__REDACTED__``): then it leaves from
        the enclosing agent span's agent too, so a hidden ping-pong stops at the 4th handoff
        like a visible one (spec F11)."""
        strands = placed_event(_span(STRANDS_HANDOFF, "execute_tool handoff_to_agent"),
                               DEFAULT_ADAPTERS, "researcher", None)
        assert isinstance(strands, Handoff)
        assert (strands.from_agent, strands.to_agent) == ("researcher", "reviewer")
        adk = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_agent",
               "gen_ai.agent.name": "triage", "gen_ai.tool.call.arguments": '{"agent_name": "b"}'}
        event = placed_event(_span(adk), DEFAULT_ADAPTERS, "outer", None)
        assert isinstance(event, Handoff) and event.from_agent == "triage"
        hidden = {"openinference.span.kind": "TOOL", "input.value": "__REDACTED__",
                  "output.value": "billing"}
        event = placed_event(_span(hidden, "handoff to billing"), DEFAULT_ADAPTERS, "outer",
                             None)
        assert isinstance(event, Handoff) and (event.from_agent, event.to_agent) == (
            "outer", "billing")

    def test_handoff_tool_without_target_is_a_call(self) -> None:
        """A ``handoff`` tool without ``to_agent`` is an ordinary call."""
        attrs = {"openinference.span.kind": "TOOL", "tool.name": "handoff",
                 "input.value": '{"ticket": 1}'}
        assert isinstance(to_event(_span(attrs)), ToolCall)

    def test_adk_legacy_schema(self) -> None:
        """ADK's legacy schema keys are read, its ``{}`` placeholders are not content."""
        legacy = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                  "gcp.vertex.agent.tool_call_args": '{"q": "x"}',
                  "gcp.vertex.agent.tool_response": json.dumps({"result": INNER})}
        call = to_event(_span(legacy))
        assert isinstance(call, ToolCall)
        assert call.arguments == '{"q": "x"}' and call.result == INNER
        off = {**legacy, "gcp.vertex.agent.tool_call_args": "{}",
               "gcp.vertex.agent.tool_response": "{}"}
        call = to_event(_span(off))
        assert isinstance(call, ToolCall) and not call.has_result and call.arguments is None


class TestVolatileArguments:
    def test_object_addresses_are_masked(self) -> None:
        """Two reprs of the same kind of object sign the same; other values still count."""
        def sig(address: str, to: str = "b") -> str:
            return tool_signature("handoff", {"to_agent": to,
                                              "ctx": f"<Context object at {address}>"})

        assert sig("0x7fe8e312d650") == sig("0x7fe8e278b250")
        assert sig("0x7fe8e312d650") != sig("0x7fe8e312d650", to="c")
        assert tool_signature("t", {"v": "0x7fe8e312d650"}) != tool_signature(
            "t", {"v": "0x7fe8e278b250"})


class TestTemplates:
    KEYS = ("gen_ai.prompt.name", "metadata.prompt_name", "llm.prompt_template.template")
    VERSIONS = ("gen_ai.prompt.version", "metadata.prompt_version",
                "llm.prompt_template.version")

    def test_path_inside_a_json_attribute(self) -> None:
        """``metadata.prompt_name`` reads the key inside the JSON attribute ``metadata``."""
        attrs = {"metadata": '{"prompt_name": "support_triage", "prompt_version": "v3"}'}
        assert prompt_template_of(attrs, self.KEYS, self.VERSIONS) == "support_triage@v3"
        assert attribute_value({"metadata": {"a": {"b": 1}}}, "metadata.a.b") == 1
        assert attribute_value({"metadata.a": 2, "metadata": '{"a": 3}'}, "metadata.a") == 2
        assert attribute_value({"metadata": "not json {"}, "metadata.a") is None

    def test_template_text_label(self) -> None:
        """Text gets its first words and a hash, bounded; two texts, two labels."""
        text = "You are support triage. Answer the customer's question: {question}"
        label = prompt_template_of({"llm.prompt_template.template": text}, self.KEYS,
                                   self.VERSIONS)
        assert label is not None and label.startswith("tpl-you-are-support-triage-")
        assert text not in label and len(label) <= 37
        assert template_label(text) != template_label(text + " Be brief.")
        assert len(template_label("x" * 10_000)) <= 37
        assert template_label("!!!").startswith("tpl-") and len(template_label("!!!")) == 12

    def test_a_long_version_keeps_two_templates_apart(self) -> None:
        """A version is cut to no fixed length: two long versions sharing their first 40
        characters used to give one label, merging two templates' series."""
        base = "2026-05-01-rollout-of-the-new-refund-policy-"
        first, second = (prompt_template_of({"gen_ai.prompt.name": "support_triage",
                                             "gen_ai.prompt.version": base + tail},
                                            self.KEYS, self.VERSIONS) for tail in ("a", "b"))
        assert first != second
        assert first is not None and first.startswith("support_triage@2026-05-01-rollout-of-")
        assert len(first) <= len("support_triage@") + 33
        # text in a version never reaches a label; a short name stays as it is
        text = prompt_template_of({"gen_ai.prompt.name": "t", "gen_ai.prompt.version":
                                   "v2 (changed the tone)\nsecret"}, self.KEYS, self.VERSIONS)
        assert text is not None and " " not in text and "secret" not in text
        assert version_label("v3") == "v3" and version_label("1a2b3c4d5e") == "1a2b3c4d5e"

    def test_a_name_with_spaces_is_text(self) -> None:
        """A name key whose value is no name (spaces) is labelled like text."""
        label = prompt_template_of({"gen_ai.prompt.name": "Support triage prompt"},
                                   self.KEYS, self.VERSIONS)
        assert label is not None and label.startswith("tpl-support-triage-prompt-")

    def test_key_roots(self) -> None:
        """The attributes to look for: each key and the root of each path key."""
        roots = template_key_roots(["gen_ai.prompt.name", "metadata.prompt_name"])
        assert {"gen_ai.prompt.name", "metadata.prompt_name", "metadata", "gen_ai",
                "gen_ai.prompt"} == roots

    def test_conversation_path(self) -> None:
        """Conversation keys may be paths too."""
        attrs = {"metadata": '{"session_id": "s-1"}'}
        assert conversation_of(attrs, ["session.id", "metadata.session_id"]) == "s-1"


def test_a_handoff_tools_note_is_what_it_hands_over_besides_its_target() -> None:
    """Strands' handoff_to_agent carries a message and a context: a new one is work done (the
    handoff detector's progress); ADK's transfer_to_agent carries only its target."""
    from otel_loopguard.adapters._rules import handoff_note

    def strands(message: str, draft: str) -> str:
        return handoff_note("handoff_to_agent", json.dumps(
            {"agent_name": "reviewer", "message": message, "context": {"draft": draft}}))

    assert strands("please review", "v1") == strands("please review", "v1") != ""
    assert strands("please review", "v2") != strands("please review", "v1")
    assert handoff_note("transfer_to_agent", '{"agent_name": "billing"}') == ""
    assert handoff_note("transfer_to_billing", "{}") == ""
    assert handoff_note("handoff_to_agent", "not json") == ""



@pytest.mark.parametrize(("metadata", "agent"), [
    ('{"ls_integration": "langchain_create_agent", "lc_agent_name": "triage"}', "triage"),
    ('{"lc_agent_name": ""}', None),
    ('{"lc_agent_name": 3}', None),
    ('{"lc_agent_name": "triage"', None),  # cut short: no agent, no error
    ('{"prompt_name": "support"}', None),
])
def test_an_openinference_langchain_call_is_its_agents(metadata: str, agent: str | None) -> None:
    """OpenInference writes no agent span for LangChain; the agent of ``create_agent(...,
    name=...)`` is ``lc_agent_name`` in the ``metadata`` it copies onto the tool span."""
    event = to_event(_span({"openinference.span.kind": "TOOL", "tool.name": "search",
                            "input.value": '{"q": "refund"}', "output.value": "none",
                            "metadata": metadata}, name="search"))
    assert isinstance(event, ToolCall)
    assert event.agent == agent
