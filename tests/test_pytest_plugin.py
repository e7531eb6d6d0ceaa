"""The pytest plugin otel-loopguard installs: one fixture, nothing heavy, nothing else changed.

These tests run pytest on small test files through ``pytester``. The plugin is found through the
installed distribution's ``pytest11`` entry point; when the installed metadata names another
module than ``pyproject.toml`` does (an install older than the source), they are skipped.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
PLUGIN = "otel_loopguard"


def _declared() -> str:
    doc = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return str(doc["project"]["entry-points"]["pytest11"][PLUGIN])


def _installed() -> str | None:
    found = [e.value for e in entry_points(group="pytest11") if e.name == PLUGIN]
    return found[0] if found else None


requires_current_install = pytest.mark.skipif(
    _installed() != _declared(),
    reason=f"the installed pytest11 entry point is {_installed()!r}, not {_declared()!r}: "
           "reinstall otel-loopguard")

LOOPING_TEST = """
def test_agent_loops(loopguard_harness):
    with loopguard_harness.run(prompt="triage@v1") as run:
        for _ in range(3):
            run.tool("search", {"q": "x"}, "no results")
    (report,) = loopguard_harness.check()
    assert report.action.label == "warn"
    assert report.prompt_template == "triage@v1"
"""


def test_entry_point_is_the_plugin_module() -> None:
    """pyproject.toml registers the small plugin module, under the name users disable."""
    assert _declared() == "otel_loopguard._pytest_plugin"


@requires_current_install
class TestPlugin:
    def test_fixture_is_available_without_configuration(self, pytester: pytest.Pytester) -> None:
        """A test can use ``loopguard_harness`` with no conftest and no import."""
        pytester.makepyfile(LOOPING_TEST)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)

    def test_disabled_with_no_option(self, pytester: pytest.Pytester) -> None:
        """``-p no:otel_loopguard`` turns the plugin off: the fixture is then unknown."""
        pytester.makepyfile(LOOPING_TEST)
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", f"no:{PLUGIN}")
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*fixture 'loopguard_harness' not found*"])

    def test_fixture_can_be_imported_when_disabled(self, pytester: pytest.Pytester) -> None:
        """With the plugin off, importing the fixture in a conftest brings it back."""
        pytester.makeconftest("from otel_loopguard.testing import loopguard_harness  # noqa\n")
        pytester.makepyfile(LOOPING_TEST)
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", f"no:{PLUGIN}")
        result.assert_outcomes(passed=1)

    def test_registers_no_hooks(self, pytester: pytest.Pytester) -> None:
        """The plugin module defines a fixture and no ``pytest_*`` hook."""
        pytester.makepyfile("""
            def test_hooks(pytestconfig):
                plugin = pytestconfig.pluginmanager.get_plugin("otel_loopguard")
                assert plugin is not None
                assert [n for n in vars(plugin) if n.startswith("pytest_")] == []
        """)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)

    def test_loading_imports_nothing_heavy(self, pytester: pytest.Pytester) -> None:
        """In a fresh pytest process, loading the plugin imports no OpenTelemetry, no Prometheus
        client and no loopguard module beyond the package and the plugin itself."""
        pytester.makepyfile("""
            import sys

            def test_modules():
                heavy = sorted(m for m in sys.modules if m.split(".")[0] in
                               ("opentelemetry", "prometheus_client", "orjson", "grpc"))
                ours = sorted(m for m in sys.modules if m.startswith("otel_loopguard"))
                assert heavy == []
                assert ours == ["otel_loopguard", "otel_loopguard._pytest_plugin"]
        """)
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)

    def test_leaves_opentelemetry_globals_alone(self, pytester: pytest.Pytester) -> None:
        """Using the fixture sets no global tracer provider: the app's own set-up still wins."""
        pytester.makepyfile("""
            from opentelemetry import trace

            def test_uses_harness(loopguard_harness):
                with loopguard_harness.run() as run:
                    run.tool("search", {"q": "x"}, "ok")
                assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
        """)
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)

    def test_fixture_imported_while_enabled_lists_cleanly(self, pytester: pytest.Pytester) -> None:
        """A conftest that imports the fixture (as for the plugin off) while the plugin is on:
        tests run, and ``pytest --fixtures`` lists it rather than failing with an internal error
        (two registrations of one function compare equal up to their ``FixtureDef``)."""
        pytester.makeconftest("from otel_loopguard.testing import loopguard_harness  # noqa\n")
        pytester.makepyfile(LOOPING_TEST)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
        listed = pytester.runpytest("-p", "no:cacheprovider", "--fixtures")
        assert listed.ret == 0, listed.stdout.str()
        listed.stdout.fnmatch_lines(["loopguard_harness -- *"])


def test_an_agent_s_own_calls_inside_a_scripted_run_belong_to_it() -> None:
    """The run's root span, and a nested agent's, are current inside: an agent's own code,
    instrumented on the harness's provider, calls its tools in that run (they were three runs
    of one call each, and the loop a test meant to catch passed)."""
    import json

    from otel_loopguard.testing import LoopGuardHarness

    harness = LoopGuardHarness()
    tracer = harness.provider.get_tracer("my_agent")
    with harness.run(prompt="triage@v1") as run, run.agent("billing"):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": json.dumps({"q": 1}),
                    "gen_ai.tool.call.result": "none"}):
                pass
    (report,) = harness.check()
    assert (report.tool_calls, report.prompt_template, report.action.label) == (
        3, "triage@v1", "warn")
    assert [d.code for d in report.findings] == ["STAGNANT_RESULT"]
    harness.shutdown()
