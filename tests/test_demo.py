"""``otel-loopguard demo``: the simulated fleet, its summary and its live /metrics."""

from __future__ import annotations

import io
import re
import socket
import sys
import threading
import time
import urllib.request
from typing import Any

import pytest
from _prometheus import free_port
from opentelemetry import metrics as metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

from otel_loopguard.cli import main
from otel_loopguard.metrics._names import LOOP_DETECTED, RUNS, RUNS_FLAGGED, TOOL_CALLS

BROKEN = "support_triage@v3"
HEALTHY = "order_status@v1"
TEMPLATES = ("order_status@v1", "refund_flow@v2", "research@v1", "support_triage@v3")
_ROW = re.compile(r"^(\S+@v\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)/(\d+)/(\d+)$", re.M)
_URL = re.compile(r"serving metrics on http://127\.0\.0\.1:(\d+)/metrics")


def _final_rows(out: str) -> dict[str, dict[str, float]]:
    """Parse the rows of the final summary table, by prompt template."""
    final = out.split("final summary:", 1)[1]
    keys = ("runs", "tool_calls", "flagged", "replan", "warn_hints", "replan_hints", "stop_hints")
    return {
        m[1]: dict(zip(keys, map(float, m.groups()[1:]), strict=True)) for m in _ROW.finditer(final)
    }


