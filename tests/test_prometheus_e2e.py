"""End to end: ``otel-loopguard demo`` scraped by a real Prometheus with the dashboard and rules.

One demo process (``python -m otel_loopguard demo --duration 60 --quiet``) and one Prometheus
(1 s scrape and rule evaluation, from ``tests/_prometheus.py``) are shared by the module.

Prometheus loads a *time-compressed copy* of the shipped ``alerts.yaml``. Only durations are
rewritten, by regex on the text, so every expression, threshold and the ``>= 20`` runs floor stay
exactly as shipped:

* ``for: 5m`` -> ``for: 2s``, ``for: 10m`` -> ``for: 3s``, ``for: 15m`` -> ``for: 4s``
* range ``[15m]`` -> ``[20s]``, ``[10m]`` -> ``[15s]``, ``[1h]`` -> ``[8s]``
* ``offset 2h`` -> ``offset 16s``, ``offset 1h`` -> ``offset 8s``, ``offset 10m`` -> ``offset 15s``

The runs floor needs no lowering: the demo's broken template gets about 20 runs per second, so
even the first seconds of a 20 s window hold more than 20 runs. The queries wait until the spike
baseline (``[8s] offset 8s``) lies entirely inside the scraped data, about 18 s after the first
scrape (see ``warm_prom``); the module takes about 30 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _prometheus import (
    PROMETHEUS_AVAILABLE,
    SKIP_REASON,
    PrometheusServer,
    free_port,
    running_prometheus,
    wait_until,
)
from test_dashboards import ALERTS, dashboard_exprs, load_dashboard, substitute_macros

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.slow,
    pytest.mark.skipif(not PROMETHEUS_AVAILABLE, reason=SKIP_REASON),
]

REPO = Path(__file__).resolve().parent.parent
BROKEN = "support_triage@v3"
HEALTHY = "order_status@v1"
TEMPLATES = {"order_status@v1", "refund_flow@v2", "research@v1", "support_triage@v3"}

_FOR = {"5m": "2s", "10m": "3s", "15m": "4s"}
_RANGES = {"15m": "20s", "10m": "15s", "1h": "8s"}
_OFFSETS = {"2h": "16s", "1h": "8s", "10m": "15s"}

EXPECTED_EMPTY_PANELS = {
    "panel-7-A": "enforcement: the demo runs in observe mode, so nothing is enforced",
    "panel-15-A": "internal errors: none happen",
    "panel-18-A": "serve requests: the demo is the span processor, not serve",
    "panel-19-A": "serve spans: the demo is the span processor, not serve",
    "panel-19-B": "serve log records: the demo is the span processor, not serve",
    "panel-20-A": "serve queue: the demo is the span processor, not serve",
    "panel-21-A": "serve forwarding: the demo is the span processor, not serve",
    "panel-21-B": "spans not forwarded: the demo is the span processor, not serve",
    "panel-21-C": "log records forwarded: the demo is the span processor, not serve",
    "panel-21-D": "log records not forwarded: the demo is the span processor, not serve",
    "panel-29-A": "budget findings: no demo run reaches the default budget of 50 tool calls",
    "panel-30-A": "budget findings: no demo run reaches the default budget of 50 tool calls",
}
"""Dashboard targets legitimately without series in the demo: they must parse and be empty."""
EXPECTED_ZERO_PANELS = {
    "panel-14-A": "evictions: every run ends its root span, far below max_runs and the TTL",
    "panel-15-B": "skipped spans: the demo never fills the processor's queue",
    "panel-15-C": "unparented tool calls: every demo tool span has an agent span",
    "panel-16-A": "label overflow: 4 templates and 14 tools stay under the caps of 200",
}
"""Targets whose series exist from the start at 0 (so a first burst shows): every value 0."""
EXPECTED_EMPTY_RULES = {
    "LoopGuardInternalErrors": "no internal errors happen",
    "LoopGuardLabelOverflow": "4 templates and 14 tools stay under the caps of 200",
    "LoopGuardLoopSpike": "every template's hint rate is steady, never 3x its own baseline",
    "LoopGuardServeDown": "the demo's target is up",
    "LoopGuardServeAbsent": "the demo is scraped as job loopguard",
    "LoopGuardServeRejectingSpans": "no serve in the demo (test_prometheus_serve_e2e has one)",
    "LoopGuardServeLateSpans": "no serve in the demo (test_prometheus_serve_e2e has one)",
    "LoopGuardServeThrottling": "no serve in the demo",
    "loopguard:budget_exhausted:ratio15m": "no demo run reaches a budget",
    "LoopGuardBudgetExhausted": "no demo run reaches a budget",
}
"""Rule expressions that legitimately have no series in the demo: they must parse and be empty."""


def compress_durations(text: str) -> str:
    """Shorten the windows of alerts.yaml (see the module docstring); fail if one vanished."""

    def sub(pattern: str, table: dict[str, str], fmt: str) -> None:
        nonlocal text
        text, count = re.subn(pattern, lambda m: fmt.format(table[m[1]]), text)
        assert count, f"alerts.yaml no longer contains {pattern!r}; update compress_durations"

    sub(r"for: (5m|10m|15m)\b", _FOR, "for: {}")
    sub(r"\[(15m|10m|1h)\]", _RANGES, "[{}]")
    sub(r"offset (2h|1h|10m)\b", _OFFSETS, "offset {}")
    left = re.findall(r"\[\d+[mhd]\]|offset \d+[mhd]|for: \d+[mhd]", text)
    assert not left, f"durations left uncompressed: {left}"
    return text


@pytest.fixture(name="demo_target", scope="module")
def _demo_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Run the demo in a subprocess (up to 60 s), yield its ``host:port``, kill it at teardown."""
    log = tmp_path_factory.mktemp("demo") / "demo.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(5):  # another process may take the free port before the demo binds it
        port = free_port()
        cmd = [sys.executable, "-m", "otel_loopguard", "demo", "--duration", "60",
               "--metrics-port", str(port), "--quiet", "--seed", "42"]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: _scrape_ok(port, proc), timeout=20,  # noqa: B023 - this port
                       what="demo /metrics answering")
            break
        except (RuntimeError, TimeoutError):
            proc.kill()
            proc.wait(10)
            if "already in use" not in log.read_text(errors="replace"):
                print(log.read_text(errors="replace"))
                raise
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)
        print(log.read_text(errors="replace"))


