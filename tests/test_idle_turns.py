"""The idle_turns detector: model turns of one agent invocation in a row that call no tool."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopEngine, LoopGuardConfig, RunState, ToolCall
from otel_loopguard.adapters import tool_request_of
from otel_loopguard.adapters._turns import (
    has_content,
    not_from_user,
    request_by_reason,
    turn_content_of,
    turn_input_of,
    turn_of,
)
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.testing import AgentScript, LoopGuardHarness
from otel_loopguard.types import REPLY_MARK, Decision, Handoff, ModelTurn

AGENT = "a" * 16
REJECTED = {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
    {"type": "text", "content": "Your output was not formatted correctly."}]}])}
"""A chat span's content: the harness's same format error as the last input message."""


class Feed:
    """An engine and one run, fed model turns and tool calls in order (1 ms apart)."""

    def __init__(self, **config: Any) -> None:
        self.engine = LoopEngine(LoopGuardConfig.create(**config))
        self.run: RunState = self.engine.new_run()
        self.now = 0
        self.turns = 0

    def _times(self) -> tuple[int, int]:
        self.now += 1_000_000
        return self.now - 500_000, self.now

    def turn(self, requested: bool | None = False, agent: str | None = AGENT, *,
             feedback: str = "fb", output: str = "", user: bool = False) -> Decision:
        """Feed one turn; by default each gets the same feedback (a harness rejecting it).

        ``user``: the feedback is the user's own message.
        """
        self.turns += 1
        start, end = self._times()
        return self.engine.process_model_turn(self.run, ModelTurn(
            f"t{self.turns}", start, end, requested, agent, input_sig=feedback,
            output_sig=output, user_input=user))

    def tool(self, name: str = "search", n: int = 0) -> Decision:
        start, end = self._times()
        return self.engine.process(self.run, ToolCall(
            name, {"q": n}, f"r{n}", True, start_time_ns=start, end_time_ns=end))

    def idle(self, count: int, requested: bool | None = False) -> list[str]:
        return [self.turn(requested).action.label for _ in range(count)]


class TestIdleTurnsEngine:
    def test_without_content_never_fires(self) -> None:
        """Turns whose content was not captured never reach the threshold."""
        feed = Feed()
        feed.tool()
        assert [feed.turn(feedback="").action.label for _ in range(8)] == ["continue"] * 8

    def test_new_input_each_turn_is_not_idle(self) -> None:
        """A new input before each turn (a user's reply) keeps it quiet, however many turns."""
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f"user {i}", output=f"answer {i}").action.label
                  for i in range(8)]
        assert labels == ["continue"] * 8

    def test_the_same_output_repeating_fires(self) -> None:
        """The model giving the same output 4 times in a row warns, whatever the harness's
        feedback to it (not the user's words)."""
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f"check {i}", output="same").action.label for i in range(4)]
        assert labels == ["continue"] * 3 + ["warn"]

    def test_the_same_answer_to_new_user_messages_is_not_idle(self) -> None:
        """The same words answering a new message of the user's each time: new input reached
        the model, so the answer repeats nothing (an agent answering its user is not idle);
        the same user message each time and the same answer repeat."""
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f"user {i}", output="same", user=True).action.label
                  for i in range(8)]
        assert labels == ["continue"] * 8
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback="hello?", output="same", user=True).action.label
                  for i in range(4)]
        assert labels == ["continue"] * 3 + ["warn"]

    def test_the_same_answer_without_its_input_captured_is_unknown(self) -> None:
        """The same text answer nine times with no input captured (an IDE export that dropped
        the tool calls between one repeated sign-off): what reached the model is unknown, so
        it is no repetition (two healthy IDE sessions warned). The same request for a tool
        that never ran repeats whatever its input; and with its input, the answer does."""
        feed = Feed()
        feed.tool()
        assert [feed.turn(feedback="", output="Done.").action.label for _ in range(9)] == \
            ["continue"] * 9
        feed = Feed()
        feed.tool()
        assert [feed.turn(True, feedback="", output="call ls").action.label
                for _ in range(5)][-1] == "warn"
        feed = Feed()
        feed.tool()
        assert [feed.turn(feedback="same", output="Done.").action.label
                for _ in range(4)] == ["continue"] * 3 + ["warn"]

    def test_a_turn_that_breaks_the_repetition_starts_a_new_streak(self) -> None:
        """A different feedback in the middle restarts the count: the warn comes 4 repeating
        turns after it."""
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f).action.label
                  for f in ["x", "fb", "fb", "user", "fb", "fb", "fb"]]
        assert labels == ["continue"] * 6 + ["warn"]

    def test_the_same_few_feedbacks_in_turn_repeat(self) -> None:
        """A harness that rejects answers with one of a few messages (smolagents' two code
        parsing errors, by what the answer held, in turn): the feedbacks alternate but bring
        nothing the streak had not seen, so the 4th idle turn warns. A message the streak has
        not seen still breaks it."""
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f).action.label
                  for f in ["no code", "no answer", "no code", "no answer", "no answer"]]
        assert labels == ["continue"] * 3 + ["warn"] * 2
        feed = Feed()
        feed.tool()
        labels = [feed.turn(feedback=f).action.label
                  for f in ["no code", "no answer", "no code", "new", "no answer", "no code"]]
        assert labels == ["continue"] * 6

    def test_f21_warns_at_the_fourth_idle_turn(self) -> None:
        """Four turns in a row that answer in text (the harness rejecting each): warn at the 4th."""
        feed = Feed()
        feed.tool()
        decisions = [feed.turn(False) for _ in range(4)]
        assert [d.action.label for d in decisions] == ["continue"] * 3 + ["warn"]
        warn = decisions[3]
        assert (warn.code, warn.detector, warn.tool, warn.call_index) == (
            "IDLE_TURNS", "idle_turns", "", 1)
        evidence = warn.evidence[0]
        assert evidence.count == 4
        assert evidence.details["turn_span_ids"] == ["t1", "t2", "t3", "t4"]
        assert warn.span_id == "t4"
        assert warn.hint.startswith("You have answered 4 times in a row without calling a tool")

    def test_unknown_tool_request_counts_like_a_text_answer(self) -> None:
        """Spans that do not say whether the model asked for tools: warn at the 4th as well."""
        assert Feed().idle(5, requested=None) == ["continue"] * 3 + ["warn"] * 2

    def test_a_tool_call_ends_the_streak(self) -> None:
        """Three idle turns, a tool call, three idle turns: quiet; the next idle turn warns."""
        feed = Feed()
        assert feed.idle(3) == ["continue"] * 3
        feed.tool()
        assert feed.idle(3) == ["continue"] * 3
        last = feed.turn()
        assert last.action.label == "warn"
        assert last.evidence[0].details["turn_span_ids"] == ["t4", "t5", "t6", "t7"]

    def test_productive_run_is_quiet(self) -> None:
        """A turn, then its tool call, forty times over, then a final answer: nothing flagged."""
        feed = Feed()
        for n in range(40):
            assert feed.turn(None).action.label == "continue"
            feed.tool(n=n)
        assert feed.turn(False).action.label == "continue"

    def test_rejected_tool_calls_count_once_the_next_turn_shows_none_ran(self) -> None:
        """Turns that asked for tools the harness never ran: idle, known at the next turn."""
        feed = Feed()
        feed.tool()
        actions = feed.idle(5, requested=True)
        assert actions == ["continue"] * 4 + ["warn"]
        assert feed.turn(True).evidence[0].count == 5

    def test_a_turn_that_asked_for_tools_which_ran_is_not_idle(self) -> None:
        """Each turn asks for a tool and the tool runs: the streak never starts."""
        feed = Feed()
        for n in range(6):
            assert feed.turn(True).action.label == "continue"
            feed.tool(n=n)

    def test_a_request_for_tools_after_the_warning_is_not_warned_again(self) -> None:
        """Four idle turns warn; the next turn asks for a tool, which runs: that turn was never
        idle, so it gets no second warning repeating the first one's turns (a Crush session
        where the user typed "continue" to a failing provider, then the agent edited).
        Before, it warned again with the same four turns."""
        feed = Feed()
        feed.tool()
        assert feed.idle(4) == ["continue"] * 3 + ["warn"]
        assert feed.turn(True).action.label == "continue"
        feed.tool(n=1)
        assert feed.turn(True).action.label == "continue"

    def test_no_model_turns_no_finding(self) -> None:
        """Without model spans the detector sees nothing: a run of tool calls stays quiet."""
        feed = Feed()
        decisions = [feed.tool(n=n) for n in range(20)]
        assert all(not d.flagged for d in decisions)

    def test_off_when_runs_are_conversations(self) -> None:
        """With run_key = conversation (chat turns across traces) the detector is off."""
        feed = Feed(run_key="conversation")
        assert feed.engine.idle is None
        assert feed.idle(8) == ["continue"] * 8

    @pytest.mark.parametrize(("config", "expected"), [
        ({"idle_turns_warn": 6}, ["continue"] * 5 + ["warn"]),
        ({"idle_turns_warn": None}, ["continue"] * 6),
        ({"detectors": ["stagnation", "budget"]}, ["continue"] * 6),
    ], ids=["threshold", "threshold-off", "detector-off"])
    def test_threshold_and_detector_list(self, config: dict[str, Any],
                                         expected: list[str]) -> None:
        """idle_turns_warn sets the count; None or leaving it out of detectors turns it off."""
        assert Feed(**config).idle(6) == expected

    def test_plain_model_chain_is_quiet(self) -> None:
        """Model calls outside any agent span, in a run without tools, are not an agent: quiet."""
        feed = Feed()
        assert [feed.turn(False, agent=None).action.label for _ in range(8)] == ["continue"] * 8

    def test_run_with_tool_calls_counts_without_agent_spans(self) -> None:
        """Without agent spans, a run that has called tools is an agent run."""
        feed = Feed()
        feed.tool()
        actions = [feed.turn(False, agent=None).action.label for _ in range(4)]
        assert actions == ["continue"] * 3 + ["warn"]

    def test_turns_of_another_agent_invocation_start_a_new_streak(self) -> None:
        """Writer and critic agents answering in turn, no tools: each invocation is one turn."""
        feed = Feed()
        agents = [f"{i:016x}" for i in range(8)]
        assert [feed.turn(False, agent=a).action.label for a in agents] == ["continue"] * 8

    def test_explicit_handoff_ends_the_streak(self) -> None:
        """A handoff is an action: the turns before it and after it do not add up."""
        feed = Feed()
        feed.tool()
        assert feed.idle(3) == ["continue"] * 3
        feed.engine.process_handoff(feed.run, Handoff("triage", "billing", "h1"))
        assert feed.idle(3) == ["continue"] * 3

    def test_overlapping_model_spans_are_one_turn(self) -> None:
        """A framework's model span around the SDK's (both model spans) counts as one turn."""
        feed = Feed()
        feed.tool()
        actions = []
        for i in range(4):
            inner = ModelTurn(f"in{i}", 10_000 * i + 2, 10_000 * i + 5, False, AGENT,
                              input_sig="fb")
            outer = ModelTurn(f"out{i}", 10_000 * i + 1, 10_000 * i + 6, False, AGENT,
                              input_sig="fb")
            actions += [feed.engine.process_model_turn(feed.run, t).action.label
                        for t in (inner, outer)]
        assert actions == ["continue"] * 6 + ["warn", "continue"]

    def test_reset_forgets_the_streak(self) -> None:
        """LoopEngine.reset starts the streak over."""
        feed = Feed()
        feed.idle(3)
        feed.engine.reset(feed.run)
        assert feed.idle(3) == ["continue"] * 3

    def test_stop_is_not_repeated_on_model_turns(self) -> None:
        """Enforce mode: a stopped run's model turns get no sticky stop (they cannot be blocked)."""
        feed = Feed(mode="enforce", max_tool_calls_warn=None, max_tool_calls_stop=1)
        assert feed.tool().action.label == "continue"  # a budget of one call lets it run
        assert feed.tool(n=1).action.label == "stop"
        assert feed.turn().action.label == "continue"


