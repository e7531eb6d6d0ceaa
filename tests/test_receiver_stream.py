"""The streaming grouping behind ``serve``: out-of-order batches give ``check``'s results."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.receiver._stream import ClosedTrace, StreamingChecker
from otel_loopguard.replay.checker import Checker, RunReport, report_to_json
from otel_loopguard.testing import AgentScript, FakeClock, LoopGuardHarness
from otel_loopguard.types import SpanRecord

SECOND = 1_000_000_000


def script_fleet(harness: LoopGuardHarness, runs: int = 12, *, seed: int = 7) -> None:
    """Script a mix of looping and healthy agent runs (deterministic for a seed)."""
    rng = random.Random(seed)
    kinds = [_stagnating, _cycling, _healthy, _failing, _ping_pong, _parallel]
    for index in range(runs):
        kind = kinds[index % len(kinds)]
        conversation = f"conv-{index % 3}" if index % 2 else None
        with harness.run(f"agent-{index % 4}", prompt=f"tpl_{index % 3}",
                         conversation=conversation) as agent:
            kind(agent, rng)


def _stagnating(agent: AgentScript, rng: random.Random) -> None:
    for _ in range(rng.randint(5, 8)):
        agent.turn()
        agent.tool("search_kb", {"query": "refund policy"}, {"results": []})


def _cycling(agent: AgentScript, rng: random.Random) -> None:
    for _ in range(3):
        for tool in ("list_files", "read_file", "grep"):
            agent.turn()
            agent.tool(tool, {"path": "src"}, {"ok": tool})


def _healthy(agent: AgentScript, rng: random.Random) -> None:
    for page in range(rng.randint(2, 5)):
        agent.turn()
        agent.tool("list_orders", {"page": page}, {"orders": [page]})


def _failing(agent: AgentScript, rng: random.Random) -> None:
    for _ in range(4):
        agent.turn()
        agent.tool("crm_lookup", {"customer_id": 42}, None, error="401 unauthorized")


def _ping_pong(agent: AgentScript, rng: random.Random) -> None:
    for _ in range(3):
        agent.handoff("triage", "billing")
        agent.handoff("billing", "triage")


def _parallel(agent: AgentScript, rng: random.Random) -> None:
    for _ in range(3):
        agent.turn()
        agent.batch([("get_weather", {"city": "Paris"}, {"t": 20}),
                     ("get_weather", {"city": "Oslo"}, {"t": 5})])


@pytest.fixture(name="fleet", scope="module")
def _fleet() -> list[SpanRecord]:
    harness = LoopGuardHarness()
    script_fleet(harness)
    harness.shutdown()
    return harness.spans()


def as_json(reports: list[RunReport]) -> list[dict[str, Any]]:
    """Return the reports in check's JSON shape, sorted by run id."""
    return sorted((report_to_json(r) for r in reports), key=json.dumps)


def checked(spans: list[SpanRecord], config: LoopGuardConfig) -> list[dict[str, Any]]:
    return as_json(list(Checker(config).run(spans)))


def streamed(spans: list[SpanRecord], config: LoopGuardConfig, *, seed: int,
             jitter: float = 2.0, window: float = 3.0) -> list[dict[str, Any]]:
    """Deliver spans as exporters do: in end order, each delayed by up to ``jitter`` seconds.

    Arrivals are grouped into 0.1-second ticks (one batch per tick), so batches hold spans of
    many traces in shuffled order. A trace's spans all end before its root, so they arrive at
    most ``jitter`` after it: with ``window > jitter`` nothing is late.
    """
    clock = FakeClock()
    stream = StreamingChecker(config, reorder_window_seconds=window, clock=clock,
                              raise_internal_errors=True)
    rng = random.Random(seed)
    arrivals = sorted((i * 0.01 + rng.uniform(0, jitter), i) for i in range(len(spans)))
    reports: list[RunReport] = []
    tick, batch = 0.1, []
    for at, index in arrivals:
        while at >= tick:
            reports += stream.add(batch)
            batch = []
            clock.advance(0.1)
            tick += 0.1
            reports += stream.poll()
        batch.append(spans[index])
    reports += stream.add(batch)
    clock.advance(window)
    reports += stream.poll()
    assert stream.open_traces == 0 and stream.late_spans == 0
    reports += stream.flush()
    return as_json(reports)