def _samples(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Scrape /metrics and return every sample value by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _total(samples: dict[Any, float], name: str, **labels: str) -> float:
    """Sum the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lbls), v in samples.items() if n == name and want <= lbls)


class TestDemoCommand:
    """main(["demo", ...]) end to end."""

    def test_quiet_run_prints_final_summary(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A quiet 1 s run exits 0; its summary lists every template, the broken one flagged."""
        code = main(["demo", "--duration", "1", "--metrics-port", "0", "--quiet", "--seed", "7"])
        assert code == 0
        out = capsys.readouterr().out
        assert _URL.search(out)
        assert out.count("otel-loopguard demo:") == 1  # quiet: no live tables
        rows = _final_rows(out)
        assert sorted(rows) == list(TEMPLATES)
        assert rows[BROKEN]["runs"] > 0
        assert rows[BROKEN]["replan"] > 30.0
        assert rows[BROKEN]["replan_hints"] > 0
        assert rows[HEALTHY]["runs"] > 0
        assert rows[HEALTHY]["flagged"] == 0.0

    def test_metrics_exporter_otlp_still_fills_the_table(
            self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """LOOPGUARD_METRICS_EXPORTER=otlp (set for an application) does not leave the demo's
        table and /metrics empty: the demo counts in Prometheus and over OTLP both."""
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        monkeypatch.setattr(metrics_api, "get_meter_provider", lambda: provider)
        monkeypatch.setenv("LOOPGUARD_METRICS_EXPORTER", "otlp")
        try:
            assert main(["demo", "--duration", "1", "--metrics-port", "0", "--quiet",
                         "--agents", "2", "--seed", "7"]) == 0
            rows = _final_rows(capsys.readouterr().out)
            assert sorted(rows) == list(TEMPLATES)
            assert sum(row["tool_calls"] for row in rows.values()) > 0
            data = reader.get_metrics_data()
            assert data is not None
            names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics
                     for m in sm.metrics}
            assert TOOL_CALLS in names
        finally:
            provider.shutdown()

    def test_live_table_redrawn_every_second_on_a_terminal(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On a terminal, without --quiet, the table is drawn each second, then redrawn in
        place, before the final summary."""
        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        terminal = Terminal()
        monkeypatch.setattr(sys, "stdout", terminal)
        assert main(["demo", "--duration", "2", "--metrics-port", "0", "--agents", "2"]) == 0
        out = terminal.getvalue()
        assert out.count("otel-loopguard demo:") == 3  # at 1 s, at 2 s, and the final summary
        assert out.count("\x1b[J") == 1  # the 2 s table replaced the 1 s one
        assert out.index("final summary:") > out.index("otel-loopguard demo:")

    def test_no_live_table_without_a_terminal(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Into a pipe or a log, demo prints the metrics URL and the final summary only."""
        assert main(["demo", "--duration", "2", "--metrics-port", "0", "--agents", "2"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert _URL.search(lines[0])
        assert lines[1:3] == ["final summary:", lines[2]]
        assert lines[2].startswith("otel-loopguard demo:")
        assert "\x1b" not in "".join(lines)
        assert len(lines) == 3 + 2 + len(TEMPLATES)  # URL, summary heading, its table

    def test_shuts_down_server_and_agents(self, capsys: pytest.CaptureFixture[str]) -> None:
        """After the command returns, its /metrics port is closed and no agent thread is left."""
        assert main(["demo", "--duration", "0.3", "--metrics-port", "0", "--quiet"]) == 0
        match = _URL.search(capsys.readouterr().out)
        assert match is not None
        with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(("127.0.0.1", int(match[1])))
        assert not [t for t in threading.enumerate() if t.name.startswith("loopguard-demo-agent")]

    @pytest.mark.parametrize(
        ("argv", "message"),
        [(["--duration", "0"], "--duration: must be a finite number > 0, got 0"),
         (["--duration", "inf"], "--duration: must be a finite number > 0, got inf"),
         (["--duration", "soon"], "--duration: not a number of seconds: 'soon'"),
         (["--metrics-port", "70000"], "--metrics-port: must be in 0..65535, got 70000"),
         (["--metrics-port", "http"], "--metrics-port: not a whole number: 'http'"),
         (["--agents", "0"], "--agents: must be in 1..256, got 0"),
         (["--agents", "2.5"], "--agents: not a whole number: '2.5'")],
        ids=["zero-duration", "endless", "duration-word", "bad-port", "port-word", "no-agents",
             "fraction-of-agents"],
    )
    def test_bad_arguments_exit_2(
        self, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Invalid flag values are a usage error (exit 2) with a one-line message naming them."""
        with pytest.raises(SystemExit) as exc:
            main(["demo", *argv])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"error: argument {message}" in err
        assert "_positive_float" not in err and "parse value" not in err


class TestDemoMetrics:
    """The demo's /metrics while it runs."""

    @staticmethod
    def _scrape_until_both_templates_show(port: int, codes: list[int]) -> dict[Any, float]:
        """Scrape the running demo until both templates have samples, or it ends (or 10 s)."""
        deadline = time.monotonic() + 10
        samples: dict[Any, float] = {}
        while time.monotonic() < deadline and not codes:
            time.sleep(0.3)
            try:
                samples = _samples(port)
            except OSError:
                continue
            if _total(samples, LOOP_DETECTED, prompt_template=BROKEN) and _total(
                samples, RUNS, prompt_template=HEALTHY
            ):
                break
        return samples

    def test_scrape_while_running(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Mid-run, the broken template has loop hints; the healthy one no run flagged at replan."""
        for _ in range(5):  # another process may take the free port before the demo binds it
            port = free_port()
            codes: list[int] = []
            thread = threading.Thread(target=lambda port=port, codes=codes: codes.append(
                main(["demo", "--duration", "3", "--metrics-port", str(port), "--quiet"])))
            thread.start()
            try:
                samples = self._scrape_until_both_templates_show(port, codes)
            finally:
                thread.join(15)
            if not (codes == [2] and "already in use" in capsys.readouterr().err):
                break
        assert codes == [0]
        assert _total(samples, LOOP_DETECTED, prompt_template=BROKEN) > 0
        assert _total(samples, RUNS_FLAGGED, prompt_template=BROKEN, action="replan") > 0
        assert _total(samples, RUNS, prompt_template=HEALTHY) > 0
        assert _total(samples, RUNS_FLAGGED, prompt_template=HEALTHY, action="replan") == 0
        capsys.readouterr()


def test_a_taken_metrics_port_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """As docs/metrics.md says: another process has the port, demo names it and exits 2."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["demo", "--duration", "0.2", "--quiet", "--metrics-port", str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"otel-loopguard: cannot serve /metrics on 127.0.0.1:{port} "
                   "(Address already in use)\n")