def _blank_or_full(seed: int, *, blank_fast: bool, warn: int,
                   refused: list[int] | None = None) -> list[Decision | None]:
    """Replay one random run: blank, content and tool-requesting turns of two agent
    invocations (or none), some overlapping, between tool calls and handoffs. Blank turns go
    through ``process_blank_turn`` (``blank_fast``) or ``process_model_turn``; None for a turn
    the fast path gave no decision. ``refused`` gets the index of each blank turn the fast
    path refused."""
    rng = random.Random(seed)
    engine = LoopEngine(LoopGuardConfig.create(idle_turns_warn=warn))
    run = engine.new_run()
    decisions: list[Decision | None] = []
    end = 0
    for n in range(1, 40):
        start = end - 2 if rng.random() < 0.1 else end + 10  # a model span around another
        end = start + 5
        agent = rng.choice((AGENT, "b" * 16, None))
        kind = rng.random()
        if kind < 0.45:  # a blank turn: no content (a request for tools known or not)
            requested = rng.choice((None, False, True))
            turn = ModelTurn(format(n, "016x"), start, end, requested, agent)
            if blank_fast and engine.process_blank_turn(run, n, start, end, agent,
                                                        requested=requested is True,
                                                        answered=requested is False):
                decisions.append(None)
            else:  # refused (a turn pending, or the streak warns): the full turn
                if blank_fast and refused is not None:
                    refused.append(len(decisions))
                decisions.append(engine.process_model_turn(run, turn))
        elif kind < 0.85:
            decisions.append(engine.process_model_turn(run, ModelTurn(
                format(n, "016x"), start, end, rng.choice((None, False, True)), agent,
                input_sig=rng.choice(("fb", "fb", "other", "")),
                output_sig=rng.choice(("", "", "out")))))
        elif kind < 0.95:
            decisions.append(engine.process(run, ToolCall(
                "search", {"q": rng.randrange(3)}, "r", True, start_time_ns=start,
                end_time_ns=end, span_id=format(n, "016x"))))
        else:
            decisions.append(engine.process_handoff(run, Handoff("a", "b", format(n, "016x"))))
    return decisions