def _scrape_ok(port: int, proc: subprocess.Popen[bytes]) -> bool:
    """Return whether the demo serves /metrics; raise if it exited."""
    if proc.poll() is not None:
        raise RuntimeError(f"demo exited with {proc.returncode}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@pytest.fixture(name="fast_rules", scope="module")
def _fast_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Write the time-compressed copy of alerts.yaml."""
    path = tmp_path_factory.mktemp("rules") / "alerts-fast.yaml"
    path.write_text(compress_durations(ALERTS.read_text()))
    return path


@pytest.fixture(name="prom", scope="module")
def _prom(
    demo_target: str, fast_rules: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """A Prometheus scraping the demo every second with the compressed rules loaded."""
    tmp = tmp_path_factory.mktemp("prom")
    with running_prometheus([demo_target], [fast_rules], tmp_path=tmp) as prom:
        yield prom


@pytest.fixture(name="warm_prom", scope="module")
def _warm_prom(prom: PrometheusServer) -> PrometheusServer:
    """The Prometheus once every rule window, the spike baseline's included, lies inside the data.

    A range that starts before a series' first sample under-estimates its rate (Prometheus does not
    extrapolate past the first sample), so a half-filled baseline would make LoopGuardLoopSpike
    fire on steady traffic. ``[8s] offset 8s`` is full once 17 scrapes exist.
    """
    prom.wait_for('count_over_time(up{job="loopguard"}[1m]) >= 18', timeout=40)
    prom.wait_for(f'loopguard:loop_detected:rate1h_offset1h{{prompt_template="{BROKEN}"}}')
    return prom


def _by_template(result: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"].get("prompt_template", ""): float(r["value"][1]) for r in result}


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(compress_durations(ALERTS.read_text()))
    return [rule for group in doc["groups"] for rule in group["rules"]]


class TestDashboardOnDemo:
    """Every dashboard query against the demo's real series."""

    @pytest.mark.parametrize(
        ("name", "expr"), [pytest.param(n, e, id=n) for n, e in dashboard_exprs(load_dashboard())]
    )
    def test_panel_expr(self, warm_prom: PrometheusServer, name: str, expr: str) -> None:
        """Each panel query parses and returns series, except the listed legitimately empty ones."""
        result = warm_prom.query(substitute_macros(expr))  # raises PrometheusError on a parse error
        if name in EXPECTED_EMPTY_PANELS:
            assert result == [], f"{name} ({EXPECTED_EMPTY_PANELS[name]}) returned {result}"
        elif name in EXPECTED_ZERO_PANELS:
            assert result, f"{name} returned no series: {expr}"
            assert {float(r["value"][1]) for r in result} == {0.0}, \
                f"{name} ({EXPECTED_ZERO_PANELS[name]}) returned {result}"
        else:
            assert result, f"{name} returned no series: {expr}"

    def test_expected_empty_panels_exist(self) -> None:
        """The legitimately-empty list names real dashboard targets (no stale ids)."""
        ids = {name for name, _ in dashboard_exprs(load_dashboard())}
        assert set(EXPECTED_EMPTY_PANELS) | set(EXPECTED_ZERO_PANELS) <= ids

    def test_template_variable_lists_demo_templates(self, warm_prom: PrometheusServer) -> None:
        """The prompt_template variable query (label_values) yields the 4 demo templates."""
        values = warm_prom.api(
            "/api/v1/label/prompt_template/values", {"match[]": "loopguard_tool_calls_total"}
        )
        assert set(values) == TEMPLATES

    def test_coding_agent_filters_the_panels(self, warm_prom: PrometheusServer) -> None:
        """Coding agent = codex with Prompt template = All (`.*`, which Grafana sends as is): the
        demo has no codex template, so every panel on a templated metric is empty."""
        templated = [(n, e) for n, e in dashboard_exprs(load_dashboard()) if "$agent" in e]
        assert len(templated) >= 15
        for name, expr in templated:
            assert warm_prom.query(substitute_macros(expr)) or name in EXPECTED_EMPTY_PANELS, name
            narrowed = substitute_macros(expr.replace("$agent", "(codex)"))
            assert warm_prom.query(narrowed) == [], name

    def test_broken_template_has_loop_hints(self, warm_prom: PrometheusServer) -> None:
        """The hints-per-second panel shows the broken template looping, the healthy one not."""
        (expr,) = [e for n, e in dashboard_exprs(load_dashboard()) if n == "panel-2-A"]
        rates = _by_template(warm_prom.query(substitute_macros(expr)))
        assert rates[BROKEN] > 0
        assert rates.get(HEALTHY, 0.0) == 0.0

    @pytest.mark.parametrize("ref", ["panel-3-A", "panel-3-B"], ids=["warn", "replan"])
    def test_flagged_share_higher_for_broken(self, warm_prom: PrometheusServer, ref: str) -> None:
        """The share of flagged runs is far higher for the broken template than for order_status."""
        (expr,) = [e for n, e in dashboard_exprs(load_dashboard()) if n == ref]
        shares = _by_template(warm_prom.query(substitute_macros(expr)))
        assert shares[BROKEN] > 0.5
        assert shares.get(HEALTHY, 0.0) == 0.0  # no flagged run: no numerator series at all
        assert shares[BROKEN] > shares.get(HEALTHY, 0.0)


    def test_waste_panels_show_the_broken_template(self, warm_prom: PrometheusServer) -> None:
        """The waste panels show support_triage@v3 wasting tool calls, tokens, tool time and
        money (the demo prices its model), and order_status@v1, which never loops, nothing."""
        exprs = dict(dashboard_exprs(load_dashboard()))
        for ref in ("panel-24-A", "panel-24-B", "panel-25-A", "panel-27-A"):
            rates = _by_template(warm_prom.query(substitute_macros(exprs[ref])))
            assert rates[BROKEN] > 0, ref
            assert rates.get(HEALTHY, 0.0) == 0.0, ref
        tokens = warm_prom.query(substitute_macros(exprs["panel-26-A"]))
        types = {r["metric"]["type"] for r in tokens if r["metric"]["prompt_template"] == BROKEN}
        assert types == {"input", "output"}


