"""Enforce mode on directly guarded tools: ``ToolGuard.tool`` and ``ToolGuard.call``.

Default thresholds: the same call returning the same result runs 4 times (warn at the 3rd,
replan at the 4th); the 5th would reach ``stagnation_stop = 5`` and is the one the guard blocks.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import enum
import functools
import importlib.util
import json
import logging
import multiprocessing
import pickle
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard import (
    Action,
    LoopDetectedResult,
    LoopGuardConfig,
    LoopGuardSpanProcessor,
    ToolGuard,
    ToolLoopError,
)

ROOT = Path(__file__).resolve().parent.parent
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}
ABORT_MESSAGE = ('Tool "search" was called 5 times with identical arguments'
                 " - aborting to prevent a loop")


class Setup:
    """A real provider with loopguard (exporting through ``downstream=``) and a ToolGuard."""

    def __init__(self, background: bool | None = None, **config: Any) -> None:
        self.registry = CollectorRegistry()
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(**config), downstream=SimpleSpanProcessor(self.exporter),
            registry=self.registry, raise_internal_errors=True, background=background)
        self.provider.add_span_processor(self.processor)
        self.guard = ToolGuard(self.processor, tracer_provider=self.provider)
        self.tracer = self.provider.get_tracer("app")
        self.executions = 0

        @self.guard.tool
        def search(query: str) -> str:
            self.executions += 1
            return "no results"

        self.search = search

    @contextmanager
    def run(self) -> Iterator[None]:
        """One agent run: its tool calls share the trace of this span."""
        with self.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            yield

    def sample(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def tool_spans(self) -> list[ReadableSpan]:
        self.provider.force_flush()  # observe mode checks spans on the processor's worker
        return [s for s in self.exporter.get_finished_spans()
                if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def make() -> Iterator[Any]:
    made: list[Setup] = []

    def factory(**config: Any) -> Setup:
        made.append(Setup(**config))
        return made[-1]

    yield factory
    for setup in made:
        setup.close()


def _calls(setup: Setup, n: int, query: str = "refund policy") -> list[Any]:
    """Call ``search`` n times; an exception is returned in place of the result."""
    out: list[Any] = []
    for _ in range(n):
        try:
            out.append(setup.search(query))
        except ToolLoopError as exc:
            out.append(exc)
    return out


# ------------------------------------------------------------------------------------- abort
def test_abort_raises_tool_loop_error_before_the_body_runs(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    with setup.run():
        out = _calls(setup, 7)
    assert out[:4] == ["no results"] * 4
    assert all(isinstance(o, ToolLoopError) for o in out[4:])
    assert setup.executions == 4  # the body never ran once the call was blocked
    error = out[4]
    assert error.tool_name == "search"
    assert error.repeats == 5
    assert str(error) == ABORT_MESSAGE
    assert error.decision.action is Action.STOP
    assert error.decision.code == "STAGNANT_RESULT"
    assert error.decision.tool == "search"
    assert error.decision.hint in setup.tool_spans()[4].attributes["loopguard.hint"]


@pytest.mark.parametrize("failing", ["record_enforcement", "record_decision"])
def test_a_failing_metric_stops_nothing_less(make: Any, failing: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting the stop fails (a multiprocess directory removed under a worker): the call is
    stopped all the same, the error contained. The tool ran all 7 times."""
    setup = make(mode="enforce", enforcement="abort")
    setup.processor.guard.raise_errors = False

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("metrics directory gone")

    target = setup.processor if failing == "record_enforcement" else setup.processor.metrics
    monkeypatch.setattr(target, failing, broken)
    with setup.run():
        out = _calls(setup, 7)
    assert setup.executions == 4
    assert all(isinstance(o, ToolLoopError) for o in out[4:])
    assert setup.processor.guard.errors >= 1


def _abort_in_this_process() -> None:
    """A looping run that ends with ``ToolLoopError``, in a process pool's worker."""
    setup = Setup(mode="enforce", enforcement="abort")
    try:
        with setup.run():
            for _ in range(5):
                setup.search("refund policy")
    finally:
        setup.close()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="needs the fork start method")
def test_tool_loop_error_raised_in_a_process_pool_reaches_the_caller() -> None:
    # The pool pickles the worker's exception: ToolLoopError(decision) used to unpickle as
    # ToolLoopError(message) and fail, which broke the pool (BrokenProcessPool).
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        with pytest.raises(ToolLoopError) as info:
            pool.submit(_abort_in_this_process).result(timeout=60)
        assert pool.submit(int, "7").result(timeout=60) == 7  # the pool still works
    error = info.value
    assert str(error) == ABORT_MESSAGE
    assert (error.tool_name, error.repeats) == ("search", 5)
    assert error.decision.code == "STAGNANT_RESULT"
    assert error.decision.action is Action.STOP
    assert error.decision.evidence[0].details["predicted"] is True
    copied = copy.copy(error)
    assert (str(copied), copied.decision) == (ABORT_MESSAGE, error.decision)


