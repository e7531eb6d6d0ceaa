"""The OpenTelemetry APIs: findings as log events, and the counters through the metrics API.

Real SDK parts: a TracerProvider with the processor, a LoggerProvider with the in-memory log
exporter, a MeterProvider with the in-memory metric reader, and the SDK's OTLP/HTTP metric
exporter sending to a small OTLP receiver this test runs.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import metrics as metrics_api
from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, Counter

import otel_loopguard
from otel_loopguard import LoopGuardConfig
from otel_loopguard.evidence import EVENT_NAME
from otel_loopguard.exceptions import ConfigError
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.metrics._names import (
    BUILD_INFO,
    LABEL_OVERFLOW,
    LOOP_DETECTED,
    OPEN_RUNS,
    RUNS,
    RUNS_FLAGGED,
    TOOL_CALLS,
)
from otel_loopguard.metrics._otel import default_meter_provider, reset_built_provider
from otel_loopguard.processor import LoopGuardSpanProcessor

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage",
         "gen_ai.prompt.name": "support", "gen_ai.prompt.version": "v3"}
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


class _Threads(LogRecordProcessor):
    """Remembers the thread each log record was emitted on."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.names.append(threading.current_thread().name)

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Rig:
    """A tracer provider with the processor, and in-memory logs and metrics of its own."""

    def __init__(self, *, downstream: bool = True, meter_provider: Any = None,
                 background: bool | None = None, **config: Any) -> None:
        self.registry = CollectorRegistry()
        self.reader = InMemoryMetricReader()
        self.meter_provider = meter_provider or MeterProvider(metric_readers=[self.reader],
                                                              shutdown_on_exit=False)
        self.logs = InMemoryLogRecordExporter()
        self.threads = _Threads()
        self.logger_provider = LoggerProvider(shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.logger_provider.add_log_record_processor(self.threads)
        self.exporter = InMemorySpanExporter()
        export = SimpleSpanProcessor(self.exporter)
        self.provider = TracerProvider()
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(**config), downstream=export if downstream else None,
            registry=self.registry, meter_provider=self.meter_provider,
            logger_provider=self.logger_provider, raise_internal_errors=True,
            background=background)
        self.provider.add_span_processor(self.processor)
        if not downstream:
            self.provider.add_span_processor(export)
        self.tracer = self.provider.get_tracer("test")

    def loop(self, tools: tuple[str, ...] = ("search",) * 5) -> None:
        """One agent run calling ``tools`` in order, each with the same arguments and result."""
        with self.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            for tool in tools:
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.arguments": '{"q": "refund policy"}'}
                with self.tracer.start_as_current_span(f"execute_tool {tool}",
                                                       attributes=attrs) as span:
                    span.set_attribute("gen_ai.tool.call.result", "no results")
        self.provider.force_flush()

    def spans(self, name: str = "execute_tool search") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def otel_series(self) -> Series:
        """Every data point the meter provider holds, by (instrument name, attributes)."""
        data = self.reader.get_metrics_data()
        assert data is not None
        return {(m.name, frozenset((p.attributes or {}).items())): p.value
                for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                for p in m.data.data_points}

    def prometheus_series(self) -> Series:
        """Every counter sample (``_total``) of the registry, by (name, labels)."""
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in self.registry.collect() if family.type == "counter"
                for s in family.samples if s.name.endswith("_total")}


def _five_calls(processor: LoopGuardSpanProcessor) -> TracerProvider:
    """Return a tracer provider with ``processor`` after one run of five identical calls."""
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
        for _ in range(5):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "x"}):
                pass
    provider.force_flush()
    return provider


@pytest.fixture(name="rig")
def _rig() -> Iterator[Rig]:
    rig = Rig(evidence="both")
    yield rig
    rig.provider.shutdown()


def _loopguard(attributes: Any) -> dict[str, Any]:
    """The ``loopguard.*`` attributes, sequences as tuples (spans and logs store them so)."""
    return {k: tuple(v) if isinstance(v, list | tuple) else v
            for k, v in (attributes or {}).items() if k.startswith("loopguard.")}


