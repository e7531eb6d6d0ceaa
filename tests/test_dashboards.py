"""Contract tests for the Grafana dashboard and the Prometheus rules the package ships."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from otel_loopguard.metrics._names import (
    BUDGET_EXCEEDED,
    ENFORCED,
    LOOP_DETECTED,
    METRIC_NAMES,
    OPEN_RUNS,
    RECEIVER_METRIC_NAMES,
    RUNS,
    RUNS_FLAGGED,
    TOOL_CALLS,
)

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
"""The dashboard and rules as the repository keeps them (the wheel ships copies, test_packaging
and test_assets_cli check that they are the same)."""
DASHBOARD = DASHBOARDS / "loopguard.json"
ALERTS = DASHBOARDS / "alerts.yaml"
ALERTS_TEST = DASHBOARDS / "alerts_test.yaml"
DATASOURCE_UID = "${datasource}"
PROMPT_TEMPLATE_FILTER = 'prompt_template=~"$prompt_template"'
AGENT_FILTER = 'prompt_template=~"($agent)(/.*)?"'
"""The Coding agent variable, applied in the queries: Prompt template's All is `.*`, which Grafana
sends as is, so the variable's own regex (which only narrows its drop-down) does not reach them."""
SERVICE_FILTER = 'service_name=~"$service_name"'
TARGET_FILTER = 'job=~"$job",instance=~"$instance"'
RECEIVER_METRICS = RECEIVER_METRIC_NAMES
"""The metrics only ``serve`` exports, on the dashboard's serve row."""
EXPORTED = METRIC_NAMES | RECEIVER_METRICS
PROMETHEUS_METRICS = frozenset({"up"})
"""Series Prometheus itself writes for every target."""
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
RUNBOOK = Path(__file__).resolve().parent.parent / "docs" / "runbook.md"
TEMPLATED_METRICS = frozenset({TOOL_CALLS, LOOP_DETECTED, BUDGET_EXCEEDED, RUNS, RUNS_FLAGGED,
                               ENFORCED})
"""Metrics carrying a ``prompt_template`` label, which every dashboard selector must filter on."""

PROMTOOL = shutil.which("promtool")
requires_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not found (apt-get install prometheus); CI installs it"
)

# --- PromQL metric-name extraction ----------------------------------------------------------------

_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_NAME_MATCHERS = re.compile(r'__name__\s*=\s*"([^"]+)"')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_IDENTIFIER = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = frozenset(
    {
        # aggregation operators (they can be followed by `by (...)` instead of `(`)
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
        "bottomk", "topk", "quantile", "limitk", "limit_ratio",
        # modifiers, set and comparison operators, literals
        "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
        "and", "or", "unless", "atan2", "inf", "nan",
    }
)  # fmt: skip
_GRAFANA_MACROS = {"__rate_interval": "1m", "__range": "1h", "__interval": "15s"}
_MACRO = re.compile(r"\$\{?(__rate_interval|__range|__interval)\}?(?!\w)")
_VARIABLE = re.compile(r"\$\{\w+(?::\w+)?\}|\$\w+")
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*(?:\{[^{}]*\})?\s*,")


def metric_names(expr: str) -> set[str]:
    """Return the metric names a PromQL expression selects.

    Functions, labels, keywords and durations are skipped.
    """
    names = set(_NAME_MATCHERS.findall(expr))
    stripped = _BRACKETS.sub("", _BRACES.sub("", _STRINGS.sub('""', expr)))
    stripped = _GROUPING.sub(r"\1", stripped)
    names.update(n for n in _IDENTIFIER.findall(stripped) if n.lower() not in _KEYWORDS)
    return names


def substitute_macros(expr: str) -> str:
    """Return plain PromQL: Grafana macros become fixed durations, template variables ``.*``."""
    return _VARIABLE.sub(".*", _MACRO.sub(lambda m: _GRAFANA_MACROS[m[1]], expr))


# --- Loading --------------------------------------------------------------------------------------


def iter_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yield every panel, including panels nested in collapsed rows."""
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels", []))


PANELS_KEY = "loopguard:panels"
"""The PNG text chunk of docs/img/dashboard.png that lists the panels drawn (``panel_list``)."""


def panel_list(dashboard: dict[str, Any]) -> list[list[Any]]:
    """Return ``[type, title, x, y, w, h]`` for every panel, in the dashboard's order."""
    return [[p["type"], p["title"], *(p["gridPos"][k] for k in "xywh")]
            for p in iter_panels(dashboard["panels"])]


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    """Parse a dashboard JSON file."""
    return dict(json.loads(path.read_text()))


