"""End to end: a real ``serve`` under load, scraped by a real Prometheus with the serve rules.

One receiver (forwarding to a second one) takes a steady stream of OTLP/JSON requests from a
sender thread: good traces, requests with one malformed span, and spans that arrive after their
trace was checked. Prometheus scrapes it as job ``loopguard``, and a port where nothing listens as
job ``loopguard-dead``, every second, with the time-compressed ``alerts.yaml`` of
``test_prometheus_e2e``. Every panel of the dashboard's serve row must return series, and the
serve alerts must say what happens: the dead target is down, spans are rejected and late, nothing
is throttled and no target is absent.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import yaml
from _prometheus import (
    PROMETHEUS_AVAILABLE,
    SKIP_REASON,
    PrometheusServer,
    running_prometheus,
    wait_until,
)
from prometheus_client import CollectorRegistry
from test_dashboards import ALERTS, dashboard_exprs, iter_panels, load_dashboard, substitute_macros
from test_prometheus_e2e import compress_durations
from test_receiver import to_json_doc

from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.testing import LoopGuardHarness

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.slow,
    pytest.mark.skipif(not PROMETHEUS_AVAILABLE, reason=SKIP_REASON),
]

SERVE_RULES = ("LoopGuardServeDown", "LoopGuardServeAbsent", "LoopGuardServeRejectingSpans",
               "LoopGuardServeLateSpans", "LoopGuardServeThrottling")


def _post(port: int, doc: dict[str, Any]) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces",
                                     data=json.dumps(doc).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        response.read()


def _one_trace() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Return a trace's request, the same with one malformed span, and a late span of it."""
    harness = LoopGuardHarness()
    with harness.run("triage", prompt="triage@v1") as run:
        for _ in range(3):
            run.tool("search", {"q": "x"}, "no results")
    spans = harness.exporter.get_finished_spans()
    harness.shutdown()
    good = to_json_doc(spans[:-1])
    late = to_json_doc(spans[-1:])
    partial = to_json_doc(spans)
    partial["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "abc"
    return good, partial, late


def _send_forever(port: int, stop: threading.Event, receiver: LoopGuardReceiver) -> None:
    while not stop.is_set():
        good, partial, late = _one_trace()
        _post(port, good)
        _post(port, partial)
        receiver.flush(5)  # the trace is checked, so the next span of it is late
        _post(port, late)
        stop.wait(0.2)


@pytest.fixture(name="serve_prom", scope="module")
def _serve_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    tmp = tmp_path_factory.mktemp("serve-e2e")
    rules = tmp / "alerts-fast.yaml"
    text = compress_durations(ALERTS.read_text())
    floor = ">= 1000"  # LoopGuardServeLateSpans' traffic floor: for 15 minutes, not the window here
    assert text.count(floor) == 1, "alerts.yaml's late-spans floor moved; update this test"
    rules.write_text(text.replace(floor, ">= 1"))
    # the dead target's port is held (bound, never listening) so no process can answer on it;
    # `other` is an exporter that is not loopguard's, as a shared Prometheus scrapes many
    other = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=CollectorRegistry())
    with socket.socket() as dead, LoopGuardReceiver(
            options=ReceiverOptions(http_port=0, grpc_port=None),
            registry=CollectorRegistry()) as downstream:
        dead.bind(("127.0.0.1", 0))
        options = ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0,
                                  forward_endpoint=downstream.http_url, forward_protocol="http")
        with LoopGuardReceiver(options=options, registry=CollectorRegistry()) as receiver:
            stop = threading.Event()
            sender = threading.Thread(target=_send_forever,
                                      args=(receiver.http_port, stop, receiver), daemon=True)
            sender.start()
            jobs = [{"job_name": "loopguard",
                     "static_configs": [{"targets": [f"127.0.0.1:{receiver.http_port}"]}]},
                    {"job_name": "loopguard-dead",
                     "static_configs": [{"targets": [
                         f"127.0.0.1:{dead.getsockname()[1]}"]}]},
                    {"job_name": "node",
                     "static_configs": [{"targets": [f"127.0.0.1:{other[0].server_port}"]}]}]
            try:
                with running_prometheus([], [rules], tmp_path=tmp / "prom",
                                        scrape_configs=jobs) as prom:
                    prom.wait_for('count_over_time(up{job="loopguard"}[1m]) >= 20', timeout=60)
                    yield prom
            finally:
                stop.set()
                sender.join(10)
                other[0].shutdown()
                other[0].server_close()