class TestBlankTurns:
    """``process_blank_turn``: a turn without content, as ``process_model_turn`` takes it."""

    def test_the_same_decisions_as_full_turns(self) -> None:
        """Random runs: every decision is the one the full turn gives, blank turns never
        flag, and findings list blank turns' span ids (formatted only then)."""
        findings = listing_blank = 0
        refused: list[int] = []
        for seed in range(300):
            warn = 2 + seed % 3
            full = _blank_or_full(seed, blank_fast=False, warn=warn)
            fast = _blank_or_full(seed, blank_fast=True, warn=warn, refused=refused)
            for slow, quick in zip(full, fast, strict=True):
                if quick is None:
                    assert slow is not None and not slow.flagged
                    continue
                assert slow is not None
                assert (slow.action, slow.code, slow.call_index, slow.span_id,
                        [e.details for e in slow.evidence]) == \
                    (quick.action, quick.code, quick.call_index, quick.span_id,
                     [e.details for e in quick.evidence])
                if quick.code == "IDLE_TURNS":
                    findings += 1
                    ids = quick.evidence[0].details["turn_span_ids"]
                    assert all(type(i) is str and len(i) == 16 for i in ids)
                    blank = {d.span_id for d, q in zip(full, fast, strict=True) if q is None}
                    listing_blank += bool(blank.intersection(ids))
        assert findings > 200 and listing_blank > 100 and len(refused) > 50


class TestToolRequestOf:
    @pytest.mark.parametrize(("attributes", "expected"), [
        ({}, None),
        ({"gen_ai.response.finish_reasons": ["tool_calls"]}, True),
        ({"gen_ai.response.finish_reasons": ("tool_use",)}, True),
        ({"gen_ai.response.finish_reasons": ["stop"]}, False),
        ({"gen_ai.response.finish_reasons": ["end_turn"]}, False),
        ({"gen_ai.response.finish_reasons": '["stop"]'}, False),
        ({"gen_ai.response.finish_reasons": ["completed"]}, None),
        ({"gen_ai.response.finish_reasons": ["stop"], "gen_ai.provider.name": "gcp.gemini"},
         None),
        ({"gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "name": "search", "arguments": {}}]}])}, True),
        ({"gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": "call tool_call please"}],
            "finish_reason": "stop"}])}, False),
        ({"gen_ai.output.messages": "{not json", "gen_ai.response.finish_reasons": ["stop"]},
         False),
        ({"gen_ai.response.finish_reasons": ["stop"], "gen_ai.provider.name": "gcp.gemini",
          "gen_ai.output.messages": [{"role": "assistant", "parts": [
              {"type": "tool_call", "name": "f"}]}]}, True),
        ({"llm.output_messages.0.message.role": "assistant",
          "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search"}, True),
        ({"llm.output_messages.0.message.role": "assistant",
          "llm.output_messages.0.message.content": "Hello"}, False),
        ({"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.name": "s"},
         True),
        ({"gen_ai.completion.0.finish_reason": "tool_calls"}, True),
        ({"gen_ai.completion.0.content": "Hello", "gen_ai.completion.0.finish_reason": "stop"},
         False),
    ], ids=["nothing", "openai-tool-calls", "anthropic-tool-use", "stop", "end-turn",
            "reasons-as-text", "unknown-reason", "gemini-stop-says-nothing",
            "output-messages-tool-call", "output-messages-text", "broken-messages-use-reasons",
            "gemini-with-messages", "openinference-tool-call", "openinference-text",
            "openllmetry-tool-call", "openllmetry-reason", "openllmetry-text"])
    def test_conventions(self, attributes: dict[str, Any], expected: bool | None) -> None:
        """Each convention's finish reasons and output messages say whether tools were asked.

        Of a span without content, the live processor's read of the finish reasons alone
        (``request_by_reason``) says the same."""
        assert tool_request_of(attributes) is expected
        if not has_content(attributes):
            assert request_by_reason(attributes) is expected


