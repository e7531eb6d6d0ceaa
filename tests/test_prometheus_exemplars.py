"""From a spike to its trace: exemplars of the loop and waste counters, through a real Prometheus.

The span processor's ``/metrics`` (``start_metrics_server``) and ``serve``'s ``/metrics`` answer
in OpenMetrics when the scraper asks for it, with a ``trace_id`` exemplar on
``loopguard_loop_detected_total`` and the waste counters. A real Prometheus with exemplar storage
scrapes them and returns those exemplars from ``/api/v1/query_exemplars``: the trace ids of the
looping runs, which the dashboard links to a trace data source.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _prometheus import (
    PROMETHEUS_AVAILABLE,
    SKIP_REASON,
    PrometheusServer,
    running_prometheus,
    wait_until,
)
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from test_receiver import post, to_json_doc

from otel_loopguard import LoopGuardConfig
from otel_loopguard.metrics import start_metrics_server
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.testing import AgentScript, LoopGuardHarness

TEMPLATE = "triage@v1"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
EXEMPLARS = ("loopguard_loop_detected_total", "loopguard_wasted_tool_calls_total",
             "loopguard_wasted_tool_seconds_total")


def _looping(agent: AgentScript) -> None:
    """Six identical searches with the same empty result: findings, then wasted calls."""
    for _ in range(6):
        agent.turn()
        agent.tool("search", {"q": "refunds"}, "no results")


def _healthy(agent: AgentScript) -> None:
    for i in range(3):
        agent.turn()
        agent.tool("search", {"q": f"topic {i}"}, f"facts {i}")


def _run(harness: LoopGuardHarness, body: Callable[[AgentScript], None],
         prompt: str = TEMPLATE) -> str:
    """Script one run; return its trace id (32 hex digits)."""
    with harness.run(prompt=prompt) as agent:
        body(agent)
    root = harness.exporter.get_finished_spans()[-1]
    return format(root.context.trace_id, "032x")


def _scrape(port: int, accept: str | None) -> tuple[str, str]:
    headers = {"Accept": accept} if accept else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def _exemplar_traces(prom: PrometheusServer, metric: str) -> set[str]:
    now = time.time()
    data = prom.api("/api/v1/query_exemplars", {"query": metric, "start": str(now - 600),
                                                "end": str(now + 60)})
    return {e["labels"]["trace_id"] for series in data for e in series["exemplars"]}


def _wait_for_exemplars(prom: PrometheusServer, metric: str) -> set[str]:
    return wait_until(lambda: _exemplar_traces(prom, metric), bool, 30.0,
                      what=f"exemplars of {metric}")


@pytest.fixture(name="live", scope="module")
def _live() -> Iterator[tuple[int, str, str]]:
    """The span processor's /metrics after a looping and a healthy run: (port, looping trace,
    healthy trace)."""
    registry = CollectorRegistry()
    harness = LoopGuardHarness()
    harness.provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), registry=registry, clock=harness.clock, raise_internal_errors=True))
    looping, healthy = _run(harness, _looping), _run(harness, _healthy)
    server = start_metrics_server(0, registry=registry)
    try:
        yield server.server_port, looping, healthy
    finally:
        server.shutdown()
        server.server_close()
        harness.shutdown()


class TestExposition:
    def test_openmetrics_carries_the_trace_id(self, live: tuple[int, str, str]) -> None:
        """Asked for OpenMetrics, /metrics has the looping run's trace id as the exemplar."""
        port, looping, _ = live
        content_type, body = _scrape(port, OPENMETRICS)
        assert content_type.startswith("application/openmetrics-text")
        for metric in EXEMPLARS:
            line = next(x for x in body.splitlines() if x.startswith(metric))
            assert f'# {{trace_id="{looping}"}}' in line, line

    def test_text_format_has_no_exemplar_and_no_trace_label(
            self, live: tuple[int, str, str]) -> None:
        """The classic text format carries no exemplar, and no trace id is ever a label."""
        port, looping, healthy = live
        content_type, body = _scrape(port, None)
        assert content_type.startswith("text/plain")
        assert looping not in body and healthy not in body and "trace_id" not in body

    def test_serve_negotiates_openmetrics(self) -> None:
        """serve's /metrics answers OpenMetrics with exemplars when asked, text otherwise."""
        harness = LoopGuardHarness()
        trace = _run(harness, _looping)
        options = ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0)
        with LoopGuardReceiver(options=options, registry=CollectorRegistry()) as receiver:
            _post(receiver.http_port, to_json_doc(harness.exporter.get_finished_spans()))
            wait_until(lambda: _scrape(receiver.http_port, OPENMETRICS)[1],
                       lambda body: "loopguard_loop_detected_total{" in body, 10.0,
                       what="serve's findings")
            content_type, body = _scrape(receiver.http_port, OPENMETRICS)
            assert content_type.startswith("application/openmetrics-text")
            assert f'# {{trace_id="{trace}"}}' in body
            content_type, body = _scrape(receiver.http_port, "text/plain")
            assert content_type.startswith("text/plain") and trace not in body
        harness.shutdown()