def dashboard_targets(dashboard: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Return ``(panel, target)`` for every query target of the dashboard."""
    return [(p, t) for p in iter_panels(dashboard["panels"]) for t in p.get("targets", [])]


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """Return ``(id, expr)`` for every PromQL target expression, id being ``panel-<id>-<refId>``."""
    return [(f"panel-{p['id']}-{t['refId']}", t["expr"]) for p, t in dashboard_targets(dashboard)]


def load_rules(path: Path = ALERTS) -> list[dict[str, Any]]:
    """Return every rule (recording and alerting) of a Prometheus rule file."""
    doc = yaml.safe_load(path.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def recording_rule_names() -> set[str]:
    """Return the names of the recording rules defined in alerts.yaml."""
    return {rule["record"] for rule in load_rules() if "record" in rule}


def alert_rules() -> dict[str, dict[str, Any]]:
    """Return the alerting rules of alerts.yaml by alert name."""
    return {rule["alert"]: rule for rule in load_rules() if "alert" in rule}


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool and capture its combined output."""
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, check=False, timeout=120
    )


def check_exprs_with_promtool(
    exprs: list[tuple[str, str]], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """Write macro-substituted expressions as recording rules; ``promtool check rules`` them."""
    rules = [
        {"record": f"dashboard:{name.replace('-', '_')}", "expr": substitute_macros(e)}
        for name, e in exprs
    ]
    path = tmp_path / "dashboard_exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    return run_promtool("check", "rules", str(path))


@pytest.fixture(name="dashboard")
def _dashboard() -> dict[str, Any]:
    return load_dashboard()


# --- Tests ----------------------------------------------------------------------------------------


class TestMetricNames:
    """The PromQL metric-name extractor the contract tests rely on."""

    @pytest.mark.parametrize(
        ("expr", "expected"),
        [
            ("loopguard_runs_total", {"loopguard_runs_total"}),
            ('sum by (prompt_template, tool) '
             '(rate(a_total{tool="x_total",p=~"$v"}[$__rate_interval]))', {"a_total"}),
            ("sum without (instance) (b) / ignoring (kind) group_left (x) c", {"b", "c"}),
            ("rate(a[1h] offset 1h) > 3 * on (p) b and c > 0.1 unless d offset 10m",
             {"a", "b", "c", "d"}),
            ("loopguard:loop_detected:rate10m > 1e3 or vector(0)",
             {"loopguard:loop_detected:rate10m"}),
            ('topk(10, sum by (p) (increase(x[$__range]))) and on (p) {__name__="y"}', {"x", "y"}),
            ("sum by (le) (rate(h_bucket[5m:1m])) > bool Inf", {"h_bucket"}),
        ],
        ids=["bare", "functions-labels-strings", "grouping", "offsets-durations", "recording-rule",
             "name-matcher", "subquery-literals"],
    )  # fmt: skip
    def test_extracts_only_metric_names(self, expr: str, expected: set[str]) -> None:
        """Only metric names come out, not functions, labels, keywords, durations or numbers."""
        assert metric_names(expr) == expected

    def test_substitutes_grafana_macros(self) -> None:
        """Grafana macros become fixed durations and template variables become a match-all regex."""
        expr = (
            'rate(a{p=~"$prompt_template",d="${datasource}"}[$__rate_interval])'
            ' + b[$__range] + c[${__interval}]'
        )
        assert substitute_macros(expr) == 'rate(a{p=~".*",d=".*"}[1m]) + b[1h] + c[15s]'


class TestDashboardStructure:
    """The JSON structure of dashboards/loopguard.json."""

    def test_uid_is_stable(self, dashboard: dict[str, Any]) -> None:
        """The dashboard keeps the uid that links and provisioning refer to."""
        assert dashboard["uid"] == "otel-loopguard"
        assert dashboard["id"] is None
        assert dashboard["schemaVersion"] >= 39

    def test_uids_are_unique_across_dashboards(self) -> None:
        """No two dashboards in the assets share a uid."""
        uids = [load_dashboard(path).get("uid") for path in sorted(DASHBOARDS.glob("*.json"))]
        assert all(uids)
        assert len(uids) == len(set(uids))

    def test_has_datasource_variable(self, dashboard: dict[str, Any]) -> None:
        """A `datasource` variable of type datasource lets the user pick any Prometheus."""
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"

    def test_has_prompt_template_variable(self, dashboard: dict[str, Any]) -> None:
        """A multi-value `prompt_template` variable with an All option (`.*`) queries label
        values.
        """
        variable = {v["name"]: v for v in dashboard["templating"]["list"]}["prompt_template"]
        assert variable["type"] == "query"
        assert variable["datasource"]["uid"] == DATASOURCE_UID
        assert variable["definition"] == (
            f"label_values({TOOL_CALLS}{{{TARGET_FILTER},{SERVICE_FILTER}}}, prompt_template)")
        assert (variable["multi"], variable["includeAll"], variable["allValue"]) == (
            True, True, ".*"
        )

    def test_has_agent_variable(self, dashboard: dict[str, Any]) -> None:
        """A multi-value `agent` variable (the coding agents) narrows the prompt templates to
        those of the chosen agents (`claude-code/<model>`...); All (`.*`) keeps every one."""
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        agent = variables["agent"]
        assert (agent["type"], agent["query"]) == ("custom", "claude-code,codex,gemini-cli")
        assert (agent["multi"], agent["includeAll"], agent["allValue"]) == (True, True, ".*")
        pattern = variables["prompt_template"]["regex"].strip("/")
        import re
        chosen = re.compile(pattern.replace("${agent:regex}", "codex|gemini-cli"))
        assert chosen.match("codex/gpt-5-codex") and chosen.match("gemini-cli")
        assert not chosen.match("claude-code/claude-sonnet-4-5")
        assert re.compile(pattern.replace("${agent:regex}", ".*")).match("triage@v3")

    def test_has_service_variable(self, dashboard: dict[str, Any]) -> None:
        """A multi-value `service_name` variable (serve's sending services) whose All is `.*`,
        which also keeps the processor's series: they have no service_name label."""
        variable = {v["name"]: v for v in dashboard["templating"]["list"]}["service_name"]
        assert variable["type"] == "query"
        assert variable["datasource"]["uid"] == DATASOURCE_UID
        assert variable["definition"] == (
            f"label_values({TOOL_CALLS}{{{TARGET_FILTER}}}, service_name)")
        assert (variable["multi"], variable["includeAll"], variable["allValue"]) == (
            True, True, ".*")

    def test_template_breakdowns_are_per_service(self, dashboard: dict[str, Any]) -> None:
        """Every series broken down by prompt template is broken down by service too, and
        filtered by `$service_name`, so two services' runs of one template never add up."""
        checked = 0
        for name, expr in dashboard_exprs(dashboard):
            for grouping in re.findall(r"\b(?:by|on) \(([^)]*)\)", expr):
                labels = [label.strip() for label in grouping.split(",")]
                if "prompt_template" in labels:
                    checked += 1
                    assert "service_name" in labels, f"{name}: {grouping}"
            if PROMPT_TEMPLATE_FILTER in expr:
                assert expr.count(SERVICE_FILTER) == expr.count(PROMPT_TEMPLATE_FILTER), name
        assert checked >= 15

    def test_has_job_and_instance_variables(self, dashboard: dict[str, Any]) -> None:
        """Multi-value `job` and `instance` variables pick the scrape targets; the instances
        listed are those of the chosen jobs. Job's All is the jobs listed (those with loopguard
        metrics), not `.*`, which would put every target of the Prometheus on the `up` panel."""
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert [v["name"] for v in dashboard["templating"]["list"]] == [
            "datasource", "trace_datasource", "job", "instance", "service_name", "agent",
            "prompt_template"]
        assert variables["job"]["definition"] == f"label_values({OPEN_RUNS}, job)"
        assert variables["instance"]["definition"] == (
            f'label_values({OPEN_RUNS}{{job=~"$job"}}, instance)')
        for name in ("job", "instance"):
            variable = variables[name]
            assert variable["type"] == "query"
            assert variable["datasource"]["uid"] == DATASOURCE_UID
            assert (variable["multi"], variable["includeAll"]) == (True, True)
        assert "allValue" not in variables["job"]
        assert variables["instance"]["allValue"] == ".*"

    def test_every_selector_filters_on_job_and_instance(self, dashboard: dict[str, Any]) -> None:
        """Every series selector of every panel is narrowed by the `$job` and `$instance`
        variables."""
        selector = re.compile(r"(?<![\w:])([a-z_]+)(\{[^{}]*\})?(?=\s*[\[)\s])")
        for name, expr in dashboard_exprs(dashboard):
            for metric, labels in selector.findall(expr + " "):
                if metric in EXPORTED | PROMETHEUS_METRICS:
                    assert labels.startswith("{" + TARGET_FILTER), f"{name}: {metric}{labels}"

    def test_serve_row(self, dashboard: dict[str, Any]) -> None:
        """A serve row shows its intake: requests and spans by outcome, the queue, forwarding,
        and whether each target is up."""
        panels = list(iter_panels(dashboard["panels"]))
        row = next(i for i, p in enumerate(panels) if p["title"] == "serve (OTLP receiver)")
        shown = set().union(*(metric_names(substitute_macros(t["expr"]))
                              for p in panels[row + 1:] for t in p.get("targets", [])))
        assert shown == RECEIVER_METRICS | PROMETHEUS_METRICS
        by_outcome = [p for p in panels[row + 1:]
                      if any("sum by (outcome)" in t["expr"] for t in p["targets"])]
        assert len(by_outcome) == 2

    def test_every_panel_has_title_and_description(self, dashboard: dict[str, Any]) -> None:
        """Every panel has a title, and every non-row panel a description of the question it
        answers.
        """
        for panel in iter_panels(dashboard["panels"]):
            assert panel.get("title"), panel
            assert panel["type"] == "row" or panel.get("description"), panel["title"]

    def test_panel_ids_are_unique_and_fit_the_grid(self, dashboard: dict[str, Any]) -> None:
        """Panel ids are unique and every panel lies inside Grafana's 24-column grid."""
        panels = list(iter_panels(dashboard["panels"]))
        assert len({p["id"] for p in panels}) == len(panels)
        for panel in panels:
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]

    def test_every_target_has_expr_and_uses_datasource_variable(
        self, dashboard: dict[str, Any]
    ) -> None:
        """Every query target has a non-empty `expr` and points at the `${datasource}` variable."""
        targets = dashboard_targets(dashboard)
        assert len(targets) >= 10
        for panel, target in targets:
            assert target.get("expr", "").strip(), panel["title"]
            assert target["datasource"] == {
                "type": "prometheus",
                "uid": DATASOURCE_UID,
            }, panel["title"]

    def test_every_query_panel_uses_datasource_variable(self, dashboard: dict[str, Any]) -> None:
        """Every panel with queries has `${datasource}` as its panel datasource."""
        for panel in iter_panels(dashboard["panels"]):
            if panel.get("targets"):
                assert panel["datasource"] == {
                    "type": "prometheus",
                    "uid": DATASOURCE_UID,
                }, panel["title"]

    def test_templated_metrics_filter_on_prompt_template(self, dashboard: dict[str, Any]) -> None:
        """Every selector of a metric with a prompt_template label is filtered by the
        `$prompt_template` variable.
        """
        selector = re.compile(r"(\w+)(\{[^{}]*\})?")
        for name, expr in dashboard_exprs(dashboard):
            for metric, labels in selector.findall(expr):
                if metric in TEMPLATED_METRICS:
                    assert PROMPT_TEMPLATE_FILTER in labels, f"{name}: {metric}{labels}"
                    assert AGENT_FILTER in labels, f"{name}: {metric}{labels}"

    def test_coding_agent_narrows_every_templated_query(self, dashboard: dict[str, Any]) -> None:
        """With Prompt template on All (`.*`, sent as is) and Coding agent on codex and gemini-cli,
        every selector of a templated metric keeps the templates of those agents and no other;
        with Coding agent on All (`.*`) it keeps every template."""
        matcher = re.compile(r'prompt_template=~"((?:\\.|[^"\\])*)"')
        selector = re.compile(r"(\w+)(\{[^{}]*\})")
        checked = 0
        for name, expr in dashboard_exprs(dashboard):
            for metric, labels in selector.findall(expr):
                if metric not in TEMPLATED_METRICS:
                    continue
                checked += 1
                for agent, kept, dropped in (
                    ("(codex|gemini-cli)", ["codex/gpt-5-codex", "gemini-cli"],
                     ["claude-code/claude-sonnet-4-5", "support_triage@v3", "codex-like@v1"]),
                    (".*", ["claude-code/claude-sonnet-4-5", "support_triage@v3", "unknown"], []),
                ):
                    patterns = [p.replace("$prompt_template", ".*").replace("$agent", agent)
                                for p in matcher.findall(labels)]
                    def keeps(value: str, patterns: list[str] = patterns) -> bool:
                        return all(re.fullmatch(p, value) for p in patterns)
                    assert all(keeps(value) for value in kept), (name, agent, kept)
                    assert not any(keeps(value) for value in dropped), (name, agent, dropped)
        assert checked >= 20

    def test_legends_name_every_label_a_series_is_grouped_by(
        self, dashboard: dict[str, Any]
    ) -> None:
        """A graph query `sum by (a, b)` has a legend with {{a}} and {{b}}: without one, the
        series it splits into share a legend and cannot be told apart."""
        for panel in iter_panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                grouped = re.match(r"(?:\d+ \* )?(?:sum|max|min|avg) by \(([^)]*)\)",
                                   target["expr"])
                if target.get("format") == "table" or grouped is None:
                    continue
                for label in (part.strip() for part in grouped[1].split(",")):
                    assert f"{{{{{label}}}}}" in target.get("legendFormat", ""), \
                        f"panel {panel['id']} {target['refId']}: no {{{{{label}}}}} in legend"

    def test_ratios_drop_points_with_nothing_to_divide_by(self, dashboard: dict[str, Any]) -> None:
        """A share or a per-run ratio divides by `(... > 0)`: a run is counted at its first tool
        call and flagged later, so a window can hold findings of a run and no run, and `x / 0`
        is `+Inf`, drawn as a 100 % share."""
        ratios = 0
        for panel in iter_panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                expr = target["expr"]
                if " / " not in expr:
                    continue
                ratios += 1
                denominator = expr.split(" / ", 1)[1]
                assert denominator.startswith("(sum by ("), (panel["title"], denominator[:60])
                depth, end = 0, 0
                while True:  # the parenthesised denominator: up to its closing parenthesis
                    depth += {"(": 1, ")": -1}.get(denominator[end], 0)
                    end += 1
                    if depth == 0:
                        break
                assert denominator[:end].endswith(" > 0)"), panel["title"]
        assert ratios >= 6

    def test_ranges_use_grafana_macros(self, dashboard: dict[str, Any]) -> None:
        """Every range selector uses `$__rate_interval` or `$__range`, never a hard-coded window."""
        for name, expr in dashboard_exprs(dashboard):
            for window in re.findall(r"\[([^\]]*)\]", expr):
                assert window in {"$__rate_interval", "$__range"}, f"{name}: [{window}]"