class TestTurnContent:
    @pytest.mark.parametrize("attributes", [
        {"gen_ai.input.messages": json.dumps([{"role": "user", "content": "task"},
                                              {"role": "user", "content": "LAST"}])},
        {"gen_ai.prompt.0.content": "task", "gen_ai.prompt.1.content": "LAST"},
        {"llm.input_messages.0.message.content": "task",
         "llm.input_messages.1.message.content": "LAST"},
    ], ids=["genai", "openllmetry", "openinference"])
    def test_last_input_message(self, attributes: dict[str, Any]) -> None:
        """Each convention's last input message is what the turn's input digest covers."""
        changed = {k: (v.replace("LAST", "OTHER") if isinstance(v, str) else v)
                   for k, v in attributes.items()}
        earlier = {k: (v.replace("task", "other task") if isinstance(v, str) else v)
                   for k, v in attributes.items()}
        first = turn_content_of(attributes)[0]
        assert first
        assert turn_content_of(changed)[0] != first
        assert turn_content_of(earlier)[0] == first

    @pytest.mark.parametrize("attributes", [
        {},
        {"gen_ai.response.finish_reasons": ["tool_calls"],
         "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
             {"type": "tool_call", "name": "search"}]}])},
        {"gen_ai.response.finish_reasons": ["stop"],
         "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
             {"type": "text", "content": "done"}]}]),
         "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
             {"type": "text", "content": "go"}]}])},
        {"gen_ai.output.messages": "[not json", "gen_ai.response.finish_reasons": "stop"},
        {"gen_ai.output.messages": json.dumps("[]"), "gen_ai.system": "gemini"},
        {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "task",
         "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "ok"},
        {"llm.input_messages.0.message.role": "tool",
         "llm.input_messages.0.message.content": "result",
         "llm.output_messages.0.message.role": "assistant",
         "llm.output_messages.0.message.content": "Hello"},
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
         "gen_ai.usage.input_tokens": 812, "gen_ai.usage.output_tokens": 64},
        {"gen_ai.prompt.3.role": "user", "gen_ai.prompt.3.content": "again",
         "gen_ai.usage.input_tokens": 9},
        {"llm.input_messages.1.message.role": "user",
         "llm.input_messages.1.message.content": "hi"},
        {"llm.output_messages.0.message.role": "assistant"},
        {"gen_ai.completion.0.finish_reason": "tool_calls"},
        {"gen_ai.completion.0.tool_calls.0.name": "search"},
    ], ids=["nothing", "genai-tool-call", "genai-text", "broken-json", "json-string",
            "openllmetry", "openinference", "usage-only", "flattened-prompt-only",
            "openinference-input-only", "openinference-role-only", "openllmetry-finish-only",
            "openllmetry-tool-call-without-capture"])
    def test_turn_of_is_tool_request_and_content_in_one_read(
            self, attributes: dict[str, Any]) -> None:
        """``turn_of`` (output messages parsed once) answers what the two functions answer."""
        last, output, from_user = turn_content_of(attributes)
        assert turn_of(attributes) == (tool_request_of(attributes), last, output, from_user)

    @pytest.mark.parametrize("messages", [
        [{"role": "tool", "parts": [{"type": "tool_call_response", "response": "ok"}]}],
        [{"role": "user", "parts": [{"type": "text", "content": "go on"}]}],
        [{"role": "assistant", "parts": []}, {"role": "user", "parts": []}],
        [{"role": "tool", "parts": [{"type": "text", "content": "/home/user"}]}],
        [{"role": "tool", "parts": [{"type": "text", "content": "é"}]}, {"role": "user"}],
    ])
    @pytest.mark.parametrize("escaped", [False, True])
    def test_not_from_user_is_never_wrong(self, messages: list[Any], escaped: bool) -> None:
        """``not_from_user`` says True only where ``turn_input_of`` says it is not the user's,
        however the text spells the role (escaped too) and with flattened prompts."""
        text = json.dumps(messages, ensure_ascii=False)
        if escaped:
            text = text.replace("user", "\\u0075ser")  # "\u0075ser" reads "user"
        for attributes in ({"gen_ai.input.messages": text},
                           {"gen_ai.input.messages": "[]", "gen_ai.prompt.0.role": "user",
                            "gen_ai.prompt.0.content": "hi"},
                           {"gen_ai.input.messages": "not json", "gen_ai.prompt.0.role": "user",
                            "gen_ai.prompt.0.content": "hi"}):
            if not_from_user(attributes):
                assert turn_input_of(attributes)[1] is False
        plain = {"gen_ai.input.messages": json.dumps(messages)}
        assert not_from_user(plain) is ('"user"' not in json.dumps(messages))

    def test_without_content_both_are_empty(self) -> None:
        """A span without messages has empty digests."""
        assert turn_content_of({"gen_ai.response.finish_reasons": ["stop"]}) == ("", "", False)

    def test_output_messages_that_hold_nothing_are_no_output(self) -> None:
        """An output message with no parts (its finish reason alone: the answer's text was not
        captured) is no output, so two of them are not the same answer. BFCL's logs keep no
        text answer: four user requests in a row answered in words read as four identical
        outputs, and warned."""
        empty = json.dumps([{"role": "assistant", "parts": [], "finish_reason": "stop"}])
        assert turn_of({"gen_ai.output.messages": empty,
                        "gen_ai.response.finish_reasons": ["stop"]})[2] == ""
        said = json.dumps([{"role": "assistant", "finish_reason": "stop",
                            "parts": [{"type": "text", "content": "Done."}]}])
        assert turn_of({"gen_ai.output.messages": said})[2] != ""
        assert turn_of({"gen_ai.output.messages": "[]"})[2] == ""

    def test_a_user_reply_is_told_from_a_tool_result(self) -> None:
        """The last input message's role says whether the user spoke since the last turn."""
        def last(role: str) -> bool:
            messages = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]},
                        {"role": role, "parts": [{"type": "text", "content": "x"}]}]
            return turn_content_of({"gen_ai.input.messages": json.dumps(messages)})[2]
        assert last("user") and not last("tool")

    def test_a_new_user_message_makes_a_repeated_lookup_a_new_observation(self) -> None:
        """An agent that looks the same thing up again because its user asked again is not
        stuck: the same call and result after each new user message count afresh; without
        new user messages between them, three are stagnation."""
        from _calls import by, call

        from otel_loopguard import LoopEngine
        from otel_loopguard.types import ModelTurn, ToolCall

        def replay(user_messages: bool) -> dict[int, str]:
            engine = LoopEngine()
            state = engine.new_run()
            decisions = []
            for n in range(4):
                engine.process_model_turn(state, ModelTurn(
                    span_id=f"t{n}", input_sig=f"user {n}" if user_messages else "",
                    user_input=user_messages))
                fields = call("get_product_details", {"id": 7}, "in stock")
                decisions.append(engine.process(state, ToolCall(span_id=f"c{n}", **fields)))
            return by(decisions, "stagnation")

        assert replay(user_messages=True) == {}
        assert replay(user_messages=False) == {3: "warn", 4: "replan"}