class TestRulesOnDemo:
    """Every recording and alerting expression of alerts.yaml against the demo's real series."""

    @pytest.mark.parametrize("rule", _rules(), ids=lambda r: r.get("record") or r["alert"])
    def test_rule_expr(self, warm_prom: PrometheusServer, rule: dict[str, Any]) -> None:
        """Each rule expression parses and returns series, except the listed empty ones."""
        name = rule.get("record") or rule["alert"]
        result = warm_prom.query(rule["expr"])
        if name in EXPECTED_EMPTY_RULES:
            assert result == [], f"{name} ({EXPECTED_EMPTY_RULES[name]}) returned {result}"
        else:
            assert result, f"{name} returned no series"

    def test_rules_healthy(self, warm_prom: PrometheusServer) -> None:
        """Prometheus evaluates every loaded rule with health ok."""
        rules = [r for g in warm_prom.rules() for r in g["rules"]]
        assert len(rules) == len(_rules())
        assert {r["name"]: r["health"] for r in rules} == {r["name"]: "ok" for r in rules}

    def test_wasted_share_recording(self, warm_prom: PrometheusServer) -> None:
        """The recorded share of wasted tool calls is above the alert's 0.2 for the broken
        template and absent for the healthy one (no wasted call: no numerator series)."""
        ratios = _by_template(warm_prom.query("loopguard:wasted_tool_calls:ratio15m"))
        assert ratios[BROKEN] > 0.2
        assert HEALTHY not in ratios

    def test_replan_ratio_recording(self, warm_prom: PrometheusServer) -> None:
        """The recorded replan ratio is above the 0.5 threshold for the broken template only."""
        ratios = _by_template(warm_prom.query("loopguard:runs_flagged_replan:ratio15m"))
        assert ratios[BROKEN] > 0.5
        assert ratios.get(HEALTHY, 0.0) == 0.0
        runs = _by_template(warm_prom.query("loopguard:runs:increase15m"))
        assert runs[BROKEN] >= 20 and runs[HEALTHY] >= 20