class TestEquivalence:
    @pytest.mark.parametrize("run_key", ["trace", "agent"])
    def test_shuffled_batches_equal_check(self, fleet: list[SpanRecord], run_key: str) -> None:
        """Spans shuffled across all traces and cut into batches give check's exact reports."""
        config = LoopGuardConfig.create(run_key=run_key)
        expected = checked(fleet, config)
        assert any(r["action"] != "continue" for r in expected)
        assert any(r["action"] == "continue" for r in expected)
        assert streamed(fleet, config, seed=3) == expected

    def test_conversation_runs_equal_check(self, fleet: list[SpanRecord]) -> None:
        """Conversation runs that span traces, fed trace by trace, equal check's reports."""
        config = LoopGuardConfig.create(run_key="conversation")
        clock = FakeClock()
        stream = StreamingChecker(config, reorder_window_seconds=1, clock=clock,
                                  raise_internal_errors=True)
        reports: list[RunReport] = []
        by_trace: dict[str, list[SpanRecord]] = {}
        for span in fleet:
            by_trace.setdefault(span.trace_id, []).append(span)
        for spans in by_trace.values():
            reports += stream.add(list(reversed(spans)))
            clock.advance(2)
            reports += stream.poll()
        reports += stream.flush()
        assert as_json(reports) == checked(fleet, config)

    @settings(max_examples=15, deadline=None, print_blob=False,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 2**16), jitter=st.floats(0.0, 2.9))
    def test_any_delay_within_the_window(self, fleet: list[SpanRecord], seed: int,
                                         jitter: float) -> None:
        """Whatever the delays (below the reorder window), the reports equal check's."""
        config = LoopGuardConfig()
        assert streamed(fleet, config, seed=seed, jitter=jitter) == checked(fleet, config)

    def test_whole_fleet_shuffled_in_one_batch(self, fleet: list[SpanRecord]) -> None:
        """One batch holding every span in random order gives check's reports."""
        config = LoopGuardConfig()
        shuffled = list(fleet)
        random.Random(5).shuffle(shuffled)
        stream = StreamingChecker(config, raise_internal_errors=True)
        assert stream.add(shuffled) == []
        assert as_json(stream.flush()) == checked(fleet, config)


