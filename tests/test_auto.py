"""Zero-code install through opentelemetry-instrument (the post_instrument entry point)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    from opentelemetry import trace
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent triage", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"q": "x"}',
                    "gen_ai.tool.call.result": "no results"}):
                pass
""")


def _instrument() -> str | None:
    found = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    return found or shutil.which("opentelemetry-instrument")


@pytest.mark.skipif(_instrument() is None, reason="opentelemetry-instrument not installed")
class TestOpentelemetryInstrument:
    def _run(self, tmp_path: Path, **env: str) -> str:
        return self._start(tmp_path, **env).stdout

    def _start(self, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
        script = tmp_path / "app.py"
        script.write_text(SCRIPT)
        environ = {**os.environ, "OTEL_TRACES_EXPORTER": "console",
                   "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
                   "OTEL_SERVICE_NAME": "agent", **env}
        return subprocess.run([_instrument() or "", sys.executable, str(script)], env=environ,
                              capture_output=True, text=True, timeout=60, check=True)

    def _agent_events(self, stdout: str) -> list[dict[str, object]]:
        decoder, spans, text = json.JSONDecoder(), [], stdout.strip()
        while text:
            span, end = decoder.raw_decode(text)
            spans.append(span)
            text = text[end:].strip()
        agent = next(s for s in spans if s["name"] == "invoke_agent triage")
        return [e for e in agent["events"] if e["name"] == "loopguard.loop_detected"]

    def test_loopguard_is_installed_without_code(self, tmp_path: Path) -> None:
        """opentelemetry-instrument installs loopguard; the finding lands on the agent span."""
        events = self._agent_events(self._run(tmp_path))
        assert [e["attributes"]["loopguard.action"] for e in events] == ["warn"]

    def test_loopguard_variables_configure_it(self, tmp_path: Path) -> None:
        """LOOPGUARD_* variables reach the auto-installed processor."""
        events = self._agent_events(self._run(tmp_path, LOOPGUARD_STAGNATION_WARN="2"))
        assert [e["attributes"]["loopguard.action"] for e in events] == ["warn", "warn"]

    def test_an_app_with_its_own_processor_still_starts(self, tmp_path: Path) -> None:
        """An app that builds its own processor (default Prometheus registry), as the docs
        show, beside the one opentelemetry-instrument installed, starts and is watched: the
        two share the registered metrics instead of failing to register them twice."""
        script = tmp_path / "app2.py"
        script.write_text(textwrap.dedent("""
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter)
            from prometheus_client import REGISTRY
            from otel_loopguard import LoopGuardSpanProcessor
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(LoopGuardSpanProcessor(
                downstream=SimpleSpanProcessor(exporter)))
            tracer = provider.get_tracer("app")
        """) + textwrap.indent(SCRIPT.replace('from opentelemetry import trace\n', '')
                               .replace('tracer = trace.get_tracer("app")\n', ''), "") + \
            textwrap.dedent("""
            provider.force_flush()
            codes = [s.attributes.get("loopguard.code") for s in exporter.get_finished_spans()]
            print("CODES", codes)
            print("CALLS", REGISTRY.get_sample_value(
                "loopguard_tool_calls_total",
                {"prompt_template": "unknown", "tool": "search"}))
        """))
        environ = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
                   "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "agent"}
        done = subprocess.run([_instrument() or "", sys.executable, str(script)], env=environ,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "CODES [None, None, 'STAGNANT_RESULT', None]" in done.stdout
        assert "CALLS 3.0" in done.stdout

    @pytest.mark.parametrize(("env", "message"), [
        ({"LOOPGUARD_STAGNATION_WARN": "abc"},
         "otel-loopguard: not installed: LOOPGUARD_STAGNATION_WARN must be an integer >= 2, "
         "got 'abc'"),
        ({"LOOPGUARD_ENABLED": "maybe"},
         "otel-loopguard: not installed: LOOPGUARD_ENABLED must be a bool, got 'maybe'"),
        ({"LOOPGUARD_CONFIG_FILE": "/nonexistent/loopguard.toml"},
         "otel-loopguard: not installed: /nonexistent/loopguard.toml: config file not found"),
    ], ids=["bad-threshold", "bad-enabled", "missing-config-file"])
    def test_bad_setting_is_one_line_and_the_app_runs(
            self, tmp_path: Path, env: dict[str, str], message: str) -> None:
        """A bad LOOPGUARD_* setting logs one line, no traceback; the app runs and the rest of
        the auto-configuration (the console exporter) still exports its spans, unwatched."""
        done = self._start(tmp_path, **env)
        assert done.stderr.splitlines() == [message]
        assert self._agent_events(done.stdout) == []

    def test_the_line_reaches_stderr_under_the_sdk_s_logging_handler(self,
                                                                    tmp_path: Path) -> None:
        """With the SDK's logging handler on the root logger and its logs going nowhere,
        Python no longer prints a lone warning on stderr: the line was lost, and loopguard
        silently absent."""
        done = self._start(tmp_path, LOOPGUARD_STAGNATION_WARN="abc",
                           OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED="true")
        assert ("otel-loopguard: not installed: LOOPGUARD_STAGNATION_WARN must be an integer "
                ">= 2, got 'abc'") in done.stderr.splitlines()

    def test_nothing_is_installed_with_the_sdk_disabled(self, tmp_path: Path) -> None:
        """OTEL_SDK_DISABLED=true: no processor and no /metrics port (whose zeros would read
        as "no loops" on a dashboard), nothing said."""
        script = tmp_path / "app.py"
        script.write_text(textwrap.dedent("""
            import threading
            from opentelemetry import trace
            provider = trace.get_tracer_provider()
            print("PROCESSORS", [type(p).__name__ for p in getattr(
                getattr(provider, "_active_span_processor", None), "_span_processors", ())])
            print("THREADS", sorted(t.name for t in threading.enumerate()
                                    if t.name.startswith("loopguard")))
        """))
        environ = {**os.environ, "OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "none",
                   "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
                   "LOOPGUARD_METRICS_PORT": "0"}
        done = subprocess.run([_instrument() or "", sys.executable, str(script)], env=environ,
                              capture_output=True, text=True, timeout=60, check=True)
        assert done.stdout.splitlines() == ["PROCESSORS []", "THREADS []"], done.stdout
        assert done.stderr == ""

    def test_busy_metrics_port_keeps_detection(self, tmp_path: Path) -> None:
        """A metrics port already in use logs one line; detection still runs and the spans are
        still exported."""
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            done = self._start(tmp_path, LOOPGUARD_METRICS_PORT=str(port))
        assert done.stderr.splitlines() == [
            f"otel-loopguard: cannot serve /metrics on 127.0.0.1:{port} (Address already in "
            "use); loop detection runs without it"]
        events = self._agent_events(done.stdout)
        assert [e["attributes"]["loopguard.action"] for e in events] == ["warn"]

    def test_can_be_disabled(self, tmp_path: Path) -> None:
        """LOOPGUARD_ENABLED=false keeps it out."""
        assert self._agent_events(self._run(tmp_path, LOOPGUARD_ENABLED="false")) == []