class TestAlertsOnDemo:
    """The alerts Prometheus raises from the demo."""

    def test_broken_template_alert_fires(self, warm_prom: PrometheusServer) -> None:
        """The broken-template alert fires for support_triage@v3; order_status@v1 never alerts."""

        def broken_firing(alerts: list[dict[str, Any]]) -> bool:
            return any(
                a["labels"]["alertname"] == "LoopGuardBrokenPromptTemplate"
                and a["labels"].get("prompt_template") == BROKEN
                and a["state"] == "firing"
                for a in alerts
            )

        alerts = wait_until(
            warm_prom.alerts, broken_firing, timeout=40, what="broken template firing"
        )
        (alert,) = [
            a
            for a in alerts
            if a["labels"]["alertname"] == "LoopGuardBrokenPromptTemplate"
            and a["labels"].get("prompt_template") == BROKEN
        ]
        assert alert["labels"]["severity"] == "critical"
        assert "stuck in tool-call loops" in alert["annotations"]["summary"]
        assert not [a for a in alerts if a["labels"].get("prompt_template") == HEALTHY]
        # ALERTS has a sample per evaluation an alert was pending or firing: none for HEALTHY.
        assert warm_prom.query(f'ALERTS{{prompt_template="{HEALTHY}"}}[5m]') == []