class TestMetricContract:
    """Dashboards and rules reference only metrics that otel-loopguard exports (style point 37)."""

    def test_dashboard_references_only_exported_metrics(self, dashboard: dict[str, Any]) -> None:
        """Every metric name in a dashboard expression is in METRIC_NAMES, is one of serve's
        (RECEIVER_METRIC_NAMES) or is a loopguard recording rule.
        """
        known = EXPORTED | PROMETHEUS_METRICS | recording_rule_names()
        for name, expr in dashboard_exprs(dashboard):
            names = metric_names(substitute_macros(expr))
            assert names, f"{name}: no metric found in {expr!r}"
            assert names <= known, f"{name}: unknown {sorted(names - known)} in {expr!r}"

    def test_variable_queries_reference_exported_metrics(self, dashboard: dict[str, Any]) -> None:
        """The metric in every `label_values(...)` variable query is exported."""
        queries = [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
        assert queries
        for query in queries:
            assert set(_LABEL_VALUES.findall(query)) <= METRIC_NAMES, query
            assert _LABEL_VALUES.findall(query), query

    def test_dashboard_shows_every_exported_metric(self, dashboard: dict[str, Any]) -> None:
        """Every exported metric appears on at least one panel, so no metric ships without a
        view.
        """
        used = set().union(
            *(metric_names(substitute_macros(e)) for _, e in dashboard_exprs(dashboard))
        )
        assert EXPORTED - used == set()

    def test_rules_reference_only_exported_metrics(self) -> None:
        """Every metric name in a rule expression is in METRIC_NAMES (or the `_created` series
        prometheus-client exposes beside each counter) or a recording rule of the same file.
        """
        created = {name.removesuffix("_total") + "_created" for name in EXPORTED
                   if name.endswith("_total")}
        known = EXPORTED | created | PROMETHEUS_METRICS | recording_rule_names()
        for rule in load_rules():
            names = metric_names(rule["expr"])
            assert names, rule
            assert names <= known, (
                f"{rule.get('record') or rule['alert']}: unknown {sorted(names - known)}"
            )

    def test_recording_rules_are_namespaced(self) -> None:
        """Recording rule names start with `loopguard:` and have the level:metric:operation
        shape.
        """
        for name in recording_rule_names():
            assert re.fullmatch(r"loopguard:\w+:\w+", name), name

    def test_rule_group_and_alerts(self) -> None:
        """alerts.yaml has the loop group and the serve group with the documented alerts."""
        doc = yaml.safe_load(ALERTS.read_text())
        assert [g["name"] for g in doc["groups"]] == ["otel-loopguard", "otel-loopguard-serve"]
        assert set(alert_rules()) == {
            "LoopGuardBrokenPromptTemplate",
            "LoopGuardLoopSpike",
            "LoopGuardWastefulPromptTemplate",
            "LoopGuardBudgetExhausted",
            "LoopGuardLabelOverflow",
            "LoopGuardInternalErrors",
            "LoopGuardServeDown",
            "LoopGuardServeAbsent",
            "LoopGuardServeRejectingSpans",
            "LoopGuardServeLateSpans",
            "LoopGuardServeThrottling",
        }

    def test_serve_alerts_select_the_loopguard_jobs(self) -> None:
        """Every serve alert selects the jobs named loopguard*, as prometheus-scrape.yaml names
        them; the down and absent alerts read Prometheus's own `up`."""
        serve = yaml.safe_load(ALERTS.read_text())["groups"][1]["rules"]
        for rule in serve:
            assert 'job=~"loopguard.*"' in rule["expr"], rule["alert"]
        exprs = {r["alert"]: r["expr"] for r in serve}
        assert exprs["LoopGuardServeDown"] == 'up{job=~"loopguard.*"} == 0'
        assert exprs["LoopGuardServeAbsent"] == 'absent(up{job=~"loopguard.*"})'

    def test_every_alert_has_a_runbook_entry(self) -> None:
        """Every alert's runbook_url is an anchor of docs/runbook.md under the documentation URL
        of pyproject.toml, and the page has a section with that anchor."""
        base = tomllib.loads(PYPROJECT.read_text())["project"]["urls"]["Documentation"]
        page = base.replace("/tree/", "/blob/") + "/runbook.md#"
        headings = {line[3:].strip().lower() for line in RUNBOOK.read_text().splitlines()
                    if line.startswith("## ")}
        for name, rule in alert_rules().items():
            assert rule["annotations"]["runbook_url"] == page + name.lower(), name
            assert name.lower() in headings, name

    def test_runbook_names_every_internal_error_kind(self) -> None:
        """LoopGuardInternalErrors' runbook entry names every place whose contained errors count
        in loopguard_internal_errors_total (the ``where`` of ``guard.handle(where, exc)``), and
        the label's ``<where>:<exception type>`` shape that the alert shows."""
        source = Path(__file__).resolve().parent.parent / "otel_loopguard"
        kinds = {m for f in source.rglob("*.py")
                 for m in re.findall(r'guard\.handle\("([a-z_]+)"', f.read_text("utf-8"))}
        assert {"on_end", "intake", "serve"} <= kinds
        entry = RUNBOOK.read_text("utf-8").split("## LoopGuardInternalErrors")[1].split("\n## ")[0]
        assert "`<where>:<exception type>`" in entry
        assert {k for k in kinds if f"`{k}`" not in entry} == set()

    def test_alerts_have_severity_and_annotations(self) -> None:
        """Every alert carries a severity label and a summary and description annotation."""
        for name, rule in alert_rules().items():
            assert rule["labels"]["severity"] in {"critical", "warning"}, name
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), name

    def test_every_alert_is_tested_firing_and_not_firing(self) -> None:
        """alerts_test.yaml has, for every alert, a case where it fires and a case where it does
        not.
        """
        cases = [
            c
            for t in yaml.safe_load(ALERTS_TEST.read_text())["tests"]
            for c in t.get("alert_rule_test", [])
        ]
        for name in alert_rules():
            outcomes = {bool(c.get("exp_alerts")) for c in cases if c["alertname"] == name}
            assert outcomes == {True, False}, name