class TestClosing:
    def _trace(self) -> list[SpanRecord]:
        harness = LoopGuardHarness()
        with harness.run("a") as agent:
            for _ in range(6):
                agent.tool("search", {"q": 1}, {"r": []})
        return harness.spans()

    def test_waits_for_the_window_after_the_root(self) -> None:
        """A trace closes only once the reorder window has passed since its root arrived."""
        clock = FakeClock()
        stream = StreamingChecker(reorder_window_seconds=5, clock=clock)
        spans = self._trace()
        root, children = spans[-1], spans[:-1]
        assert stream.add(children[:3]) == []
        assert stream.add([root]) == []
        clock.advance(4.9)
        assert stream.poll() == []
        stream.add(children[3:])
        clock.advance(0.2)
        (report,) = stream.poll()
        assert report.tool_calls == 6
        assert stream.open_traces == 0

    def test_idle_trace_without_root_closes_after_ttl(self) -> None:
        """A trace whose root never arrives closes after the idle TTL, counted as ttl."""
        clock = FakeClock()
        registry = CollectorRegistry()
        stream = StreamingChecker(idle_ttl_seconds=30, clock=clock,
                                  metrics=LoopGuardMetrics(registry))
        stream.add(self._trace()[:-1])
        clock.advance(29)
        assert stream.poll() == []
        clock.advance(2)
        (report,) = stream.poll()
        assert report.tool_calls == 6
        assert registry.get_sample_value("loopguard_evicted_runs_total", {"reason": "ttl"}) == 1

    def test_late_spans_are_counted_and_not_rechecked(self) -> None:
        """Spans of a closed trace are late: counted, handed on, never a second report."""
        clock = FakeClock()
        handed: list[ClosedTrace] = []
        stream = StreamingChecker(reorder_window_seconds=0, clock=clock, on_trace=handed.append)
        spans = self._trace()
        stream.add(spans[3:])
        assert len(stream.poll()) == 1
        assert stream.add(spans[:3]) == []
        clock.advance(10_000)
        assert stream.poll() == [] and stream.flush() == []
        assert stream.late_spans == 3
        assert [c.late for c in handed] == [False, True]
        assert len(handed[1].spans) == 3 == len(handed[1].payloads or [])

    def test_capacity_closes_the_least_recently_touched(self) -> None:
        """Past max_traces, the oldest trace is checked early and counted as capacity."""
        registry = CollectorRegistry()
        stream = StreamingChecker(max_traces=2, metrics=LoopGuardMetrics(registry))
        traces = [self._trace() for _ in range(3)]
        for spans in traces:
            closed = stream.add(spans[:-1])
        assert [r.run_id for r in closed] == [traces[0][0].trace_id]
        assert stream.open_traces == 2
        assert registry.get_sample_value("loopguard_evicted_runs_total",
                                         {"reason": "capacity"}) == 1

    def test_span_budget_bounds_the_buffer(self) -> None:
        """max_spans caps the buffered spans across traces."""
        stream = StreamingChecker(max_spans=10)
        for _ in range(4):
            stream.add(self._trace()[:-1])
        assert stream.buffered_spans <= 10

    def test_evidence_for_flagged_spans(self) -> None:
        """Closed traces carry loopguard attributes for each flagged span id."""
        handed: list[ClosedTrace] = []
        stream = StreamingChecker(on_trace=handed.append)
        spans = self._trace()
        stream.add(spans, payloads=[s.span_id for s in spans])
        stream.flush()
        (closed,) = handed
        assert closed.payloads == [s.span_id for s in spans]
        flagged = [s for s in spans if s.span_id in closed.evidence]
        assert len(flagged) == 4
        first = closed.evidence[flagged[0].span_id]
        assert first["loopguard.action"] == "warn"
        assert first["loopguard.run_id"] == spans[0].trace_id

    def test_rejects_bad_settings(self) -> None:
        """Negative windows and empty span budgets fail at construction."""
        with pytest.raises(ValueError, match="reorder_window_seconds"):
            StreamingChecker(reorder_window_seconds=-1)
        with pytest.raises(ValueError, match="max_spans"):
            StreamingChecker(max_spans=0)


class TestMetrics:
    def test_counters_match_the_reports(self, fleet: list[SpanRecord]) -> None:
        """Tool calls, runs and findings counters add up to what the reports say."""
        registry = CollectorRegistry()
        stream = StreamingChecker(metrics=LoopGuardMetrics(registry))
        stream.add(fleet)
        reports = stream.flush()
        total = sum(r.tool_calls for r in reports)
        findings = sum(len(r.findings) for r in reports)

        def summed(name: str) -> float:
            return sum(s.value for m in registry.collect() for s in m.samples if s.name == name)

        assert summed("loopguard_tool_calls_total") == total
        assert summed("loopguard_runs_total") == sum(1 for r in reports if r.tool_calls)
        assert summed("loopguard_loop_detected_total") == findings
        flagged_stop = sum(1 for r in reports if r.action.label == "stop")
        stops = sum(s.value for m in registry.collect() for s in m.samples
                    if s.name == "loopguard_runs_flagged_total" and s.labels["action"] == "stop")
        assert stops == flagged_stop