def test_positional_and_keyword_arguments_are_the_same_call(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    with setup.run():
        for i in range(4):
            assert (setup.search("q") if i % 2 else setup.search(query="q")) == "no results"
        with pytest.raises(ToolLoopError):
            setup.search("q")
    args = {s.attributes["gen_ai.tool.call.arguments"] for s in setup.tool_spans()}
    assert args == {'{"query": "q"}'}


def test_other_arguments_are_another_call(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    with setup.run():
        _calls(setup, 4, "refund policy")
        assert setup.search("returns policy") == "no results"  # a new signature runs
        with pytest.raises(ToolLoopError):
            setup.search("refund policy")
    assert setup.executions == 5


def test_a_poll_tool_with_a_raised_poll_stop_is_stopped_at_it(make: Any) -> None:
    """The recommended setting for slow jobs (``poll_stop = 30`` on the tool) stops the 30th."""
    setup = make(mode="enforce", enforcement="abort",
                 tools={"search": {"kind": "poll", "poll_stop": 30}})
    with setup.run():
        out = _calls(setup, 31)
    assert setup.executions == 29
    assert isinstance(out[29], ToolLoopError)
    assert (out[29].decision.code, out[29].repeats) == ("POLL_STAGNANT", 30)


def test_an_abort_after_the_run_stopped_names_the_call_that_stopped_it() -> None:
    """A stop on a call that ran (four edits of one file failing alike, each with new text,
    which no guard can predict) stops the run: a later call of another tool is aborted with a
    message that says so, not with the other tool's count as its own."""
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig.create(mode="enforce", enforcement="abort"),
        downstream=SimpleSpanProcessor(InMemorySpanExporter()), registry=None)
    provider.add_span_processor(processor)
    guard = ToolGuard(processor, tracer_provider=provider)

    @guard.tool
    def edit_file(path: str, old: str, new: str) -> str:
        raise OSError(f"conflict in {path}")

    @guard.tool
    def search(query: str) -> str:
        return f"results for {query}"

    with provider.get_tracer("t").start_as_current_span("invoke_agent a", attributes=AGENT):
        for attempt in range(4):
            with pytest.raises(OSError):
                edit_file("/src/a.py", f"old {attempt}", f"new {attempt}")
        with pytest.raises(ToolLoopError) as info:
            search("fresh query")
    assert str(info.value) == ('Tool "search" not run: the run was stopped when "edit_file" '
                               "failed 4 times with the same error - aborting to prevent a loop")
    assert (info.value.tool_name, info.value.decision.evidence[0].tool) == ("search", "edit_file")
    provider.shutdown()


@pytest.mark.parametrize(("settings", "message"), [
    ({"max_tool_calls_warn": None, "max_tool_calls_stop": 3},
     "would exceed the run's budget of 3 tool calls"),
    ({"max_calls_per_tool_stop": 3}, "would exceed its budget of 3 calls per run"),
    ({"max_steps_stop": 3}, "would exceed the run's budget of 3 steps"),
], ids=["run", "tool", "steps"])
def test_a_budget_abort_names_the_budget(make: Any, settings: dict[str, Any],
                                         message: str) -> None:
    """The abort message of a budget says which budget and its limit, not the call count."""
    setup = make(mode="enforce", enforcement="abort", **settings)
    with setup.run():
        out = [setup.search(f"query {i}") for i in range(3)]  # a budget of 3 lets 3 run
        with pytest.raises(ToolLoopError) as info:  # the call past the limit
            setup.search("query 3")
    assert out == ["no results"] * 3
    assert str(info.value) == f'Tool "search" {message} - aborting to prevent a loop'


class _Plan(enum.Enum):
    BASIC = "basic"


@dataclasses.dataclass
class _Filter:
    plan: _Plan
    since: datetime.date


def test_arguments_that_are_not_json_are_stopped_at_the_documented_call(make: Any) -> None:
    # The history holds each call as its span records it (JSON, other values as their text),
    # while the precheck signed the Python values themselves: a dataclass, an enum or a date
    # signed differently there, so the precheck never matched and the 5th call ran too.
    setup = make(mode="enforce", enforcement="abort")
    ran: list[_Filter] = []

    @setup.guard.tool
    def search(query: str, where: _Filter, plan: _Plan, since: datetime.date) -> str:
        ran.append(where)
        return "no results"

    where = _Filter(_Plan.BASIC, datetime.date(2026, 1, 1))
    with setup.run():
        for _ in range(4):
            assert search("refunds", where, _Plan.BASIC, datetime.date(2026, 1, 1)) == (
                "no results")
        with pytest.raises(ToolLoopError):
            search("refunds", where, _Plan.BASIC, datetime.date(2026, 1, 1))
    assert len(ran) == 4


class _Unprintable:
    """A value whose ``str`` and ``repr`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise RuntimeError("no text")


def _nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


@pytest.mark.parametrize("value", [_nested(10_000), 10**5000, _Unprintable()],
                         ids=["nested-10000", "int-5000-digits", "unprintable"])
def test_arguments_and_results_the_span_cannot_write_do_not_fail_the_call(
        make: Any, value: Any) -> None:
    """A value JSON and repr cannot write is recorded by a text of its own: the tool runs and
    returns its result, and different such calls are not taken for repeats."""
    setup = make(mode="enforce", enforcement="abort")
    ran: list[Any] = []

    @setup.guard.tool
    def search(query: Any) -> Any:
        ran.append(query)
        return value

    with setup.run():
        results = [search(value) for _ in range(6)]
    assert len(ran) == 6
    assert all(result is value for result in results)
    spans = setup.tool_spans()
    assert len(spans) == 6
    assert not any((s.attributes or {}).get("loopguard.action") for s in spans)


@dataclasses.dataclass
class RunContext:
    """Stands for pydantic-ai's ``RunContext``: a dataclass whose text changes on every call."""

    step: int


RunContext.__module__ = "pydantic_ai._run_context"


class _Agent:
    """An object whose text is its address (a framework's agent, a tool's ``self``)."""


class _Tools:
    def __init__(self) -> None:
        self.ran = 0

    def search(self, ctx: RunContext, agent: _Agent, query: str, where: _Filter) -> str:
        self.ran += 1
        return "no results"


def test_only_the_arguments_the_model_gave_are_recorded(make: Any) -> None:
    # A framework's context object (here: a class named and placed as pydantic-ai's
    # RunContext) changes its text on every call, so identical calls never looked identical
    # and the loop ran on; an object whose text is its address, or a method's self, says
    # nothing about the call. Both are left out; JSON values and typed values stay.
    setup = make(mode="enforce", enforcement="abort")
    tools = _Tools()
    search = functools.partial(setup.guard.tool(_Tools.search), tools)  # self is recorded
    where = _Filter(_Plan.BASIC, datetime.date(2026, 1, 1))
    with setup.run():
        for step in range(4):
            assert search(RunContext(step), _Agent(), "refunds", where=where) == "no results"
        with pytest.raises(ToolLoopError):
            search(RunContext(5), _Agent(), "refunds", where=where)
    assert tools.ran == 4
    recorded = [json.loads(s.attributes["gen_ai.tool.call.arguments"])
                for s in setup.tool_spans()]
    assert recorded == [{"query": "refunds",
                         "where": "_Filter(plan=<_Plan.BASIC: 'basic'>, "
                                  "since=datetime.date(2026, 1, 1))"}] * 5


# -------------------------------------------------------------------------------------- hint
def test_hint_returns_loop_detected_result_instead_of_running(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint")
    with setup.run():
        out = _calls(setup, 6)
    assert out[:4] == ["no results"] * 4
    assert setup.executions == 4
    for blocked in out[4:]:
        assert isinstance(blocked, LoopDetectedResult)
        assert isinstance(blocked, str)
        assert blocked.error == "loop-detected"
        assert blocked.decision.action is Action.STOP
        assert blocked == f"[loop-detected] {blocked.decision.hint}"
        assert "search" in blocked and "3 times" not in blocked  # counted: 5 identical calls
    assert not isinstance(out[0], LoopDetectedResult)


def test_a_hint_result_can_be_copied_and_pickled(make: Any) -> None:
    # An agent loop keeps tool results in its history, which gets deep-copied (copy.deepcopy,
    # dataclasses.asdict) or pickled (a process pool, a queue): str's own way of copying a str
    # subclass passed the hint's text to LoopDetectedResult(decision) and failed.
    setup = make(mode="enforce", enforcement="hint")
    with setup.run():
        blocked = _calls(setup, 5)[4]
    assert isinstance(blocked, LoopDetectedResult)
    for copied in (copy.copy(blocked), copy.deepcopy([blocked])[0],
                   pickle.loads(pickle.dumps(blocked))):
        assert type(copied) is LoopDetectedResult
        assert copied == blocked
        assert copied.error == "loop-detected"
        assert copied.decision == blocked.decision


def test_hint_then_abort_hints_once_then_aborts(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint_then_abort")
    with setup.run():
        out = _calls(setup, 6)
    assert isinstance(out[4], LoopDetectedResult)
    assert isinstance(out[5], ToolLoopError)
    assert setup.executions == 4
    assert setup.sample("loopguard_enforced_total", prompt_template="unknown",
                        enforcement="hint") == 1
    assert setup.sample("loopguard_enforced_total", prompt_template="unknown",
                        enforcement="abort") == 1


def test_hint_then_abort_is_per_run(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint_then_abort")
    for _ in range(2):  # two runs: each gets its own hint first
        with setup.run():
            out = _calls(setup, 5)
        assert isinstance(out[4], LoopDetectedResult)
    assert setup.executions == 8


def test_hint_on_warn_appends_a_warning_but_runs_the_tool(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint", hint_on_warn=True)
    with setup.run():
        out = _calls(setup, 4)
    assert setup.executions == 4
    assert out[:2] == ["no results"] * 2
    for warned in out[2:]:  # warn (3rd) and replan (4th): the tool ran, the hint is appended
        head, _, tail = warned.partition("\n\n[loop-warning] ")
        assert head == "no results"
        assert "search" in tail
    assert "3 times" in out[2] and "4 times" in out[3]


def test_hint_on_warn_does_nothing_in_observe_mode(make: Any) -> None:
    setup = make(mode="observe", hint_on_warn=True)
    with setup.run():
        assert _calls(setup, 4) == ["no results"] * 4


# ------------------------------------------------------------------------------------- async
def test_async_tools_are_guarded(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    ran = []

    @setup.guard.tool(name="search")
    async def search_async(query: str) -> str:
        await asyncio.sleep(0)
        ran.append(query)
        return "no results"

    async def agent() -> list[Any]:
        out: list[Any] = []
        with setup.run():
            for _ in range(6):
                try:
                    out.append(await search_async("refund policy"))
                except ToolLoopError as exc:
                    out.append(exc)
        return out

    out = asyncio.run(agent())
    assert out[:4] == ["no results"] * 4
    assert [type(o) for o in out[4:]] == [ToolLoopError, ToolLoopError]
    assert str(out[4]) == ABORT_MESSAGE
    assert len(ran) == 4
    assert search_async.__name__ == "search_async"  # functools.wraps


def test_async_hint(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint")

    @setup.guard.tool
    async def lookup(city: str, unit: str = "celsius") -> str:
        return "21"

    async def agent() -> list[Any]:
        with setup.run():
            return [await lookup("paris", unit="celsius") for _ in range(5)]

    out = asyncio.run(agent())
    assert out[:4] == ["21"] * 4
    assert isinstance(out[4], LoopDetectedResult) and out[4].error == "loop-detected"


# ---------------------------------------------------------------------------------- failures
def test_permanent_failure_is_blocked_at_the_second_identical_call(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    attempts = []

    @setup.guard.tool
    def fetch_account(account_id: int) -> str:
        attempts.append(account_id)
        raise PermissionError("401 unauthorized")

    with setup.run():
        with pytest.raises(PermissionError):
            fetch_account(42)
        with pytest.raises(ToolLoopError) as info:
            fetch_account(42)  # the model retries the same call: blocked, not run
    assert attempts == [42]
    assert info.value.decision.code == "PERMANENT_FAILURE"
    assert info.value.repeats == 2
    assert str(info.value) == ('Tool "fetch_account" failed 1 time with the same error and '
                               'would be retried again - aborting to prevent a loop')
    failed, blocked = setup.tool_spans()
    assert failed.status.status_code is StatusCode.ERROR
    assert "401" in (failed.status.description or "")
    assert blocked.attributes["loopguard.blocked"] is True


# ------------------------------------------------------------------------------ observe mode
def _precheck_actions(setup: Setup) -> list[Any]:
    return [s.attributes.get("loopguard.precheck.action") for s in setup.tool_spans()]


def test_observe_mode_never_blocks_and_reports_what_enforce_would_do(make: Any) -> None:
    observe = make(mode="observe", enforcement="abort")
    with observe.run():
        assert _calls(observe, 6) == ["no results"] * 6
    assert observe.executions == 6
    spans = observe.tool_spans()
    assert [s.attributes.get("loopguard.would_block") for s in spans] == [None] * 4 + [True] * 2
    assert not any("loopguard.blocked" in s.attributes for s in spans)
    assert {s.attributes.get("loopguard.precheck.mode") for s in spans[2:]} == {"observe"}
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans)
    # The processor's findings on the same calls, labelled mode="observe".
    assert observe.sample("loopguard_loop_detected_total", prompt_template="unknown",
                          detector="stagnation", action="stop", mode="observe") == 2
    assert observe.sample("loopguard_loop_detected_total", prompt_template="unknown",
                          detector="stagnation", action="warn", mode="observe") == 1
    assert observe.sample("loopguard_enforced_total", prompt_template="unknown",
                          enforcement="abort") == 0
    assert [s.attributes.get("loopguard.mode") for s in spans[2:]] == ["observe"] * 4

    enforce = make(mode="enforce", enforcement="abort")
    with enforce.run():
        _calls(enforce, 5)
    # The same decisions, call by call, up to the one enforce blocks.
    assert _precheck_actions(enforce) == _precheck_actions(observe)[:5] == [
        None, None, "warn", "replan", "stop"]


# -------------------------------------------------------------------------- metrics and spans
def test_enforcement_actions_are_counted(make: Any) -> None:
    hint = make(mode="enforce", enforcement="hint")
    with hint.run():
        _calls(hint, 7)
    assert hint.sample("loopguard_enforced_total", prompt_template="unknown",
                       enforcement="hint") == 3
    assert hint.sample("loopguard_enforced_total", prompt_template="unknown",
                       enforcement="abort") == 0
    # Blocked calls are not tool calls: the processor skips their spans.
    assert hint.sample("loopguard_tool_calls_total", prompt_template="unknown",
                       tool="search") == 4

    abort = make(mode="enforce", enforcement="abort")
    with abort.run():
        _calls(abort, 6)
    assert abort.sample("loopguard_enforced_total", prompt_template="unknown",
                        enforcement="abort") == 2


def test_a_stopped_call_counts_as_a_finding_of_its_detector_or_budget(make: Any) -> None:
    """A stopped call never runs, so the processor never counts it: before, an enforced stop
    was only in ``loopguard_enforced_total``, never a ``stop`` in the loop and budget series
    the dashboard and alerts read (``LoopGuardBudgetExhausted`` could not fire)."""
    loop = make(mode="enforce", enforcement="hint")
    with loop.run():
        _calls(loop, 7)  # 4 run (warn at 3, replan at 4), 3 stopped
    labels = {"prompt_template": "unknown", "detector": "stagnation", "mode": "enforce"}
    assert loop.sample("loopguard_loop_detected_total", action="stop", **labels) == 3
    assert loop.sample("loopguard_loop_detected_total", action="replan", **labels) == 1
    assert loop.sample("loopguard_runs_flagged_total", prompt_template="unknown",
                       action="stop") == 1

    budget = make(mode="enforce", enforcement="hint", max_tool_calls_warn=None,
                  max_tool_calls_stop=3)
    with budget.run():
        for topic in ("refunds", "shipping", "returns", "warranty", "billing"):
            budget.search(topic)
    assert budget.sample("loopguard_budget_exceeded_total", prompt_template="unknown",
                         budget="run", action="stop", mode="enforce") == 2  # 3 ran
    assert budget.sample("loopguard_runs_flagged_total", prompt_template="unknown",
                         action="stop") == 0  # budgets are not loops


def test_the_blocked_span_records_that_it_was_blocked_and_why(make: Any) -> None:
    abort = make(mode="enforce", enforcement="abort")
    with abort.run():
        out = _calls(abort, 5)
    span = abort.tool_spans()[4]
    attrs = span.attributes
    assert attrs["loopguard.blocked"] is True
    assert attrs["loopguard.enforcement"] == "abort"
    assert attrs["loopguard.hint"] == out[4].decision.hint
    assert attrs["loopguard.precheck.action"] == "stop"
    assert attrs["loopguard.precheck.code"] == "STAGNANT_RESULT"
    assert attrs["loopguard.precheck.count"] == 5
    assert attrs["loopguard.precheck.mode"] == "enforce"
    assert "gen_ai.tool.call.result" not in attrs  # the tool never ran
    assert span.status.status_code is StatusCode.ERROR
    # ToolGuard sets the description to the code, but the exception that leaves the span's
    # ``with`` block overwrites it with its own message (SDK set_status_on_exception).
    assert span.status.description in ("STAGNANT_RESULT", f"ToolLoopError: {ABORT_MESSAGE}")
    assert [e.attributes["exception.type"] for e in span.events
            if e.name == "exception"] == ["otel_loopguard.exceptions.ToolLoopError"]
    assert all("loopguard.blocked" not in s.attributes for s in abort.tool_spans()[:4])

    hint = make(mode="enforce", enforcement="hint")
    with hint.run():
        _calls(hint, 5)
    span = hint.tool_spans()[4]
    assert span.attributes["loopguard.blocked"] is True
    assert span.attributes["loopguard.enforcement"] == "hint"
    assert span.status.status_code is not StatusCode.ERROR


def test_check_reads_a_blocked_call_as_the_live_processor_does(make: Any,
                                                               tmp_path: Path) -> None:
    """A stopped call never ran: ``check`` replaying the exported spans must not count it.

    It did: the three blocked spans were three more calls of the run (6 in all) and a
    ``REPEATED_CALL`` warning on calls that never ran.
    """
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    hint = make(mode="enforce", enforcement="hint", stagnation_stop=4)
    with hint.run():
        _calls(hint, 6)
    assert hint.executions == 3
    spans = hint.tool_spans()
    assert sum(bool(s.attributes.get("loopguard.blocked")) for s in spans) == 3
    path = tmp_path / "enforced.pb"
    path.write_bytes(encode_spans(spans).SerializeToString())
    done = subprocess.run([sys.executable, "-m", "otel_loopguard", "check", "--format", "json",
                           str(path)], capture_output=True, text=True, check=False, cwd=ROOT)
    report = json.loads(done.stdout)
    (run,) = report["runs"]
    assert run["tool_calls"] == 3
    assert [(f["action"], f["code"]) for f in run["findings"]] == [("warn", "STAGNANT_RESULT")]


def test_call_context_manager(make: Any) -> None:
    setup = make(mode="enforce", enforcement="hint")
    with setup.run():
        for i in range(5):
            with setup.guard.call("search", {"query": "refund policy"}) as scope:
                if scope.blocked is not None:
                    assert i == 4
                    assert scope.blocked.error == "loop-detected"
                    assert scope.decision.action is Action.STOP
                    continue
                scope.set_result({"results": []})
    results = [s.attributes.get("gen_ai.tool.call.result") for s in setup.tool_spans()]
    assert results == ['{"results": []}'] * 4 + [None]


# ------------------------------------------------------------------------------- concurrency
def test_two_runs_on_two_threads_do_not_block_each_other(make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    barrier = threading.Barrier(2)
    outcomes: dict[str, list[str]] = {}

    def agent(name: str) -> None:
        got: list[str] = []
        with setup.run():
            for _ in range(6):
                barrier.wait(timeout=10)  # interleave the two runs call by call
                try:
                    got.append(setup.search("refund policy"))
                except ToolLoopError:
                    got.append("blocked")
        outcomes[name] = got

    threads = [threading.Thread(target=agent, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    expected = ["no results"] * 4 + ["blocked"] * 2
    assert outcomes == {"a": expected, "b": expected}
    assert setup.executions == 8
    runs = {s.attributes["loopguard.precheck.run_id"] for s in setup.tool_spans()
            if "loopguard.precheck.run_id" in s.attributes}
    assert len(runs) == 2


# --------------------------------------------------------------------------- on_decision
@pytest.mark.parametrize("enforcement", ["abort", "hint"])
def test_blocked_calls_reach_on_decision(make: Any, enforcement: str) -> None:
    """A call the guard blocks never runs, so the engine never decides on it after the fact:
    the guard hands its blocking decision to ``on_decision`` itself."""
    setup = make(mode="enforce", enforcement=enforcement)
    seen: list[Any] = []
    setup.processor.engine.on_decision = seen.append
    with setup.run():
        _calls(setup, 6)
    assert [(d.call_index, d.action.label) for d in seen] == [
        (3, "warn"), (4, "replan"), (5, "stop"), (5, "stop")]
    assert all(d.evidence[0].details.get("predicted") for d in seen[2:])
    assert setup.executions == 4


def test_on_decision_with_a_guarded_call_of_its_own_run_does_not_deadlock(make: Any) -> None:
    """The callback runs under the run's lock; a guarded call of that run from inside it is
    refused with ``LoopGuardError`` (contained and counted) instead of waiting for the lock
    forever."""
    setup = make(mode="enforce", enforcement="abort")
    errors: list[Exception] = []

    def callback(decision: Any) -> None:
        try:
            setup.search("notify the on-call engineer")
        except Exception as exc:
            errors.append(exc)
            raise

    setup.processor.engine.on_decision = callback
    outcome: list[Any] = []

    def agent() -> None:
        with setup.run():
            outcome.extend(_calls(setup, 5))

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive(), "the agent thread deadlocked in on_decision"
    assert outcome[:4] == ["no results"] * 4
    assert isinstance(outcome[4], ToolLoopError)
    assert len(errors) == 3  # warn, replan, and the blocked stop
    assert all(type(e).__name__ == "LoopGuardError" and "must not make a guarded tool call"
               in str(e) for e in errors)
    assert setup.processor.engine.callback_errors == 3
    assert setup.executions == 4  # the callback's own call never ran


@pytest.mark.parametrize("background", [False, True], ids=["in-span-end", "background"])
def test_spans_of_the_run_ended_inside_on_decision_pass_through(make: Any,
                                                                background: bool) -> None:
    """A tool span or a model span of the same run that ends inside the callback (an
    instrumented call made while handling the decision) never deadlocks on the run's lock:
    checked in ``span.end()``, it is passed on unchecked; in the background mode the callback
    runs on the worker, and the span is checked after the callback returns."""
    setup = make(background=background)  # observe mode
    ended: list[str] = []

    def callback(decision: Any) -> None:
        with setup.tracer.start_as_current_span(
                "chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
            pass
        with setup.tracer.start_as_current_span("execute_tool page_oncall", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "page_oncall"}):
            pass
        ended.append(decision.code)

    setup.processor.engine.on_decision = callback
    thread = threading.Thread(target=lambda: _in_run(setup, 3), daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive(), "the agent thread deadlocked in on_decision"
    pages: list[Any] = []
    for _ in range(100):  # spans the callback ends may queue behind a flush that is running
        pages = [s for s in setup.tool_spans() if s.name == "execute_tool page_oncall"]
        if pages:
            break
        time.sleep(0.05)
    assert ended == ["STAGNANT_RESULT"]
    assert len(pages) == 1
    assert not any(k.startswith("loopguard.") for k in pages[0].attributes)
    assert setup.processor.engine.callback_errors == 0
    assert setup.sample("loopguard_tool_calls_total", tool="search",
                        prompt_template="unknown") == 3
    assert setup.sample("loopguard_tool_calls_total", tool="page_oncall",
                        prompt_template="unknown") == (1 if background else 0)


def _in_run(setup: Setup, n: int) -> None:
    with setup.run():
        _calls(setup, n)


# --------------------------------------------------------------------------------- typing
_OVERLOADED = getattr(typing, "get_overloads", lambda f: [True])(ToolGuard.tool)


@pytest.mark.xfail(not _OVERLOADED, strict=True,
                   reason="ToolGuard.tool is annotated '-> Any', so decorated tools lose their "
                          "signature; it needs @overload signatures returning Callable[P, R]")
def test_tool_decorator_keeps_signatures_under_mypy(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
         str(tmp_path / "mypy-cache"), "tests/typing/api.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_guard_whose_spans_are_not_recorded_says_so_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """Without an SDK provider nothing is recorded: the tool runs, a warning says why."""
    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(mode="enforce"),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    guard = ToolGuard(processor, tracer_provider=trace.NoOpTracerProvider())
    ran: list[str] = []

    @guard.tool
    def search(query: str) -> str:
        ran.append(query)
        return "no results"

    with caplog.at_level(logging.WARNING, logger="otel_loopguard.enforce"):
        for _ in range(4):
            assert search("refund policy") == "no results"
    assert ran == ["refund policy"] * 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "is not recorded, so no call is guarded" in warnings[0]


# ------------------------------------------------------ inside an instrumentation's tool span
def _framework_call(setup: Setup, tracer: trace.Tracer, query: str, *, marked: bool = True,
                    name: str = "search", content: bool = True) -> Any:
    """Call ``search`` as an instrumented framework does: inside its own tool span.

    ``marked``: the span says it is a tool call when it starts, with the model's arguments
    (pydantic-ai, Strands); otherwise only its name does, and the attributes come when the
    call has ended (Google ADK). The result is recorded on the span, or the error raised.
    ``content``: False, the span records neither arguments nor result (content capture off).
    """
    arguments = {"gen_ai.tool.call.arguments": json.dumps({"query": query})} if content else {}
    start = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
             **arguments} if marked else {}
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=start) as span:
        try:
            result = setup.search(query)
        except ToolLoopError as exc:
            result = exc
        if not marked:
            span.set_attributes({"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": name, **arguments})
        if content and not isinstance(result, Exception):
            span.set_attribute("gen_ai.tool.call.result", str(result))
    return result


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
@pytest.mark.parametrize("marked", [True, False], ids=["marked-at-start", "named-only"])
def test_in_an_instrumentation_tool_span_a_call_counts_once(make: Any, marked: bool,
                                                            content: bool) -> None:
    """The framework's tool span is the call: the guard opens no span of its own inside it.

    It used to, and the processor counted both spans, so the loop was stopped at the 3rd call.
    With the framework's content capture off (Google ADK's default, Strands without its opt-in,
    mcp 2's server spans) its span records no arguments and no result, calls of unknown outcome
    are never the same call, and the guard stopped nothing: it now hands the engine the
    arguments and result it has, and leaves the exported span as the framework wrote it.
    """
    setup = make(mode="enforce", enforcement="abort")
    framework = setup.provider.get_tracer("framework")
    with setup.run():
        out = [_framework_call(setup, framework, "refund policy", marked=marked,
                               content=content) for _ in range(6)]
    assert out[:4] == ["no results"] * 4
    assert [type(o) for o in out[4:]] == [ToolLoopError] * 2
    assert setup.executions == 4
    spans = setup.tool_spans()
    assert [s.instrumentation_scope.name for s in spans] == ["framework"] * 6
    assert [s.attributes.get("loopguard.blocked") for s in spans] == [None] * 4 + [True] * 2
    assert [s.attributes.get("loopguard.action") for s in spans[:4]] == \
        [None, None, "warn", "replan"]
    assert spans[4].attributes["loopguard.precheck.count"] == 5
    assert spans[4].status.status_code is StatusCode.ERROR
    assert setup.sample("loopguard_tool_calls_total", prompt_template="unknown",
                        tool="search") == 4
    assert all(("gen_ai.tool.call.result" in s.attributes) is content for s in spans[:4])
    assert not setup.processor._supplied  # what the guard handed over was taken at each end


def test_a_guarded_call_in_another_tool_span_is_a_call_of_its_own(make: Any) -> None:
    """In the span of another tool, or inside a guarded call already, the guard opens a span."""
    setup = make(mode="enforce", enforcement="hint")
    framework = setup.provider.get_tracer("framework")

    @setup.guard.tool(name="search")
    def outer(query: str) -> str:
        return str(setup.search(query))  # a guarded call inside a guarded call

    with setup.run():
        with framework.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}):
            setup.search("refund policy")
        with framework.start_as_current_span("execute_tool search", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}):
            outer("refund policy")
    spans = setup.tool_spans()
    assert [(s.instrumentation_scope.name, s.name) for s in spans] == [
        ("otel_loopguard.enforce", "execute_tool search"),  # in "lookup"
        ("framework", "execute_tool lookup"),
        ("otel_loopguard.enforce", "execute_tool search"),  # inside ``outer``
        ("framework", "execute_tool search")]


def test_an_instrumentation_on_another_provider_leaves_the_guard_its_own_spans(
        make: Any) -> None:
    setup = make(mode="enforce", enforcement="abort")
    other = TracerProvider().get_tracer("framework")  # the processor never sees its spans
    with setup.run():
        out = [_framework_call(setup, other, "refund policy") for _ in range(6)]
    assert out[:4] == ["no results"] * 4
    assert [type(o) for o in out[4:]] == [ToolLoopError] * 2
    assert [s.instrumentation_scope.name for s in setup.tool_spans()] == \
        ["otel_loopguard.enforce"] * 6


def test_a_failing_look_for_the_framework_span_leaves_the_call_guarded(
        make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An adapter failing while the guard looks at the current span does not reach the tool's
    caller: the guard counts an internal error and opens a span of its own."""
    from otel_loopguard.enforce import _host

    def failing(*_args: Any) -> Any:
        raise RuntimeError("adapter broke")

    monkeypatch.setattr(_host, "_plan", failing)
    setup = make(mode="enforce", enforcement="abort")
    setup.processor.guard.raise_errors = False  # as in production: contained and counted
    framework = setup.provider.get_tracer("framework")
    with setup.run():
        out = [_framework_call(setup, framework, "refund policy") for _ in range(6)]
    # as before the guard used the framework's span (its own and the framework's both count,
    # so the loop is stopped early), but no adapter error reaches the caller
    assert out[:2] == ["no results"] * 2
    assert ToolLoopError in {type(o) for o in out[2:]} <= {str, ToolLoopError}
    assert setup.processor.guard.errors == 6
    assert [s.instrumentation_scope.name for s in setup.tool_spans()][:2] == [
        "otel_loopguard.enforce", "framework"]