def _post(port: int, doc: dict[str, Any]) -> None:
    status, _, _ = post(port, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    assert status == 200


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.skipif(not PROMETHEUS_AVAILABLE, reason=SKIP_REASON)
class TestPrometheus:
    def test_query_exemplars_returns_the_looping_trace(
            self, live: tuple[int, str, str], tmp_path: Any) -> None:
        """Prometheus scrapes OpenMetrics and returns the looping run's trace id as the
        exemplar of the loop and waste counters; the healthy run's never appears."""
        port, looping, healthy = live
        with running_prometheus([f"127.0.0.1:{port}"], tmp_path=tmp_path,
                                flags=["--enable-feature=exemplar-storage"]) as prom:
            for metric in EXEMPLARS:
                assert _wait_for_exemplars(prom, metric) == {looping}
            assert _exemplar_traces(prom, "loopguard_tool_calls_total") == set()
            assert healthy not in json.dumps(prom.query("loopguard_loop_detected_total"))

    def test_serve_exemplars_through_prometheus(self, tmp_path: Any) -> None:
        """The same through serve: the trace a request carried comes back from Prometheus."""
        harness = LoopGuardHarness()
        trace = _run(harness, _looping)
        options = ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0)
        with LoopGuardReceiver(options=options, registry=CollectorRegistry()) as receiver:
            _post(receiver.http_port, to_json_doc(harness.exporter.get_finished_spans()))
            with running_prometheus([f"127.0.0.1:{receiver.http_port}"], tmp_path=tmp_path,
                                    flags=["--enable-feature=exemplar-storage"]) as prom:
                assert _wait_for_exemplars(prom, "loopguard_loop_detected_total") == {trace}
        harness.shutdown()


class TestEvidence:
    @pytest.mark.parametrize(("cap", "expected"), [(200, TEMPLATE), (1, "other")],
                             ids=["counted-as-itself", "folded-into-other"])
    def test_flagged_span_names_the_template_it_was_counted_under(
            self, cap: int, expected: str) -> None:
        """A flagged span's loopguard.prompt_template is the label its finding counted under
        (with a cap of 1 filled by an earlier template, ``other``)."""
        exporter = InMemorySpanExporter()
        harness = LoopGuardHarness()
        harness.provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig.create(max_prompt_templates=cap),
            downstream=SimpleSpanProcessor(exporter), registry=CollectorRegistry(),
            clock=harness.clock, raise_internal_errors=True))
        _run(harness, _healthy, prompt="first@v1")
        _run(harness, _looping)
        harness.shutdown()
        flagged = [s.attributes for s in exporter.get_finished_spans()
                   if s.attributes and "loopguard.code" in s.attributes]
        assert flagged
        assert {a["loopguard.prompt_template"] for a in flagged} == {expected}