class TestLogEvents:
    def test_one_event_per_finding_correlated_with_the_tool_span(self, rig: Rig) -> None:
        """Each finding is a loopguard.loop_detected log record with the tool span's ids."""
        rig.loop()
        flagged = [s for s in rig.spans() if "loopguard.action" in (s.attributes or {})]
        records = [r.log_record for r in rig.logs.get_finished_logs()]
        assert [r.event_name for r in records] == [EVENT_NAME] * 3
        assert [(r.trace_id, r.span_id) for r in records] == [
            (s.context.trace_id, s.context.span_id) for s in flagged]
        assert [r.trace_flags for r in records] == [s.context.trace_flags for s in flagged]
        assert [r.timestamp for r in records] == [s.end_time for s in flagged]

    def test_attributes_are_the_span_evidence(self, rig: Rig) -> None:
        """The record carries the very attributes the flagged span carries, nothing raw."""
        rig.loop()
        flagged = [s for s in rig.spans() if "loopguard.action" in (s.attributes or {})]
        records = [r.log_record for r in rig.logs.get_finished_logs()]
        assert [_loopguard(r.attributes) for r in records] == [
            _loopguard(s.attributes) for s in flagged]
        assert [r.attributes["loopguard.action"] for r in records] == ["warn", "replan", "stop"]
        assert "refund" not in str([dict(r.attributes or {}) for r in records])

    def test_severity_warn_and_a_short_body(self, rig: Rig) -> None:
        """Every finding (warn and above) is WARN; the body names the detector and action."""
        rig.loop()
        records = [r.log_record for r in rig.logs.get_finished_logs()]
        assert {(r.severity_number, r.severity_text) for r in records} == {
            (SeverityNumber.WARN, "WARN")}
        assert records[0].body == "loop detected by stagnation: warn"

    def test_emitted_on_the_worker_thread(self) -> None:
        """In observe mode with a batching downstream, records come from the worker thread."""
        rig = Rig(evidence="both", background=True)
        rig.loop()
        assert rig.processor._worker is not None
        assert rig.threads.names == ["otel-loopguard"] * 3
        assert threading.current_thread().name not in rig.threads.names
        rig.provider.shutdown()

    def test_logs_only_leaves_the_spans_as_they_were(self) -> None:
        """evidence = logs: the tool spans reach the exporter without loopguard attributes."""
        rig = Rig(evidence="logs")
        rig.loop()
        assert all(not _loopguard(s.attributes) for s in rig.exporter.get_finished_spans())
        records = [r.log_record for r in rig.logs.get_finished_logs()]
        assert [r.span_id for r in records] == [s.context.span_id for s in rig.spans()[2:]]
        rig.provider.shutdown()

    def test_logs_only_without_downstream_adds_no_span_event(self) -> None:
        """Without downstream=, evidence = logs puts no event on the agent span."""
        rig = Rig(evidence="logs", downstream=False)
        rig.loop()
        agent = rig.spans("invoke_agent triage")[0]
        assert not [e for e in agent.events if e.name == EVENT_NAME]
        records = [r.log_record for r in rig.logs.get_finished_logs()]
        assert [r.span_id for r in records] == [s.context.span_id for s in rig.spans()[2:]]
        assert rig.threads.names == [threading.current_thread().name] * 3  # inside span.end()
        rig.provider.shutdown()

    def test_spans_by_default_no_log_events(self) -> None:
        """The default (evidence = spans) emits no log record, even with a LoggerProvider."""
        rig = Rig()
        rig.loop()
        assert rig.logs.get_finished_logs() == ()
        assert [s.attributes.get("loopguard.action") for s in rig.spans()] == [
            None, None, "warn", "replan", "stop"]
        rig.provider.shutdown()

    def test_no_logger_provider_is_said_once(self, caplog: pytest.LogCaptureFixture) -> None:
        """With the global LoggerProvider unset, the first finding logs one line, no error."""
        from opentelemetry._logs import get_logger_provider
        from opentelemetry._logs._internal import ProxyLoggerProvider

        if not isinstance(get_logger_provider(), ProxyLoggerProvider):
            pytest.skip("a global LoggerProvider is set in this process")
        with caplog.at_level("WARNING", logger="otel_loopguard"):
            provider = _five_calls(LoopGuardSpanProcessor(
                LoopGuardConfig.create(evidence="logs"), registry=CollectorRegistry(),
                downstream=SimpleSpanProcessor(InMemorySpanExporter()),
                raise_internal_errors=True))
        said = [r.getMessage() for r in caplog.records if "LoggerProvider" in r.getMessage()]
        assert len(said) == 1 and "only counted in the metrics" in said[0]
        provider.shutdown()

    def test_a_logger_provider_without_processors_is_said_once(
            self, caplog: pytest.LogCaptureFixture) -> None:
        """An SDK LoggerProvider that exports nothing (OTEL_LOGS_EXPORTER=none under
        opentelemetry-instrument) gets the same one line, not silence."""
        from opentelemetry.sdk._logs import LoggerProvider

        with caplog.at_level("WARNING", logger="otel_loopguard"):
            provider = _five_calls(LoopGuardSpanProcessor(
                LoopGuardConfig.create(evidence="logs"), registry=CollectorRegistry(),
                downstream=SimpleSpanProcessor(InMemorySpanExporter()),
                raise_internal_errors=True, logger_provider=LoggerProvider()))
        said = [r.getMessage() for r in caplog.records if "LoggerProvider" in r.getMessage()]
        assert len(said) == 1 and "has no log record processor" in said[0]
        provider.shutdown()

    def test_a_logger_provider_that_exports_is_not_warned_about(
            self, rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
        from otel_loopguard.evidence import EvidenceLog
        from otel_loopguard.types import Action, Decision

        with caplog.at_level("WARNING", logger="otel_loopguard"):
            EvidenceLog(rig.logger_provider).emit(Decision(Action.WARN, "STAGNANT_RESULT"),
                                                  {"loopguard.action": "warn"}, None)
        assert not [r for r in caplog.records if "LoggerProvider" in r.getMessage()]
        assert len(rig.logs.get_finished_logs()) == 1

    def test_no_span_context_never_borrows_the_current_span(self, rig: Rig) -> None:
        """A finding without a span context is not correlated with whatever span is current."""
        from otel_loopguard.evidence import EvidenceLog
        from otel_loopguard.types import Action, Decision

        log = EvidenceLog(rig.logger_provider)
        with rig.tracer.start_as_current_span("unrelated"):
            log.emit(Decision(Action.WARN, "STAGNANT_RESULT"), {"loopguard.action": "warn"}, None)
        (record,) = [r.log_record for r in rig.logs.get_finished_logs()]
        assert (record.trace_id, record.span_id) == (0, 0)
        assert record.event_name == EVENT_NAME

    def test_an_api_without_event_name_is_a_config_error(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On an OpenTelemetry API older than 1.37 (``Logger.emit`` takes no ``event_name``),
        asking for log events is a one-line config error at start, not a failure per finding."""
        import otel_loopguard.evidence as evidence

        class OldLogger:
            def emit(self, record: Any) -> None: ...

        monkeypatch.setattr(evidence, "Logger", OldLogger)
        with pytest.raises(ConfigError, match=r"1\.37 or newer"):
            LoopGuardSpanProcessor(LoopGuardConfig.create(evidence="logs"),
                                   registry=CollectorRegistry())

    def test_evidence_setting_from_the_environment(self) -> None:
        """LOOPGUARD_EVIDENCE picks where findings go; a bad value is a one-line error."""
        assert LoopGuardConfig.from_env({"LOOPGUARD_EVIDENCE": "logs"}).evidence == "logs"
        with pytest.raises(ConfigError, match="LOOPGUARD_EVIDENCE must be one of"):
            LoopGuardConfig.from_env({"LOOPGUARD_EVIDENCE": "events"})


def _touch_every_counter(metrics: LoopGuardMetrics) -> None:
    """Add 2 to one series of every counter of ``metrics`` (any added later too)."""
    for value in vars(metrics).values():
        if isinstance(value, Counter):
            names = value._labelnames  # the counter's own label names
            (value.labels(*["x"] * len(names)) if names else value).inc(2)


class TestMetricsApi:
    def test_otel_series_equal_the_prometheus_series(self) -> None:
        """After the same spans, every counter has the same name, attributes and value."""
        rig = Rig(metrics_exporter="both", max_tools=2)
        rig.loop()
        rig.loop(("search", "lookup", "fetch", "fetch"))  # a third tool: over max_tools
        prometheus = rig.prometheus_series()
        every = rig.otel_series()
        otel = {key: value for key, value in every.items() if key[0] not in (OPEN_RUNS,
                                                                             BUILD_INFO)}
        assert otel == prometheus
        (build,) = [(labels, value) for (name, labels), value in every.items()
                    if name == BUILD_INFO]
        assert build == (frozenset({("version", otel_loopguard.__version__),
                                    ("python", platform.python_version())}), 1)
        names = {name for name, _ in otel}
        assert {TOOL_CALLS, LOOP_DETECTED, RUNS, RUNS_FLAGGED, LABEL_OVERFLOW} <= names
        assert otel[(TOOL_CALLS, frozenset({("prompt_template", "support@v3"),
                                            ("tool", "other")}))] == 2
        rig.provider.shutdown()

    def test_every_prometheus_metric_has_an_otel_twin(self) -> None:
        """Each metric LoopGuardMetrics registers (any added later too) is exported over OTel.

        Every counter is touched once, so each has a series on both sides.
        """
        registry, reader = CollectorRegistry(), InMemoryMetricReader()
        metrics = LoopGuardMetrics(registry, meter_provider=MeterProvider(
            metric_readers=[reader], shutdown_on_exit=False))
        metrics.track_open_runs(lambda: 3)
        _touch_every_counter(metrics)
        data = reader.get_metrics_data()
        assert data is not None
        otel = {m.name: [p.value for p in m.data.data_points]
                for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        prometheus = {f"{f.name}_total" if f.type == "counter" else f.name:
                      [s.value for s in f.samples if not s.name.endswith("_created")]
                      for f in registry.collect()}
        assert otel == prometheus
        assert otel[OPEN_RUNS] == [3]
        assert {TOOL_CALLS, LOOP_DETECTED, RUNS} <= set(otel)

    def test_two_processors_on_one_meter_provider_add_up(self) -> None:
        """Two processors with registries of their own, one MeterProvider: OTLP has both.

        The SDK keeps the first instrument of a name and ignores a second one's callback, so
        the second processor's counts never reached OTLP; the instruments now add them up.
        """
        reader = InMemoryMetricReader()
        shared = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        first = Rig(metrics_exporter="both", meter_provider=shared)
        second = Rig(metrics_exporter="both", meter_provider=shared)
        first.loop()
        second.loop()
        second.loop(("lookup",) * 3)
        assert second.processor.metrics is not first.processor.metrics
        expected: Series = {}
        for rig in (first, second):
            for key, value in rig.prometheus_series().items():
                expected[key] = expected.get(key, 0) + value
        data = reader.get_metrics_data()
        assert data is not None
        otel = {(m.name, frozenset((p.attributes or {}).items())): p.value
                for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                for p in m.data.data_points if m.name not in (OPEN_RUNS, BUILD_INFO)}
        assert otel == expected
        assert otel[(TOOL_CALLS, frozenset({("prompt_template", "support@v3"),
                                            ("tool", "search")}))] == 10
        first.provider.shutdown()
        second.provider.shutdown()

    def test_instruments_have_ucum_units(self) -> None:
        """Counts have an annotation unit, seconds `s`; cost and build info none.

        A unit in braces adds no suffix in Prometheus's OTLP translation, nor `s` to a name
        with `seconds` in it, so the names stay those of /metrics.
        """
        reader = InMemoryMetricReader()
        metrics = LoopGuardMetrics(None, meter_provider=MeterProvider(
            metric_readers=[reader], shutdown_on_exit=False))
        _touch_every_counter(metrics)
        metrics.track_open_runs(lambda: 1)
        data = reader.get_metrics_data()
        assert data is not None
        units = {m.name: m.unit for rm in data.resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics}
        assert units == {
            "loopguard_tool_calls_total": "{call}",
            "loopguard_loop_detected_total": "{finding}",
            "loopguard_budget_exceeded_total": "{finding}",
            "loopguard_runs_total": "{run}",
            "loopguard_runs_flagged_total": "{run}",
            "loopguard_enforced_total": "{action}",
            "loopguard_evicted_runs_total": "{run}",
            "loopguard_internal_errors_total": "{error}",
            "loopguard_label_overflow_total": "{value}",
            "loopguard_skipped_spans_total": "{span}",
            "loopguard_unparented_tool_calls_total": "{call}",
            "loopguard_wasted_tool_calls_total": "{call}",
            "loopguard_wasted_tokens_total": "{token}",
            "loopguard_wasted_tool_seconds_total": "s",
            "loopguard_wasted_cost_total": "",
            "loopguard_open_runs": "{run}",
            "loopguard_build_info": "",
        }

    def test_open_runs_gauge(self) -> None:
        """loopguard_open_runs is read at collection time, as an additive (up-down) sum.

        A count of runs held adds up across processes, so OpenTelemetry's kind for it is the
        up-down counter (a non-monotonic sum), not the gauge; Prometheus sees a gauge either way.
        """
        rig = Rig(metrics_exporter="both")
        data = rig.reader.get_metrics_data()
        assert data is not None
        (open_runs,) = [m.data for rm in data.resource_metrics for sm in rm.scope_metrics
                        for m in sm.metrics if m.name == OPEN_RUNS]
        assert isinstance(open_runs, Sum)
        assert not open_runs.is_monotonic
        assert open_runs.aggregation_temporality is AggregationTemporality.CUMULATIVE
        with rig.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            with rig.tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}):
                pass
            rig.provider.force_flush()
            assert rig.otel_series()[(OPEN_RUNS, frozenset())] == 1
        rig.provider.force_flush()
        assert rig.otel_series()[(OPEN_RUNS, frozenset())] == 0
        rig.provider.shutdown()

    def test_otlp_only_registers_nothing_in_prometheus(self) -> None:
        """metrics_exporter = otlp: the registry stays empty; the meter provider counts."""
        rig = Rig(metrics_exporter="otlp")
        rig.loop()
        assert rig.prometheus_series() == {}
        assert list(rig.registry.collect()) == []
        assert rig.otel_series()[(TOOL_CALLS, frozenset({("prompt_template", "support@v3"),
                                                         ("tool", "search")}))] == 5
        rig.provider.shutdown()

    def test_prometheus_by_default_records_nothing_in_otel(self) -> None:
        """The default (prometheus) leaves a passed meter provider untouched."""
        rig = Rig()
        rig.loop()
        assert rig.reader.get_metrics_data() is None or rig.otel_series() == {}
        assert rig.prometheus_series()
        rig.provider.shutdown()

    def test_more_series_than_the_sdk_keeps_is_warned_once(
            self, caplog: pytest.LogCaptureFixture) -> None:
        """A provider of the user's that would fold series past 2,000 is named in a warning."""
        reader = InMemoryMetricReader()
        metrics = LoopGuardMetrics(None, meter_provider=MeterProvider(
            metric_readers=[reader], shutdown_on_exit=False))
        for tool in range(150):
            metrics.record_call("t", f"tool{tool}", first=False)
        reader.collect()
        assert not caplog.records
        metrics = LoopGuardMetrics(None, max_tools=3000, meter_provider=MeterProvider(
            metric_readers=[reader := InMemoryMetricReader()], shutdown_on_exit=False))
        for tool in range(2001):
            metrics.record_call("t", f"tool{tool}", first=False)
        reader.collect()
        reader.collect()
        (record,) = caplog.records
        assert record.levelname == "WARNING"
        assert "loopguard_tool_calls_total has 2001 series" in record.getMessage()
        assert "View(meter_name='otel_loopguard', aggregation_cardinality_limit=" in \
            record.getMessage()

    def test_shared_metrics_gain_a_meter_provider_later(self) -> None:
        """A processor asking for OTLP on a registry already shared adds the export to it."""
        registry = CollectorRegistry()
        reader = InMemoryMetricReader()
        first = LoopGuardMetrics.shared(registry)
        second = LoopGuardMetrics.shared(registry, meter_provider=MeterProvider(
            metric_readers=[reader], shutdown_on_exit=False))
        assert second is first
        first.record_call("t", "search", first=True)
        data = reader.get_metrics_data()
        assert data is not None
        names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics}
        assert {TOOL_CALLS, RUNS} <= names
        assert registry.get_sample_value(TOOL_CALLS, {"prompt_template": "t",
                                                      "tool": "search"}) == 1


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP metrics receiver: decodes each ExportMetricsServiceRequest it is sent."""

    requests: list[ExportMetricsServiceRequest]

    def do_POST(self) -> None:  # the http.server handler name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        self.requests.append(request)
        reply = ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200 if self.path == "/v1/metrics" else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:  # the base signature
        """Keep the test output quiet."""


@pytest.fixture(name="receiver")
def _otlp_receiver() -> Iterator[tuple[str, list[ExportMetricsServiceRequest]]]:
    requests: list[ExportMetricsServiceRequest] = []
    handler = type("Handler", (_Receiver,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/metrics", requests
    server.shutdown()
    server.server_close()


@pytest.fixture(name="no_global_meter_provider")
def _no_global_meter_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No MeterProvider set globally, and no provider built by an earlier test."""
    monkeypatch.setattr(metrics_api, "get_meter_provider", metrics_api.NoOpMeterProvider)
    for provider in reset_built_provider():
        provider.shutdown()
    yield
    for provider in reset_built_provider():
        provider.shutdown()


@pytest.mark.usefixtures("no_global_meter_provider")
class TestOtlpExport:
    def test_counters_arrive_at_an_otlp_receiver(
            self, receiver: tuple[str, list[ExportMetricsServiceRequest]],
            monkeypatch: pytest.MonkeyPatch) -> None:
        """With no MeterProvider configured, loopguard builds one from OTEL_EXPORTER_OTLP_*."""
        url, requests = receiver
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")
        processor = LoopGuardSpanProcessor(LoopGuardConfig.create(metrics_exporter="otlp"),
                                           downstream=SimpleSpanProcessor(InMemorySpanExporter()),
                                           raise_internal_errors=True)
        provider = _five_calls(processor)
        (built,) = reset_built_provider()
        assert processor.metrics is not None and processor.metrics.meter_provider is built
        assert built.force_flush()
        built.shutdown()
        points: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for request in requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    assert sm.scope.name == "otel_loopguard"
                    for metric in sm.metrics:
                        if metric.WhichOneof("data") == "sum":
                            assert metric.sum.is_monotonic is (metric.name != OPEN_RUNS)
                            for point in metric.sum.data_points:
                                attrs = frozenset((a.key, a.value.string_value)
                                                  for a in point.attributes)
                                points[(metric.name, attrs)] = getattr(
                                    point, point.WhichOneof("value"))
        assert points[(TOOL_CALLS, frozenset({("prompt_template", "support@v3"),
                                              ("tool", "search")}))] == 5
        assert points[(RUNS, frozenset({("prompt_template", "support@v3")}))] == 1
        assert points[(LOOP_DETECTED, frozenset({
            ("prompt_template", "support@v3"), ("detector", "stagnation"), ("action", "stop"),
            ("mode", "observe")}))] == 1
        provider.shutdown()

    def test_every_series_arrives_past_the_sdk_attribute_set_limit(
            self, receiver: tuple[str, list[ExportMetricsServiceRequest]],
            monkeypatch: pytest.MonkeyPatch) -> None:
        """60 templates x 41 tools (2,460 series, within loopguard's caps) arrive one by one.

        The SDK keeps 2,000 attribute sets per metric by default and folds the rest into a
        point marked otel.metric.overflow; the provider loopguard builds lifts that for its
        meter, so OTLP has the series Prometheus has.
        """
        url, requests = receiver
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", url)
        built = default_meter_provider()
        metrics = LoopGuardMetrics(None, meter_provider=built)
        for template in range(60):
            for tool in range(41):
                metrics.record_call(f"t{template}", f"tool{tool}", first=tool == 0)
        assert built.force_flush()
        points = [point for request in requests for rm in request.resource_metrics
                  for sm in rm.scope_metrics for metric in sm.metrics
                  if metric.name == TOOL_CALLS for point in metric.sum.data_points]
        keys = [frozenset((a.key, a.value.string_value) for a in point.attributes)
                for point in points]
        assert not [a for point in points for a in point.attributes
                    if a.key == "otel.metric.overflow"]
        assert len(set(keys)) == len(keys) == 60 * 41
        assert sum(point.as_double for point in points) == 60 * 41

    def test_missing_exporter_package_is_a_one_line_error(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without opentelemetry-exporter-otlp, otlp export fails naming the package."""
        monkeypatch.setitem(sys.modules,
                            "opentelemetry.exporter.otlp.proto.http.metric_exporter", None)
        with pytest.raises(ConfigError, match="needs the opentelemetry-exporter-otlp package"):
            default_meter_provider()

    def test_unknown_protocol_is_a_one_line_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An OTLP protocol loopguard cannot export with is named in the error."""
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json")
        with pytest.raises(ConfigError, match="'http/json'"):
            default_meter_provider()

    def test_global_meter_provider_wins(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A MeterProvider set globally is the one the counters go to."""
        configured = MeterProvider(shutdown_on_exit=False)
        monkeypatch.setattr(metrics_api, "get_meter_provider", lambda: configured)
        assert default_meter_provider() is configured
        assert reset_built_provider() == []


class TestServe:
    def test_serve_counts_into_the_meter_provider(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """serve with metrics_exporter = otlp: its counters go to the global MeterProvider.

        Its own intake metrics (requests, spans) stay on the Prometheus registry.
        """
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions

        reader = InMemoryMetricReader()
        configured = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        monkeypatch.setattr(metrics_api, "get_meter_provider", lambda: configured)
        agent = Rig()  # its spans only: the processor's own metrics are on its registry
        agent.loop()
        registry = CollectorRegistry()
        receiver = LoopGuardReceiver(
            LoopGuardConfig.create(metrics_exporter="otlp"), registry=registry,
            options=ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0.05))
        with receiver:
            exporter = OTLPSpanExporter(endpoint=f"{receiver.http_url}/v1/traces")
            exporter.export(agent.exporter.get_finished_spans())
            exporter.shutdown()
            assert receiver.flush(10)
        data = reader.get_metrics_data()
        assert data is not None
        points = {(m.name, frozenset((p.attributes or {}).items())): p.value
                  for rm in data.resource_metrics for sm in rm.scope_metrics
                  for m in sm.metrics for p in m.data.data_points}
        # serve's series name the sending service (the SDK's default resource's here)
        service = agent.provider.resource.attributes["service.name"]
        labels = {"prompt_template": "support@v3", "service_name": service, "tool": "search"}
        assert points[(TOOL_CALLS, frozenset(labels.items()))] == 5
        assert registry.get_sample_value(TOOL_CALLS, labels) is None
        assert registry.get_sample_value("loopguard_receiver_spans_total",
                                         {"outcome": "accepted"}) == 6
        agent.provider.shutdown()


def test_a_meter_provider_the_setting_leaves_unused_is_named_in_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    """metrics_exporter=prometheus with a meter_provider: one warning that it goes unused."""
    from prometheus_client import CollectorRegistry

    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    with caplog.at_level(logging.WARNING, logger="otel_loopguard.metrics"):
        processor = LoopGuardSpanProcessor(LoopGuardConfig.create(metrics_exporter="prometheus"),
                                           registry=CollectorRegistry(),
                                           meter_provider=provider)
    processor.shutdown()
    assert [r.getMessage() for r in caplog.records if "meter_provider" in r.getMessage()] == [
        "otel-loopguard: the meter_provider passed is not used: metrics_exporter is "
        "'prometheus'; set it to 'otlp' or 'both' (LOOPGUARD_METRICS_EXPORTER) to record "
        "metrics there"]