@requires_promtool
class TestPromtool:
    """promtool accepts the rules, their unit tests and every dashboard expression."""

    def test_check_rules(self) -> None:
        """`promtool check rules dashboards/alerts.yaml` succeeds."""
        result = run_promtool("check", "rules", str(ALERTS))
        assert result.returncode == 0, result.stdout + result.stderr

    def test_rule_unit_tests(self) -> None:
        """`promtool test rules dashboards/alerts_test.yaml` succeeds."""
        result = run_promtool("test", "rules", str(ALERTS_TEST))
        assert result.returncode == 0, result.stdout + result.stderr

    def test_dashboard_exprs_parse(self, dashboard: dict[str, Any], tmp_path: Path) -> None:
        """Every dashboard expression, with Grafana macros substituted, parses as a recording
        rule.
        """
        result = check_exprs_with_promtool(dashboard_exprs(dashboard), tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr

    def test_broken_dashboard_expr_fails(self, dashboard: dict[str, Any], tmp_path: Path) -> None:
        """A dashboard expression with an unbalanced parenthesis makes the same check fail."""
        name, expr = dashboard_exprs(dashboard)[0]
        broken = expr[: expr.rindex(")")] + expr[expr.rindex(")") + 1 :]
        result = check_exprs_with_promtool([(name, broken)], tmp_path)
        assert result.returncode != 0
        assert "parse error" in result.stdout + result.stderr


class TestExemplars:
    """From a spike to its trace: exemplars on the loop and waste panels, a link to the trace."""

    EXEMPLAR_METRICS = ("loopguard_loop_detected_total", "loopguard_wasted_")

    def test_trace_datasource_variable(self, dashboard: dict[str, Any]) -> None:
        """A data source variable of a trace type (Tempo; Jaeger by editing it) picks the target."""
        (variable,) = [v for v in dashboard["templating"]["list"]
                       if v["name"] == "trace_datasource"]
        assert variable["type"] == "datasource" and variable["query"] in {"tempo", "jaeger"}

    def test_loop_and_waste_panels_show_exemplars_with_a_trace_link(
            self, dashboard: dict[str, Any]) -> None:
        """Every time series of the loop or waste counters asks for exemplars, and its panel
        links the exemplar's trace_id to the trace data source variable; not a ratio's panel,
        whose axis the exemplars' counter values do not belong on (each drawn at 100 %)."""
        found = 0
        for panel in iter_panels(dashboard["panels"]):
            targets = [t for t in panel.get("targets", [])
                       if any(m in t.get("expr", "") for m in self.EXEMPLAR_METRICS)]
            if panel.get("type") != "timeseries" or not targets:
                continue
            if panel["fieldConfig"]["defaults"].get("unit") == "percentunit":
                assert not any(t.get("exemplar") for t in targets), panel["title"]
                continue
            found += 1
            assert all(t.get("exemplar") is True for t in targets), panel["title"]
            (link,) = panel["fieldConfig"]["defaults"]["links"]
            assert "${trace_datasource}" in link["url"]
            assert "${__data.fields.trace_id}" in link["url"]
        assert found >= 4


def png_text(path: Path) -> dict[str, str]:
    """Return the tEXt chunks of a PNG file (keyword → text)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    chunks, offset = {}, 8
    while offset < len(data):
        length = int.from_bytes(data[offset:offset + 4], "big")
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            chunks[keyword.decode("latin-1")] = text.decode("latin-1")
        offset += 12 + length
    return chunks


class TestDashboardPicture:
    """docs/img/dashboard.png is drawn from the current dashboard and says what it is."""

    PICTURE = ROOT / "docs" / "img" / "dashboard.png"

    def test_picture_shows_the_panels_of_the_dashboard(self, dashboard: dict[str, Any]) -> None:
        """The panels docs/render_dashboard.py drew (kept in the PNG) are the dashboard's,
        with their titles and places: change the dashboard, and render the picture again."""
        drawn = png_text(self.PICTURE).get(PANELS_KEY)
        assert drawn is not None, "render it with docs/render_dashboard.py"
        assert json.loads(drawn) == panel_list(dashboard)

    def test_caption_says_what_it_is(self) -> None:
        """The caption in dashboards.md says the picture is every panel's query over the demo,
        drawn outside Grafana, not a screenshot."""
        page = (ROOT / "docs" / "dashboards.md").read_text(encoding="utf-8")
        caption = page[page.index("](img/dashboard.png)"):].split("\n\n", 2)[1]
        assert "every panel" in caption.lower()
        assert "otel-loopguard demo" in caption
        assert "not a Grafana screenshot" in caption