def _f21(agent: AgentScript, finish_reasons: Sequence[str] | None = ("stop",)) -> None:
    agent.turn(finish_reasons=["tool_calls"])
    agent.tool("read_file", {"path": "a.py"}, "print('a')")
    for _ in range(4):  # the harness answers each with the same format error
        agent.turn(finish_reasons=finish_reasons, attributes=REJECTED)


class TestThroughSpans:
    def test_check_warns_at_the_fourth_idle_turn(self) -> None:
        """F21 through real spans and check: the 4th chat span carries the idle_turns warn."""
        harness = LoopGuardHarness()
        with harness.run() as agent:
            _f21(agent)
        reports = harness.check()
        assert len(reports) == 1
        findings = reports[0].findings
        assert [(d.code, d.call_index, d.evidence[0].count) for d in findings] == [
            ("IDLE_TURNS", 1, 4)]
        chats = [s.span_id for s in harness.spans() if s.name == "chat model"]
        assert findings[0].span_id == chats[4]
        assert findings[0].evidence[0].details["turn_span_ids"] == chats[1:5]
        assert reports[0].action.label == "warn"
        harness.shutdown()

    def test_check_without_finish_reasons(self) -> None:
        """Chat spans that carry no finish reasons: the same warn at the 4th idle turn."""
        harness = LoopGuardHarness()
        with harness.run() as agent:
            _f21(agent, finish_reasons=None)
        assert [d.code for d in harness.check()[0].findings] == ["IDLE_TURNS"]
        harness.shutdown()

    def test_serve_path_flags_the_same_turn(self) -> None:
        """serve (StreamingChecker) reports what check reports."""
        harness = LoopGuardHarness()
        with harness.run() as agent:
            _f21(agent)
        streaming = StreamingChecker(LoopGuardConfig(), raise_internal_errors=True)
        streaming.add(harness.spans())
        reports = streaming.flush()
        assert [d.code for r in reports for d in r.findings] == ["IDLE_TURNS"]
        harness.shutdown()

    @pytest.mark.parametrize("asked", [
        {"gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "name": "bash", "arguments": {"command": "ls"}}]}])},
        {"gen_ai.input.messages": json.dumps([{"role": "tool", "parts": [
            {"type": "tool_call_response", "response": "error: no such tool"}]}])},
    ], ids=["same output", "same tool feedback"])
    def test_check_reads_the_content_of_turns_whose_tool_calls_never_ran(
            self, asked: dict[str, str]) -> None:
        """Turns that ask for tools (by finish reason) and get none, with the same output, or
        the same feedback that is not the user's, each time: check warns on them; the same
        turns each followed by its tool call are not idle."""

        def findings(calls_run: bool) -> list[tuple[str, int]]:
            harness = LoopGuardHarness()
            with harness.run() as agent:
                agent.turn(finish_reasons=["tool_calls"])
                agent.tool("read_file", {"path": "a.py"}, "print('a')")
                for n in range(6):
                    agent.turn(finish_reasons=["tool_calls"], attributes=asked)
                    if calls_run:
                        agent.tool("bash", {"command": "ls"}, f"{n} files")
            found = [(d.code, e.count) for d in harness.check()[0].findings
                     for e in d.evidence if e.detector == "idle_turns"]
            harness.shutdown()
            return found

        assert findings(calls_run=False) == [("IDLE_TURNS", 4), ("IDLE_TURNS", 5)]
        assert findings(calls_run=True) == []

    def test_check_with_conversation_runs_is_quiet(self) -> None:
        """run_key = conversation: no idle_turns finding."""
        harness = LoopGuardHarness(LoopGuardConfig.create(run_key="conversation"))
        with harness.run(conversation="c1") as agent:
            _f21(agent)
        assert harness.check()[0].findings == []
        harness.shutdown()


def _deciding(harness: LoopGuardHarness) -> list[Decision]:
    """Add a live processor to ``harness`` and return the list its decisions go to."""
    decisions: list[Decision] = []
    harness.provider.add_span_processor(LoopGuardSpanProcessor(
        harness.config, downstream=SimpleSpanProcessor(InMemorySpanExporter()),
        registry=CollectorRegistry(), clock=harness.clock, raise_internal_errors=True,
        on_decision=decisions.append))
    return decisions


class TestLiveProcessor:
    """The LoopGuardSpanProcessor on the harness's real TracerProvider, exporting through
    ``downstream=`` to its own exporter."""

    def _watch(self, harness: LoopGuardHarness) -> tuple[InMemorySpanExporter,
                                                         CollectorRegistry]:
        exporter, registry = InMemorySpanExporter(), CollectorRegistry()
        harness.provider.add_span_processor(LoopGuardSpanProcessor(
            harness.config, downstream=SimpleSpanProcessor(exporter), registry=registry,
            clock=harness.clock, raise_internal_errors=True))
        return exporter, registry

    def test_fourth_idle_chat_span_carries_the_evidence(self) -> None:
        """Live: the 4th chat span in a row without a tool call is exported with the warn."""
        harness = LoopGuardHarness()
        exporter, registry = self._watch(harness)
        with harness.run() as agent:
            _f21(agent)
        harness.provider.force_flush()  # the processor checks spans on its worker thread
        chats = [s for s in exporter.get_finished_spans() if s.name == "chat model"]
        assert [(s.attributes or {}).get("loopguard.code") for s in chats] == \
            [None] * 4 + ["IDLE_TURNS"]
        fourth = chats[4].attributes or {}
        assert (fourth["loopguard.detector"], fourth["loopguard.action"],
                fourth["loopguard.count"]) == ("idle_turns", "warn", 4)
        assert registry.get_sample_value("loopguard_loop_detected_total", {
            "prompt_template": "unknown", "detector": "idle_turns", "action": "warn",
            "mode": "observe"}) == 1
        harness.shutdown()

    def test_a_blank_chat_span_opens_the_streak_as_check_has_it(self) -> None:
        """Live: a chat span without content, then three rejected ones: the warn lists the
        blank span's id first, as check's finding does."""
        harness = LoopGuardHarness()
        decisions = _deciding(harness)
        with harness.run() as agent:
            agent.turn(finish_reasons=["tool_calls"])
            agent.tool("read_file", {"path": "a.py"}, "print('a')")
            agent.turn()  # blank: no content, no finish reasons
            for _ in range(3):
                agent.turn(finish_reasons=["stop"], attributes=REJECTED)
        harness.provider.force_flush()
        chats = [s.span_id for s in harness.spans() if s.name == "chat model"]
        checked = harness.check()[0].findings
        assert [d.code for d in decisions] == [d.code for d in checked] == ["IDLE_TURNS"]
        assert decisions[0].evidence[0].details["turn_span_ids"] == \
            checked[0].evidence[0].details["turn_span_ids"] == chats[1:5]
        harness.shutdown()

    def test_chat_spans_with_finish_reasons_only_judged_as_check_judges_them(self) -> None:
        """Live: chat spans that carry finish reasons but no content (most instrumentations'
        default) go the blank way, except a request for tools while the streak warns or a
        turn is pending: the live decisions are check's, span for span. The request for tools
        while the streak warns is no idle turn (yet): it is not warned again."""
        harness = LoopGuardHarness()
        decisions = _deciding(harness)
        with harness.run() as agent:
            _f21(agent)  # warns at the 4th rejected turn
            agent.turn(finish_reasons=["tool_calls"])  # asks for tools while the streak warns
            agent.turn(finish_reasons=["tool_calls"], attributes=REJECTED)  # none ran
            agent.turn(finish_reasons=["tool_calls"])  # a turn pending before it
            agent.turn(finish_reasons=["stop"])
            agent.turn(finish_reasons=["tool_calls"])
            agent.tool("read_file", {"path": "b.py"}, "print('b')")
        harness.provider.force_flush()
        checked = harness.check()[0].findings
        assert [(d.code, d.span_id, d.evidence[0].details["turn_span_ids"])
                for d in decisions] == \
            [(d.code, d.span_id, d.evidence[0].details["turn_span_ids"]) for d in checked]
        chats = [s.span_id for s in harness.spans() if s.name == "chat model"]
        assert [d.span_id for d in checked] == chats[4:5]  # not on the request for tools
        harness.shutdown()

    def test_tool_call_after_each_chat_span_keeps_it_quiet(self) -> None:
        """Live: chat, tool, chat, tool... then a final answer: no span is flagged."""
        harness = LoopGuardHarness()
        exporter, _ = self._watch(harness)
        with harness.run() as agent:
            for n in range(6):
                agent.turn()
                agent.tool("bash", {"command": f"ls {n}"}, f"{n} files")
            agent.turn(finish_reasons=["stop"])
        harness.provider.force_flush()
        assert not any("loopguard.code" in (s.attributes or {})
                       for s in exporter.get_finished_spans())
        harness.shutdown()


def _user(text: str) -> dict[str, str]:
    """A chat span's content whose last input message is the user's ``text``."""
    return {"gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": text}]}])}