def _serve_exprs() -> list[tuple[str, str]]:
    panels = list(iter_panels(load_dashboard()["panels"]))
    row = next(i for i, p in enumerate(panels) if p["title"] == "serve (OTLP receiver)")
    ids = {p["id"] for p in panels[row + 1:]}
    return [(n, e) for n, e in dashboard_exprs(load_dashboard())
            if int(n.split("-")[1]) in ids]


def _firing(prom: PrometheusServer, name: str) -> list[dict[str, Any]]:
    return [a for a in prom.alerts()
            if a["labels"]["alertname"] == name and a["state"] == "firing"]


class TestServeOnPrometheus:
    @pytest.mark.parametrize(("name", "expr"), [pytest.param(n, e, id=n)
                                                for n, e in _serve_exprs()])
    def test_serve_panel_has_series(self, serve_prom: PrometheusServer, name: str,
                                    expr: str) -> None:
        """Each serve-row panel query parses and returns series from a live serve."""
        assert serve_prom.query(substitute_macros(expr)), f"{name} returned no series: {expr}"

    def test_outcomes_are_broken_down(self, serve_prom: PrometheusServer) -> None:
        """The spans panel shows accepted, rejected and late spans; the requests panel ok and
        partial requests."""
        spans = next(e for _, e in _serve_exprs() if "loopguard_receiver_spans_total" in e)
        requests = next(e for _, e in _serve_exprs() if "loopguard_receiver_requests_total" in e)
        span_outcomes = {r["metric"]["outcome"] for r in serve_prom.query(substitute_macros(spans))}
        assert {"accepted", "rejected", "late"} <= span_outcomes
        request_outcomes = {r["metric"]["outcome"]
                            for r in serve_prom.query(substitute_macros(requests))}
        assert {"ok", "partial"} <= request_outcomes

    def test_targets_panel_shows_only_loopguard_jobs(self, serve_prom: PrometheusServer) -> None:
        """Scrape targets up, with Job = All as Grafana sends it (the jobs the job variable lists,
        its label_values query, joined), shows loopguard's targets, not the other exporters
        the same Prometheus scrapes."""
        variables = {v["name"]: v for v in load_dashboard()["templating"]["list"]}
        assert "allValue" not in variables["job"]  # else Grafana would send its custom value
        jobs = serve_prom.api("/api/v1/label/job/values", {"match[]": "loopguard_open_runs"})
        assert jobs == ["loopguard"]
        (expr,) = [e for n, e in dashboard_exprs(load_dashboard()) if n == "panel-22-A"]
        up = serve_prom.query(substitute_macros(expr.replace("$job", f"({'|'.join(jobs)})")))
        assert {r["metric"]["job"] for r in up} == {"loopguard"}
        assert "node" in {r["metric"]["job"] for r in serve_prom.query(substitute_macros(expr))}

    def test_dead_target_fires_serve_down(self, serve_prom: PrometheusServer) -> None:
        """LoopGuardServeDown fires for the target where nothing listens, not for the live one."""
        alerts = wait_until(lambda: _firing(serve_prom, "LoopGuardServeDown"), timeout=30,
                            what="LoopGuardServeDown firing")
        assert {a["labels"]["job"] for a in alerts} == {"loopguard-dead"}
        assert alerts[0]["annotations"]["runbook_url"].endswith("#loopguardservedown")

    @pytest.mark.parametrize("name", ["LoopGuardServeRejectingSpans", "LoopGuardServeLateSpans"])
    def test_rejected_and_late_spans_fire(self, serve_prom: PrometheusServer, name: str) -> None:
        """Malformed spans and spans after their trace closed fire their alerts, for the live
        instance."""
        alerts = wait_until(lambda: _firing(serve_prom, name), timeout=30, what=f"{name} firing")
        assert {a["labels"]["job"] for a in alerts} == {"loopguard"}

    @pytest.mark.parametrize("name", ["LoopGuardServeAbsent", "LoopGuardServeThrottling"])
    def test_quiet_alerts_stay_quiet(self, serve_prom: PrometheusServer, name: str) -> None:
        """Targets exist and nothing is throttled: these two have no series at all."""
        (rule,) = [r for g in serve_prom.rules() for r in g["rules"] if r["name"] == name]
        assert rule["health"] == "ok"
        assert serve_prom.query(rule["query"]) == []


def test_serve_rules_are_the_ones_tested() -> None:
    """The serve group holds exactly the alerts this module exercises."""
    groups = yaml.safe_load(Path(ALERTS).read_text())["groups"]
    (serve,) = [g for g in groups if g["name"] == "otel-loopguard-serve"]
    assert tuple(r["alert"] for r in serve["rules"]) == SERVE_RULES
