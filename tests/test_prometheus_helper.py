"""Integration tests for tests/_prometheus.py: a real Prometheus scraping prometheus-client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _prometheus import (
    PROMETHEUS_AVAILABLE,
    SKIP_REASON,
    PrometheusError,
    PrometheusServer,
    running_prometheus,
    wait_until,
)
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from test_dashboards import ALERTS, dashboard_exprs, load_dashboard, substitute_macros

from otel_loopguard.metrics._names import (
    INTERNAL_ERRORS,
    LOOP_DETECTED,
    OPEN_RUNS,
    RUNS,
    TOOL_CALLS,
)

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(not PROMETHEUS_AVAILABLE, reason=SKIP_REASON),
]


def _counter(name: str, labels: list[str], registry: CollectorRegistry) -> Counter:
    """Create a counter registered as ``name`` minus its ``_total`` suffix (prometheus-client adds
    it back).
    """
    return Counter(name.removesuffix("_total"), f"{name} (test)", labels, registry=registry)


@pytest.fixture(name="metrics_target", scope="module")
def _metrics_target() -> Iterator[str]:
    """Serve static loopguard metrics from a fresh registry on 127.0.0.1 and yield ``host:port``."""
    registry = CollectorRegistry()
    _counter(TOOL_CALLS, ["prompt_template", "tool"], registry).labels(
        "triage@v3", "search"
    ).inc(12)
    _counter(RUNS, ["prompt_template"], registry).labels("triage@v3").inc(4)
    _counter(LOOP_DETECTED, ["prompt_template", "detector", "action", "mode"], registry).labels(
        "triage@v3", "repeat", "warn", "observe"
    ).inc(3)
    _counter(INTERNAL_ERRORS, ["kind"], registry).labels("detector").inc()
    Gauge(OPEN_RUNS, "open runs (test)", registry=registry).set(2)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(name="prom", scope="module")
def _prom(
    metrics_target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """One Prometheus for the module, scraping ``metrics_target`` and loading
    dashboards/alerts.yaml.
    """
    with running_prometheus(
        [metrics_target], [ALERTS], tmp_path=tmp_path_factory.mktemp("prom")
    ) as prom:
        yield prom


def _series_value(result: list[dict[str, Any]]) -> float:
    """Return the value of a single-series instant-query result."""
    assert len(result) == 1, result
    return float(result[0]["value"][1])


class TestRunningPrometheus:
    """running_prometheus() and the PrometheusServer API."""

    def test_scrapes_target(self, prom: PrometheusServer, metrics_target: str) -> None:
        """The configured target is scraped as job `loopguard` and reports healthy."""
        targets = prom.targets()
        assert [t["labels"]["job"] for t in targets] == ["loopguard"]
        assert targets[0]["scrapeUrl"] == f"http://{metrics_target}/metrics"
        prom.wait_for('up{job="loopguard"} == 1')

    def test_query_returns_series(self, prom: PrometheusServer) -> None:
        """An instant query returns the scraped loopguard series with its labels and value."""
        result = prom.wait_for(f'{TOOL_CALLS}{{prompt_template="triage@v3"}}')
        assert result[0]["metric"]["tool"] == "search"
        assert _series_value(result) == 12.0

    def test_query_error_raises(self, prom: PrometheusServer) -> None:
        """A query Prometheus rejects raises PrometheusError carrying the parse error."""
        with pytest.raises(PrometheusError, match=r"bad_data.*parse error"):
            prom.query("sum(rate(loopguard_runs_total[1m])")

    def test_wait_for_times_out(self, prom: PrometheusServer) -> None:
        """wait_for raises TimeoutError when the predicate never holds."""
        with pytest.raises(TimeoutError, match="loopguard_no_such_metric"):
            prom.wait_for("loopguard_no_such_metric", timeout=0.5)

    def test_loads_alert_rules(self, prom: PrometheusServer) -> None:
        """alerts.yaml loads as the loop and serve groups and every rule evaluates with health
        ok.
        """

        def rules_evaluated(groups: list[dict[str, Any]]) -> bool:
            return bool(groups) and all(r["health"] == "ok" for g in groups for r in g["rules"])

        groups = wait_until(prom.rules, rules_evaluated, timeout=30.0, what="rules evaluated")
        assert [g["name"] for g in groups] == ["otel-loopguard", "otel-loopguard-serve"]
        assert [len(g["rules"]) for g in groups] == [13, 5]

    def test_internal_error_alert_fires(self, prom: PrometheusServer) -> None:
        """A counter created by its first internal error makes LoopGuardInternalErrors fire."""

        def firing(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
            name = "LoopGuardInternalErrors"
            return [
                a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"
            ]

        alerts = wait_until(
            lambda: firing(prom.alerts()), timeout=30.0, what="LoopGuardInternalErrors firing"
        )
        (alert,) = alerts
        assert alert["labels"] == {
            "alertname": "LoopGuardInternalErrors",
            "kind": "detector",
            "severity": "warning",
            "instance": alert["labels"]["instance"],
            "job": "loopguard",
        }

    def test_dashboard_exprs_evaluate(self, prom: PrometheusServer) -> None:
        """Every dashboard expression, macros substituted, is accepted by a real Prometheus query
        API.
        """
        for name, expr in dashboard_exprs(load_dashboard()):
            try:
                prom.query(substitute_macros(expr))
            except PrometheusError as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"{name}: {exc}")


class TestPrometheusFactory:
    """The prometheus_factory fixture."""

    def test_starts_independent_servers(
        self, prometheus_factory: Callable[..., PrometheusServer]
    ) -> None:
        """Each call starts a separate ready server on its own port, stopped at teardown."""
        first, second = prometheus_factory([]), prometheus_factory([])
        assert first.url != second.url
        assert _series_value(first.query("vector(1)")) == 1.0
        assert first.process.poll() is None
        assert second.process.poll() is None

    def test_start_failure_includes_log(self, tmp_path: Path) -> None:
        """A server that cannot start raises PrometheusError quoting its own log."""
        rules = tmp_path / "broken.yaml"
        rules.write_text(
            "groups: [{name: bad, rules: [{record: 'x:y:z', expr: 'sum(rate(a[1m])'}]}]\n"
        )
        with (
            pytest.raises(PrometheusError, match=r"(?s)did not become ready.*error loading config"),
            running_prometheus(["127.0.0.1:1"], [rules], tmp_path=tmp_path),
        ):
            pass  # pragma: no cover