@pytest.mark.parametrize("config", [
    {"run_key": "conversation"},            # idle_turns is off for conversations
    {"idle_turns_warn": None},              # the advice for a whole chat kept in one trace
    {"detectors": ["stagnation", "repeat"]},
])
def test_a_new_user_message_counts_whatever_detectors_are_on(config: dict[str, Any]) -> None:
    """A conversation whose user asks again gets the same lookup again: not a loop, live and
    in check, whether or not the idle_turns detector runs (the run_key of a conversation
    turns it off). It was read only by that detector: without it, the 3rd lookup warned.

    A conversation's run: one trace per user message; otherwise the whole chat in one trace.
    """
    harness = LoopGuardHarness(LoopGuardConfig.create(**config))
    exporter = InMemorySpanExporter()
    harness.provider.add_span_processor(LoopGuardSpanProcessor(
        harness.config, downstream=SimpleSpanProcessor(exporter), registry=CollectorRegistry(),
        clock=harness.clock, raise_internal_errors=True))

    def answer(agent: AgentScript, question: str) -> None:
        agent.turn(finish_reasons=["tool_calls"], attributes=_user(question))
        agent.tool("get_product_details", {"id": 7}, "in stock")
        agent.turn(finish_reasons=["stop"])

    questions = ("is it in stock?", "recheck it now", "and now?", "once more, please")
    if "run_key" in config:
        for question in questions:
            with harness.run(conversation="conv-1") as agent:
                answer(agent, question)
    else:
        with harness.run() as agent:
            for question in questions:
                answer(agent, question)
    harness.provider.force_flush()
    assert not any("loopguard.code" in (s.attributes or {})
                   for s in exporter.get_finished_spans())
    assert [r.findings for r in harness.check()] == [[]]
    harness.shutdown()


def test_the_same_user_message_again_is_no_change_without_idle_turns() -> None:
    """The same message again changes nothing: the 3rd identical lookup still warns."""
    harness = LoopGuardHarness(LoopGuardConfig.create(run_key="conversation"))
    for _ in range(3):
        with harness.run(conversation="conv-1") as agent:
            agent.turn(finish_reasons=["tool_calls"], attributes=_user("is it in stock?"))
            agent.tool("get_product_details", {"id": 7}, "in stock")
            agent.turn(finish_reasons=["stop"])
    (report,) = harness.check()
    assert [(d.code, d.action.label) for d in report.findings] == [("STAGNANT_RESULT", "warn")]
    harness.shutdown()


