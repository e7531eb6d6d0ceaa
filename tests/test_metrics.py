"""LoopGuardMetrics: capped labels, at-least flags, scrape-time gauge, exposition, multiprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from otel_loopguard import LoopGuardConfig
from otel_loopguard.metrics import LabelCap, LoopGuardMetrics
from otel_loopguard.metrics._names import (
    BUDGET_EXCEEDED,
    BUILD_INFO,
    ENFORCED,
    EVICTED_RUNS,
    INTERNAL_ERRORS,
    LABEL_OVERFLOW,
    LOOP_DETECTED,
    METRIC_NAMES,
    OPEN_RUNS,
    RUNS,
    RUNS_FLAGGED,
    SKIPPED_SPANS,
    TOOL_CALLS,
    UNPARENTED_TOOL_CALLS,
    WASTED_COST,
    WASTED_TOKENS,
    WASTED_TOOL_CALLS,
    WASTED_TOOL_SECONDS,
)
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision, Evidence
from otel_loopguard.waste import Waste

PROMTOOL = shutil.which("promtool")
REPO = Path(__file__).resolve().parent.parent
TPL = "support_triage@v3"


@pytest.fixture(name="registry")
def _registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(name="metrics")
def _metrics(registry: CollectorRegistry) -> LoopGuardMetrics:
    return LoopGuardMetrics(registry, max_prompt_templates=3, max_tools=2)


def _samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    """Every sample but the ``_created`` timestamps."""
    return [(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples
            if not s.name.endswith("_created")]


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def _exercise(metrics: LoopGuardMetrics) -> None:
    """Touch every metric once (overflow by a third tool over max_tools=2)."""
    for tool in ("search_kb", "crm_lookup", "get_ticket"):
        metrics.record_call(TPL, tool, first=tool == "search_kb")
    metrics.record_finding(TPL, "stagnation", Action.STOP, "observe", Action.CONTINUE)
    metrics.record_budget(TPL, "run", Action.WARN, "observe")
    metrics.record_enforcement(TPL, "abort")
    metrics.record_eviction("ttl", 2)
    metrics.record_internal_error("on_end")
    metrics.record_skipped("queue_full")
    metrics.record_unparented("trace")
    metrics.record_waste(TPL, Waste(3, 3, 3000, 150, 1.5, {"USD": 0.009}))
    metrics.track_open_runs(lambda: 4)


class TestLabelCap:
    """LabelCap bounds one label's values."""

    def test_keeps_values_up_to_limit_then_other(self) -> None:
        """The first `limit` values pass; later ones become `other` and call on_overflow."""
        overflowed: list[str] = []
        cap = LabelCap("tool", 2, overflowed.append)
        assert [cap(v) for v in ("a", "b", "a", "c", "b", "d")] == [
            "a",
            "b",
            "a",
            "other",
            "b",
            "other",
        ]
        assert overflowed == ["tool", "tool"]

    @pytest.mark.parametrize("value", [None, ""], ids=["none", "empty"])
    def test_missing_value_is_unknown(self, value: str | None) -> None:
        """A missing or empty value is `unknown` and does not use up the cap."""
        cap = LabelCap("prompt_template", 1, lambda _: None)
        assert cap(value) == "unknown"
        assert cap("x@v1") == "x@v1"

    def test_reserved_values_never_overflow(self) -> None:
        """`unknown` and `other` themselves always pass, even when the cap is full."""
        overflowed: list[str] = []
        cap = LabelCap("tool", 1, overflowed.append)
        cap("a")
        assert (cap("unknown"), cap("other")) == ("unknown", "other")
        assert overflowed == []

    def test_concurrent_values_respect_limit(self) -> None:
        """32 threads adding distinct values get exactly `limit` of them through."""
        cap = LabelCap("tool", 10, lambda _: None)
        results: list[str] = []
        lock = threading.Lock()

        def add(i: int) -> None:
            value = cap(f"tool-{i}")
            with lock:
                results.append(value)

        threads = [threading.Thread(target=add, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len([r for r in results if r != "other"]) == 10

    def test_overflow_counter(self, metrics: LoopGuardMetrics, registry: CollectorRegistry) -> None:
        """Tools over max_tools count as `other` and in label_overflow_total{label="tool"}."""
        for tool in ("a", "b", "c", "d"):
            metrics.record_call(TPL, tool, first=False)
        assert _value(registry, TOOL_CALLS, prompt_template=TPL, tool="other") == 2
        assert _value(registry, LABEL_OVERFLOW, label="tool") == 2
        assert _value(registry, LABEL_OVERFLOW, label="prompt_template") == 0

    def test_template_cap(self, metrics: LoopGuardMetrics, registry: CollectorRegistry) -> None:
        """Templates over max_prompt_templates become `other`; a missing one is `unknown`."""
        for template in ("a@v1", "b@v1", "c@v1", "d@v1", None):
            metrics.record_call(template, "t", first=True)
        assert _value(registry, RUNS, prompt_template="other") == 1
        assert _value(registry, RUNS, prompt_template="unknown") == 1
        assert _value(registry, LABEL_OVERFLOW, label="prompt_template") == 1

    def test_folded_finding_counts_one_overflow(self) -> None:
        """A finding of a template over the cap is one increment under `other`, so one overflow,
        as a tool call is; naming its label for the span's evidence counted it a second time."""
        registry = CollectorRegistry()
        metrics = LoopGuardMetrics(registry, max_prompt_templates=1)
        metrics.record_call("a@v1", "search", first=True)
        repeat = Evidence("repeat", "REPEAT", Action.WARN, "search", 3)
        label = metrics.record_decision("b@v1", Decision(Action.WARN, evidence=(repeat,)),
                                        "observe", Action.CONTINUE)
        assert label == "other"
        assert _value(registry, LOOP_DETECTED, prompt_template="other", detector="repeat",
                      action="warn", mode="observe") == 1
        assert _value(registry, LABEL_OVERFLOW, label="prompt_template") == 1

    def test_record_calls_counts_as_many_record_call(self) -> None:
        """record_calls(n) leaves the series and overflow counts n record_call calls leave."""
        calls = [("a@v1", "x", True), ("b@v1", "y", False), ("c@v1", "x", True),
                 ("d@v1", "z", False), ("c@v1", "x", False)]
        one, many = CollectorRegistry(), CollectorRegistry()
        single = LoopGuardMetrics(one, max_prompt_templates=3, max_tools=2)
        batched = LoopGuardMetrics(many, max_prompt_templates=3, max_tools=2)
        counts: dict[tuple[str, str], list[int]] = {}
        for template, tool, first in calls:
            single.record_call(template, tool, first=first)
            entry = counts.setdefault((template, tool), [0, 0])
            entry[0] += 1
            entry[1] += first
        for (template, tool), (count, runs) in counts.items():
            batched.record_calls(template, tool, count, runs=runs)
        assert _samples(one) == _samples(many)


class TestRecordFinding:
    """record_finding counts hints, and each run once per action it reached."""

    def test_warn_then_stop_counts_each_level_once(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """A run going warn then stop counts once each in runs_flagged for warn, replan, stop."""
        metrics.record_finding(TPL, "stagnation", Action.WARN, "observe", Action.CONTINUE)
        metrics.record_finding(TPL, "stagnation", Action.STOP, "observe", Action.WARN)
        flagged = {
            a: _value(registry, RUNS_FLAGGED, prompt_template=TPL, action=a)
            for a in ("warn", "replan", "stop")
        }
        assert flagged == {"warn": 1, "replan": 1, "stop": 1}
        assert (
            _value(
                registry,
                LOOP_DETECTED,
                prompt_template=TPL,
                detector="stagnation",
                action="stop",
                mode="observe",
            )
            == 1
        )

    def test_second_stop_counts_hint_only(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """A second stop in the same run adds a hint but no runs_flagged sample."""
        metrics.record_finding(TPL, "failure", Action.STOP, "observe", Action.CONTINUE)
        metrics.record_finding(TPL, "failure", Action.STOP, "observe", Action.STOP)
        for action in ("warn", "replan", "stop"):
            assert _value(registry, RUNS_FLAGGED, prompt_template=TPL, action=action) == 1
        assert (
            _value(
                registry,
                LOOP_DETECTED,
                prompt_template=TPL,
                detector="failure",
                action="stop",
                mode="observe",
            )
            == 2
        )

    def test_lower_action_after_higher_counts_nothing(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """A warn after the run already reached replan leaves runs_flagged unchanged."""
        metrics.record_finding(TPL, "cycle", Action.REPLAN, "observe", Action.CONTINUE)
        metrics.record_finding(TPL, "cycle", Action.WARN, "observe", Action.REPLAN)
        assert _value(registry, RUNS_FLAGGED, prompt_template=TPL, action="warn") == 1
        assert _value(registry, RUNS_FLAGGED, prompt_template=TPL, action="replan") == 1
        assert _value(registry, RUNS_FLAGGED, prompt_template=TPL, action="stop") == 0


class TestOpenRuns:
    """loopguard_open_runs is computed at scrape time."""

    def test_reads_sizes_at_scrape(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """The gauge sums every tracked size callback each time the registry is collected."""
        sizes = [1, 2]
        metrics.track_open_runs(lambda: sizes[0])
        metrics.track_open_runs(lambda: sizes[1])
        assert _value(registry, OPEN_RUNS) == 3
        sizes[:] = [5, 0]
        assert _value(registry, OPEN_RUNS) == 5

    def test_failing_size_is_skipped(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """A size callback that raises is ignored, so the scrape still succeeds."""
        metrics.track_open_runs(lambda: 1 // 0)
        metrics.track_open_runs(lambda: 2)
        assert _value(registry, OPEN_RUNS) == 2

    def test_follows_processor_runs(self, registry: CollectorRegistry) -> None:
        """With a real TracerProvider, a run is open while its root span is, gone once it ends."""
        provider = TracerProvider()
        provider.add_span_processor(
            LoopGuardSpanProcessor(LoopGuardConfig(), registry=registry, raise_internal_errors=True)
        )
        tracer = provider.get_tracer("test")
        try:
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
            with tracer.start_as_current_span("invoke_agent a", attributes=attrs):
                tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_kb"}
                with tracer.start_as_current_span("execute_tool search_kb", attributes=tool):
                    pass
                assert _value(registry, OPEN_RUNS) == 1
            assert _value(registry, OPEN_RUNS) == 0
        finally:
            provider.shutdown()


    def test_shut_down_processor_stops_counting(self, registry: CollectorRegistry) -> None:
        """Runs still open when their processor's provider shut down are no longer open runs,
        and the shared metrics no longer hold that processor (nor its runs) in memory."""
        import gc
        import weakref

        from opentelemetry import trace

        def open_run(provider: TracerProvider) -> None:
            tracer = provider.get_tracer("test")
            root = tracer.start_span("invoke_agent a")  # never ends: the run stays open
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_kb"}
            with tracer.start_as_current_span("execute_tool search_kb", attributes=tool,
                                              context=trace.set_span_in_context(root)):
                pass

        def processor_on(provider: TracerProvider) -> LoopGuardSpanProcessor:
            processor = LoopGuardSpanProcessor(LoopGuardConfig(), registry=registry,
                                               raise_internal_errors=True)
            provider.add_span_processor(processor)
            return processor

        old, kept = TracerProvider(), TracerProvider()
        gone = weakref.ref(processor_on(old))
        processor_on(kept)
        try:
            open_run(old)
            open_run(kept)
            assert _value(registry, OPEN_RUNS) == 2
            old.shutdown()
            assert _value(registry, OPEN_RUNS) == 1
            del old
            gc.collect()
            assert gone() is None
        finally:
            kept.shutdown()
        assert _value(registry, OPEN_RUNS) == 0


class TestExposition:
    """The text exposition of a registry."""

    def test_every_metric_name_exposed(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """After each metric is exercised, every name in METRIC_NAMES appears as a sample name."""
        _exercise(metrics)
        names = {s.name for family in registry.collect() for s in family.samples}
        assert names >= METRIC_NAMES
        assert {
            TOOL_CALLS,
            LOOP_DETECTED,
            BUDGET_EXCEEDED,
            RUNS,
            RUNS_FLAGGED,
            ENFORCED,
            EVICTED_RUNS,
            INTERNAL_ERRORS,
            LABEL_OVERFLOW,
            OPEN_RUNS,
            SKIPPED_SPANS,
            UNPARENTED_TOOL_CALLS,
            WASTED_TOOL_CALLS,
            WASTED_TOKENS,
            WASTED_TOOL_SECONDS,
            WASTED_COST,
            BUILD_INFO,
        } == METRIC_NAMES

    @pytest.mark.skipif(PROMTOOL is None, reason="promtool not found (apt-get install prometheus)")
    def test_promtool_check_metrics(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """`promtool check metrics` accepts the exposition with no lint findings."""
        _exercise(metrics)
        assert PROMTOOL is not None
        proc = subprocess.run(
            [PROMTOOL, "check", "metrics"],
            input=generate_latest(registry),
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout + proc.stderr == b""


    def test_openmetrics_parses_and_declares_the_seconds_unit(
        self, metrics: LoopGuardMetrics, registry: CollectorRegistry
    ) -> None:
        """The OpenMetrics exposition parses; `# UNIT` says which counter counts seconds."""
        _exercise(metrics)
        families = {f.name: f for f in text_string_to_metric_families(
            generate_openmetrics(registry).decode())}
        assert {f"{f.name}_total" if f.type == "counter" else f.name
                for f in families.values()} == METRIC_NAMES
        units = {name: f.unit for name, f in families.items() if f.unit}
        assert units == {"loopguard_wasted_tool_seconds": "seconds"}


_MULTIPROCESS_SCRIPT = textwrap.dedent(
    """
    import json, os
    from prometheus_client import CollectorRegistry, multiprocess
    from otel_loopguard.metrics import LoopGuardMetrics

    metrics = LoopGuardMetrics(registry=None)  # created before fork, as with gunicorn --preload
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            for i in range(100):
                metrics.record_call("tpl@v1", "search_kb", first=i == 0)
            metrics.set_open_runs(2)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0

    def sample(name, **labels):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # reads the .db files at each collect
        return registry.get_sample_value(name, labels)

    result = {
        "multiprocess": metrics.multiprocess,
        "tool_calls": sample(
            "loopguard_tool_calls_total", prompt_template="tpl@v1", tool="search_kb"),
        "runs": sample("loopguard_runs_total", prompt_template="tpl@v1"),
        "open_before": sample("loopguard_open_runs"),
    }
    for pid in pids:
        multiprocess.mark_process_dead(pid)
    result["open_after"] = sample("loopguard_open_runs")
    result["tool_calls_after"] = sample(
        "loopguard_tool_calls_total", prompt_template="tpl@v1", tool="search_kb")
    print(json.dumps(result))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
class TestMultiprocess:
    """PROMETHEUS_MULTIPROC_DIR mode, in a subprocess: the env var precedes every metric."""

    def test_forked_workers_sum(self, tmp_path: Path) -> None:
        """3 forked workers x 100 calls sum to 300; open_runs is a livesum cleared when they die."""
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-c", _MULTIPROCESS_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result == {
            "multiprocess": True,
            "tool_calls": 300.0,
            "runs": 3.0,
            "open_before": 6.0,
            "open_after": 0.0,
            "tool_calls_after": 300.0,
        }
        # one file per worker process, and the parent's: its series of known label values,
        # made at 0 when the metrics were (a worker writes its own values to its own file)
        assert len(list(tmp_path.glob("counter_*.db"))) == 4


    def test_a_removed_directory_cannot_lose_the_spans_at_shutdown(self, tmp_path: Path) -> None:
        """A forked worker whose multiprocess directory was removed (cleared at a deploy while it
        ran) cannot write a metric: shutdown still shuts the exporting processor down, so the
        spans it holds are exported, and nothing is raised at exit."""
        metrics_dir, out = tmp_path / "multiproc", tmp_path / "spans.txt"
        metrics_dir.mkdir()
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", _REMOVED_DIR_SCRIPT, str(out)], env=env,
                              capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert out.read_text().split() == ["execute_tool", "invoke_agent"]
        assert "Exception ignored in atexit" not in proc.stderr, proc.stderr

    def test_open_runs_add_up_over_the_processors_of_a_process(self, tmp_path: Path) -> None:
        """Two processors sharing the metrics of one process: one holds a run, the other opens
        and closes one. The multiprocess gauge reads 1, as the scrape-time gauge does without
        the variable; each holder set it to its own count, so the last one's 0 hid the other's
        open run."""
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", _TWO_PROCESSORS_SCRIPT], env=env,
                              capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"multiprocess": True, "open": 1.0}
        env.pop("PROMETHEUS_MULTIPROC_DIR")
        proc = subprocess.run([sys.executable, "-c", _TWO_PROCESSORS_SCRIPT], env=env,
                              capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"multiprocess": False, "open": 1.0}


_TWO_PROCESSORS_SCRIPT = textwrap.dedent(
    """
    import json, os
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
    from otel_loopguard import LoopGuardSpanProcessor
    from otel_loopguard.testing import LoopGuardHarness

    first, second = LoopGuardHarness(), LoopGuardHarness()
    processors = [LoopGuardSpanProcessor(clock=h.clock) for h in (first, second)]
    for harness, processor in zip((first, second), processors):
        harness.provider.add_span_processor(processor)
    held = first.run(prompt="triage@v1")
    held.__enter__().tool("search", {"q": "a"}, "hits")  # its root span stays open
    with second.run(prompt="faq@v1") as agent:  # opened and closed
        agent.tool("search", {"q": "b"}, "hits")
    registry = REGISTRY
    if processors[0].metrics.multiprocess:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    print(json.dumps({"multiprocess": processors[0].metrics.multiprocess,
                      "open": registry.get_sample_value("loopguard_open_runs")}))
    """
)


_REMOVED_DIR_SCRIPT = textwrap.dedent(
    """
    import os, shutil, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    from otel_loopguard import LoopGuardSpanProcessor

    out = open(sys.argv[1], "w")
    provider = TracerProvider()  # shut down at exit (atexit)
    provider.add_span_processor(LoopGuardSpanProcessor(downstream=BatchSpanProcessor(
        ConsoleSpanExporter(out=out, formatter=lambda span: span.name.split()[0] + "\\n"))))
    pid = os.fork()  # a pre-fork worker: it writes metrics to files of its own pid
    if pid:
        sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent triage"):
        with tracer.start_as_current_span("execute_tool search") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "search")
    """
)


_LATE_VARIABLE_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import prometheus_client  # imported first: it chooses its mode now, without the variable
    from prometheus_client import REGISTRY
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
    from opentelemetry.sdk.trace import TracerProvider
    from otel_loopguard import LoopGuardSpanProcessor

    provider = TracerProvider()
    processor = LoopGuardSpanProcessor()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    root = tracer.start_span("invoke_agent triage")
    for _ in range(2):
        with tracer.start_as_current_span(
                "execute_tool search", context=__import__("opentelemetry").trace
                .set_span_in_context(root)) as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "search")
    print(json.dumps({
        "multiprocess": processor.metrics.multiprocess,
        "files": sorted(os.listdir(sys.argv[1])),
        "tool_calls": REGISTRY.get_sample_value(
            "loopguard_tool_calls_total", {"prompt_template": "unknown", "tool": "search"}),
        "open_runs": REGISTRY.get_sample_value("loopguard_open_runs"),
    }))
    """
)


def test_multiproc_variable_set_after_prometheus_client_was_imported(tmp_path: Path) -> None:
    """prometheus-client chooses its mode at import: a PROMETHEUS_MULTIPROC_DIR set later writes
    no files, so loopguard stays in single-process mode (open runs counted at scrape time) and
    says why a multiprocess /metrics would not show this process's values."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.run([sys.executable, "-c", _LATE_VARIABLE_SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"multiprocess": False, "files": [], "tool_calls": 2.0,
                                       "open_runs": 1.0}
    assert "PROMETHEUS_MULTIPROC_DIR is set, but prometheus_client was imported before it" \
        in proc.stderr


def test_label_values_from_spans_cannot_break_the_exposition() -> None:
    """A tool name with a lone surrogate, or a megabyte long, still renders: the surrogate is
    escaped and the value shortened to 128 characters with a hash of the whole."""
    from otel_loopguard.metrics import LoopGuardMetrics
    from otel_loopguard.metrics._labels import MAX_LABEL_CHARS, clean_label

    registry = CollectorRegistry()
    metrics = LoopGuardMetrics(registry)
    huge_a, huge_b = "a" * 1_000_000, "a" * 999_999 + "b"
    for tool in ("bad\ud800name", huge_a, huge_b):
        metrics.record_call("tpl", tool, first=False)
    text = generate_latest(registry).decode()
    assert 'tool="bad\\\\ud800name"' in text  # escaped, then the exposition escapes the \\
    assert len(text) < 10_000
    assert clean_label(huge_a) != clean_label(huge_b)
    assert len(clean_label(huge_a)) == MAX_LABEL_CHARS
    assert clean_label("search_kb") == "search_kb"


_SERVE_MULTIPROC_SCRIPT = textwrap.dedent(
    """
    import sys, time, urllib.request
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from prometheus_client import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families
    from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions

    def open_runs(url):
        with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
            text = response.read().decode()
        return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "loopguard_open_runs")

    def wait_for(url, value):
        deadline = time.monotonic() + 5
        while open_runs(url) != value and time.monotonic() < deadline:
            time.sleep(0.05)
        return open_runs(url)

    options = ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=60)
    with LoopGuardReceiver(options=options, registry=CollectorRegistry()) as receiver:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=receiver.http_url + "/v1/traces")))
        tracer = provider.get_tracer("agent")
        with tracer.start_as_current_span("invoke_agent triage"):
            with tracer.start_as_current_span("execute_tool search") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "search")
        provider.shutdown()
        held = wait_for(receiver.http_url, 1.0)  # buffered for the 60 s reorder window
        receiver.flush(10)
        print(held, wait_for(receiver.http_url, 0.0))
    """
)


def test_serve_open_runs_under_multiproc_variable(tmp_path: Path) -> None:
    """serve started with PROMETHEUS_MULTIPROC_DIR set (an image made for a gunicorn app) still
    reports the runs it holds: the file-backed gauge is kept up to date, not left at 0."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _SERVE_MULTIPROC_SCRIPT], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1.0", "0.0"]


def test_receiver_spans_help_names_every_documented_outcome() -> None:
    """The HELP of loopguard_receiver_spans_total lists its outcomes: every one metrics.md
    documents (``lost`` included, which a restart with a state file counts)."""
    from otel_loopguard.receiver._counters import ReceiverCounters

    registry = CollectorRegistry()
    ReceiverCounters(registry, forwarding=False)
    (help_text,) = [f.documentation for f in registry.collect()
                    if f.name == "loopguard_receiver_spans"]
    (row,) = [line for line in (REPO / "docs" / "metrics.md").read_text().splitlines()
              if line.startswith("| `loopguard_receiver_spans_total`")]
    documented = re.findall(r"`([a-z]+)` \(", row.split("|")[3])
    assert documented == ["rejected", "late", "duplicate", "lost"]
    for outcome in ["accepted", *documented]:
        assert outcome in help_text, outcome


class TestExemplars:
    """Only a W3C trace id becomes an exemplar: a coding agent's run is filed under
    ``<agent>:<session id>``, and a session id past 108 characters made prometheus_client raise
    (OpenMetrics caps exemplar labels at 128 characters), which cut serve's run short."""

    DECISION = Decision(Action.WARN, "REPEATED_CALL", (
        Evidence("repeat", "REPEATED_CALL", Action.WARN, "Bash", 3),))

    def _exemplars(self, trace_id: str) -> list[object]:
        registry = CollectorRegistry()
        metrics = LoopGuardMetrics(registry)
        metrics.record_decision("claude-code", self.DECISION, "observe", Action.CONTINUE,
                                trace_id=trace_id)
        families = text_string_to_metric_families(generate_openmetrics(registry).decode())
        samples = [s for f in families if f.name == "loopguard_loop_detected"
                   for s in f.samples if s.name == "loopguard_loop_detected_total"]
        assert [s.value for s in samples] == [1.0]  # counted either way
        return [s.exemplar for s in samples if s.exemplar is not None]

    def test_a_trace_id_is_the_exemplar(self) -> None:
        [exemplar] = self._exemplars("4bf92f3577b34da6a3ce929d0e0e4736")
        assert exemplar.labels == {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}

    @pytest.mark.parametrize("run_id", ["claude-code:" + "s" * 120, "codex:abc", "xyz" * 11])
    def test_a_session_run_has_none(self, run_id: str) -> None:
        assert self._exemplars(run_id) == []


@pytest.mark.parametrize("invisible", ["\u200b", "\u200c", "\u200d", "\u2060", "\xad",
                                       "\U000e0041"],
                         ids=["zwsp", "zwnj", "zwj", "word-joiner", "soft-hyphen", "tag"])
def test_an_invisible_character_in_a_label_is_spelled_out(invisible: str) -> None:
    """``search`` and ``search`` with a zero-width character were two series that read the
    same on a dashboard; the character is now written out, as a bidi override is."""
    from otel_loopguard.metrics._labels import clean_label

    label = clean_label("search" + invisible)
    assert label != "search" and invisible not in label
    assert label == "search" + (f"\\x{ord(invisible):02x}" if ord(invisible) < 0x100
                                else f"\\u{ord(invisible):04x}" if ord(invisible) < 0x10000
                                else f"\\U{ord(invisible):08x}")


def test_series_of_known_label_values_exist_before_their_first_increment() -> None:
    """A labelled series first scraped at n reads as no increase to rate() and increase(): the
    series of the label values a panel or alert reads are exposed at 0 from the start."""
    registry = CollectorRegistry()
    LoopGuardMetrics(registry=registry, service_label=True)
    zero = {
        ("loopguard_evicted_runs_total", "reason", "ttl"),
        ("loopguard_evicted_runs_total", "reason", "capacity"),
        ("loopguard_skipped_spans_total", "reason", "queue_full"),
        ("loopguard_unparented_tool_calls_total", "run_key", "conversation"),
        ("loopguard_label_overflow_total", "label", "service_name")}
    for name, label, value in zero:
        assert registry.get_sample_value(name, {label: value}) == 0.0, (name, value)


def test_serve_counts_each_outcome_from_its_start() -> None:
    """serve's span and request outcomes that alerts read exist at 0 before the first one."""
    from otel_loopguard.receiver._counters import ReceiverCounters

    registry = CollectorRegistry()
    ReceiverCounters(registry, forwarding=False)
    assert registry.get_sample_value("loopguard_receiver_spans_total", {"outcome": "rejected"}) == 0
    assert registry.get_sample_value("loopguard_receiver_requests_total",
                                     {"protocol": "grpc", "outcome": "throttled"}) == 0


def test_a_name_taken_on_the_registry_registers_none_and_says_why() -> None:
    """All of loopguard's metrics or none: a collision used to leave the metrics before it
    registered, so a second try failed on another name."""
    from prometheus_client import Counter as PromCounter

    registry = CollectorRegistry()
    taken = PromCounter("loopguard_runs", "an application's own", registry=registry)
    for _ in range(2):  # the same error each time: nothing was left behind
        with pytest.raises(ValueError, match=r"loopguard_runs_total.*LoopGuardMetrics\.shared"):
            LoopGuardMetrics(registry)
    assert [m.name for m in registry.collect()] == ["loopguard_runs"]
    registry.unregister(taken)
    LoopGuardMetrics(registry)
    assert "loopguard_runs" in {m.name for m in registry.collect()}