def _quoting(answer: str, feedback: str = "Could not parse LLM output: `{}`") -> dict[str, Any]:
    """A chat span's input: the model's last answer, then the harness's rejection quoting it."""
    return {"gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "What is 6 x 7?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": answer}]},
        {"role": "user", "parts": [{"type": "text", "content": feedback.format(answer)}]}])}


ANSWERS = [f"I think the answer is {n} because multiplying six by seven gives that." for n in
           (41, 42, 43, 44, 45)]


class TestFeedbackQuotingTheAnswer:
    """A harness that rejects an answer and quotes it back gives the same feedback each time."""

    def test_the_quote_of_the_answer_before_it_is_taken_out(self) -> None:
        first, _ = turn_input_of(_quoting(ANSWERS[0]))
        second, _ = turn_input_of(_quoting(ANSWERS[1]))
        assert first and first == second
        other, _ = turn_input_of(_quoting(ANSWERS[1], "Invalid format: {}"))
        assert other != second  # the words around the quote still count

    def test_a_quote_cut_short_is_taken_out_too(self) -> None:
        """smolagents quotes the whole answer; a capture cuts long text: its start is enough."""
        long_answers = [a * 20 for a in ANSWERS[:2]]
        cut = [json.loads(_quoting(a)["gen_ai.input.messages"]) for a in long_answers]
        for messages in cut:
            text = messages[2]["parts"][0]["content"]
            messages[2]["parts"][0]["content"] = text[:300]
        digests = {turn_input_of({"gen_ai.input.messages": json.dumps(m)})[0] for m in cut}
        assert len(digests) == 1

    @pytest.mark.parametrize("answer", ["42", "The answer is 42."])
    def test_a_short_answer_is_not_read_as_quoted(self, answer: str) -> None:
        """Under 32 characters an answer's text says too little to be taken out."""
        assert turn_input_of(_quoting(answer))[0] != turn_input_of(_quoting(answer + "!"))[0]

    def test_four_rejected_answers_in_different_words_warn(self) -> None:
        """Through spans and check: the 4th idle turn warns; without the answer in the history
        (an instrumentation sending only the new message), the feedbacks differ: quiet."""
        def codes(with_history: bool) -> list[str]:
            harness = LoopGuardHarness()
            with harness.run() as agent:
                agent.turn(finish_reasons=["tool_calls"])
                agent.tool("calculator", {"expression": "6*7"}, "42")
                for answer in ANSWERS:
                    attrs = _quoting(answer)
                    if not with_history:
                        messages = json.loads(attrs["gen_ai.input.messages"])[-1:]
                        attrs = {"gen_ai.input.messages": json.dumps(messages)}
                    agent.turn(finish_reasons=["stop"], attributes=attrs)
            found = [d.code for r in harness.check() for d in r.findings]
            harness.shutdown()
            return found

        assert codes(with_history=True) == ["IDLE_TURNS", "IDLE_TURNS"]
        assert codes(with_history=False) == []


def _flattened(answer: str, convention: str) -> dict[str, Any]:
    """``_quoting`` as OpenLLMetry's or OpenInference's flattened prompts (smolagents writes
    OpenInference's text parts, ``contents.<m>.message_content.text``)."""
    messages = [("user", "New task: what is 6 x 7?"), ("assistant", answer),
                ("tool-response", f"Error in code parsing. Here is your code snippet: {answer} "
                                  "Make sure to include code with the correct pattern.")]
    attributes: dict[str, Any] = {}
    for n, (role, text) in enumerate(messages):
        prefix = {"openllmetry": f"gen_ai.prompt.{n}.",
                  "openinference": f"llm.input_messages.{n}.message.",
                  "openinference-parts": f"llm.input_messages.{n}.message."}[convention]
        attributes[prefix + "role"] = role
        if convention == "openinference-parts":
            attributes[prefix + "contents.0.message_content.type"] = "text"
            attributes[prefix + "contents.0.message_content.text"] = text
        else:
            attributes[prefix + "content"] = text
    return attributes


@pytest.mark.parametrize("convention", ["openllmetry", "openinference", "openinference-parts"])
def test_flattened_prompts_quoting_the_answer_are_the_same_feedback(convention: str) -> None:
    """The quote of the answer is taken out of flattened prompts as out of GenAI messages."""
    first, from_user = turn_input_of(_flattened(ANSWERS[0], convention))
    assert first and not from_user
    assert turn_input_of(_flattened(ANSWERS[1], convention))[0] == first
    assert turn_content_of(_flattened(ANSWERS[1], convention))[0] == first
    attributes = _flattened(ANSWERS[1], convention)
    feedback_key = max(key for key in attributes if key.endswith(("content", ".text")))
    attributes[feedback_key] = attributes[feedback_key].replace("Error", "Failure")
    assert turn_input_of(attributes)[0] != first  # the words around the quote still count


def test_openinference_text_parts_are_the_message_and_the_output() -> None:
    """smolagents' OpenInference spans put text in parts: the last input and the output."""
    parts = {"llm.input_messages.0.message.role": "user",
             "llm.input_messages.0.message.contents.0.message_content.text": "task",
             "llm.output_messages.0.message.role": "assistant",
             "llm.output_messages.0.message.contents.0.message_content.text": "Hello"}
    plain = {"llm.input_messages.0.message.role": "user",
             "llm.input_messages.0.message.content": "task",
             "llm.output_messages.0.message.role": "assistant",
             "llm.output_messages.0.message.content": "Hello"}
    assert turn_of(parts) == turn_of(plain) == (False, turn_input_of(plain)[0],
                                                turn_content_of(plain)[1], True)
    assert turn_content_of(plain)[1]


@pytest.mark.parametrize("key", ["gen_ai.prompt.\u00b2.content",
                                 "llm.input_messages.\u00b2.message.content",
                                 "llm.input_messages.1.message.contents.\u00b2.message_content.text"])
def test_a_prompt_index_int_cannot_read_is_not_a_message(key: str) -> None:
    """A key whose index is a digit ``int`` does not read (a superscript two) is skipped: the
    other prompts are read, nothing is raised."""
    attributes = {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "task",
                  "llm.input_messages.0.message.role": "user",
                  "llm.input_messages.0.message.content": "task"}
    assert turn_input_of({**attributes, key: "odd"}) == turn_input_of(attributes)
    assert turn_of({**attributes, key: "odd"}) == turn_of(attributes)


def _rejected_call(n: int) -> dict[str, Any]:
    """A chat span after the harness rejected the model's structured answer (a tool call
    that never ran, as LangChain's ``ToolStrategy`` and pydantic-ai's output tools reject it):
    each call has a new id, and the rejection repeats it."""
    call = {"type": "tool_call", "id": f"call_{n}", "name": "Refund",
            "arguments": {"days": "about thirty"}}
    rejection = {"type": "tool_call_response", "id": f"call_{n}",
                 "response": "Error: days should be a valid integer. Please fix your mistakes."}
    return {
        "gen_ai.input.messages": json.dumps([
            {"role": "user", "parts": [{"type": "text", "content": "Refund policy?"}]},
            {"role": "assistant", "parts": [call]}, {"role": "tool", "parts": [rejection]}]),
        "gen_ai.output.messages": json.dumps([
            {"role": "assistant", "parts": [{**call, "id": f"call_{n + 1}"}]}]),
        "gen_ai.response.finish_reasons": ["tool_calls"]}


def test_tool_call_ids_are_not_content() -> None:
    """The same call rejected the same way is the same turn, whatever ids the calls had."""
    first, second = _rejected_call(1), _rejected_call(2)
    assert turn_of(first) == turn_of(second)
    assert turn_of(first)[1] and turn_of(first)[2]
    other = json.loads(second["gen_ai.output.messages"])
    other[0]["parts"][0]["arguments"] = {"days": 30}
    assert turn_of({**second, "gen_ai.output.messages": json.dumps(other)})[2] != \
        turn_of(first)[2]  # what the call asks for still counts
    legacy = [{"role": "tool", "tool_call_id": f"call_{n}", "content": "Error: try again"}
              for n in (1, 2)]
    assert len({turn_input_of({"gen_ai.input.messages": json.dumps([m])})[0]
                for m in legacy}) == 1


def _answered(reply: str, answer: str) -> dict[str, str]:
    """A chat span's content: the user's ``reply`` as its last input, ``answer`` as output."""
    return {**_user(reply), "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
          "finish_reason": "stop"}])}


class TestShortReplies:
    """A user who answers each step with the same word (``y``, ``next``) answers the model; a
    harness that rejects an answer says what is wrong. Both arrive as a user's message."""

    @staticmethod
    def _steps(harness: LoopGuardHarness, reply: str, answers: Sequence[str]) -> None:
        with harness.run() as agent:
            agent.turn(finish_reasons=["tool_calls"])
            agent.tool("read_file", {"path": "workflow.yaml"}, "steps: [1, 2, 3, 4]")
            for answer in answers:
                agent.turn(finish_reasons=["stop"], attributes=_answered(reply, answer))

    @pytest.mark.parametrize("reply", ["y", "next", "go on", "  yes  please "])
    def test_the_same_short_reply_to_new_answers_is_quiet(self, reply: str) -> None:
        """Five steps, each answered "y" and each answer new: no finding, in check and live
        (two audited healthy runs warned from the 4th step)."""
        harness = LoopGuardHarness()
        decisions = _deciding(harness)
        self._steps(harness, reply, [f"Step {n} done. Continue? (y/n)" for n in range(5)])
        harness.provider.force_flush()
        assert harness.check()[0].findings == []
        assert decisions == []
        harness.shutdown()

    def test_the_same_answer_to_the_same_short_reply_still_repeats(self) -> None:
        """The same reply and the same answer each time repeat: warn at the 4th."""
        harness = LoopGuardHarness()
        self._steps(harness, "y", ["I cannot continue."] * 4)
        assert [d.code for d in harness.check()[0].findings] == ["IDLE_TURNS"]
        harness.shutdown()

    @pytest.mark.parametrize("feedback", [
        "Please make a move.", "No tool calls found in the response.",
        "continue, and call a tool this time please"])
    def test_feedback_of_more_words_is_the_same_feedback(self, feedback: str) -> None:
        """Four words or more (a harness's instruction or error), new answers: warn at the
        4th, as F21."""
        harness = LoopGuardHarness()
        self._steps(harness, feedback, [f"attempt {n}" for n in range(4)])
        assert [d.code for d in harness.check()[0].findings] == ["IDLE_TURNS"]
        harness.shutdown()

    @pytest.mark.parametrize(("message", "marked"), [
        ({"role": "user", "parts": [{"type": "text", "content": "y"}]}, True),
        ({"role": "user", "content": "go on then"}, True),
        ({"role": "user", "content": "please go on then"}, False),
        ({"role": "user", "content": "x" * 33}, False),
        ({"role": "user", "content": ""}, False),
        ({"role": "tool", "content": "y"}, False),
        ({"role": "user", "parts": [{"type": "tool_call_response", "response": "y"}]}, False),
    ], ids=["part", "content", "four-words", "long-word", "empty", "tool", "function-response"])
    def test_only_a_users_short_text_is_marked(self, message: dict[str, Any],
                                               marked: bool) -> None:
        digest, _ = turn_input_of({"gen_ai.input.messages": json.dumps([message])})
        assert digest.startswith(REPLY_MARK) is marked

    def test_flattened_prompts_are_marked_too(self) -> None:
        """OpenLLMetry's flattened prompt: a user's "next" is a reply, an assistant's is not."""
        user = {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "next"}
        assistant = {"gen_ai.prompt.0.role": "assistant", "gen_ai.prompt.0.content": "next"}
        assert turn_input_of(user)[0].startswith(REPLY_MARK)
        assert not turn_input_of(assistant)[0].startswith(REPLY_MARK)
