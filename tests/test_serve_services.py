"""``serve``'s series name the sending service: ``service_name``, capped like every label.

A real ``otel-loopguard serve`` process, real agents (TracerProviders with their own
``service.name``) exporting over OTLP/HTTP, and its ``/metrics`` read as Prometheus would.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _otlp_files import export_looping_run
from opentelemetry.sdk.resources import Resource
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]


class _Serve:
    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process, self.url = process, url

    def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        return out


@pytest.fixture(name="serve")
def _serve(request: pytest.FixtureRequest) -> Iterator[_Serve]:
    """Start ``serve`` on a port of its choosing (0) and read the address from its banner."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPGUARD_")}
    env.update(getattr(request, "param", {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_loopguard", "serve", "--no-grpc", "--http-port", "0",
         "--reorder-window", "0", "--reports", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    banner = process.stderr.readline()
    match = re.search(r"(http://[\d.]+:\d+)/v1/traces", banner)
    if match is None:
        process.kill()
        pytest.fail(f"serve did not start: {banner}{process.stderr.read()}")
    running = _Serve(process, match.group(1))
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _wait_for(serve: _Serve, name: str, labels: dict[str, str]) -> float:
    """Return the sample once serve has checked the runs (the reorder window is 0)."""
    import time

    deadline = time.monotonic() + 20
    key = (name, frozenset(labels.items()))
    while time.monotonic() < deadline:
        value = serve.samples().get(key)
        if value is not None:
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {name}{labels} in {sorted(serve.samples())}")


class TestServiceLabel:
    def test_two_services_get_their_own_series(self, serve: _Serve) -> None:
        """Two services running the same template count in two series, not one."""
        export_looping_run(serve.url, "checkout-agent", "triage@v1")
        export_looping_run(serve.url, "checkout-agent", "triage@v1")
        export_looping_run(serve.url, "support-agent", "triage@v1")
        for service, runs in (("checkout-agent", 2), ("support-agent", 1)):
            labels = {"prompt_template": "triage@v1", "service_name": service}
            assert _wait_for(serve, "loopguard_runs_total", labels) == runs
            assert _wait_for(serve, "loopguard_tool_calls_total",
                             {**labels, "tool": "search"}) == 3 * runs
        flagged = {dict(k[1])["service_name"]: v for k, v in serve.samples().items()
                   if k[0] == "loopguard_loop_detected_total"}
        assert set(flagged) == {"checkout-agent", "support-agent"}
        assert flagged["checkout-agent"] == 2 * flagged["support-agent"] > 0

    def test_a_resource_without_service_name_is_the_sdks_default(self, serve: _Serve) -> None:
        """Spans whose resource names no service count under the name the SDK gives them."""
        default = Resource.create({}).attributes["service.name"]
        export_looping_run(serve.url, str(default), "triage@v1")
        assert _wait_for(serve, "loopguard_runs_total",
                         {"prompt_template": "triage@v1", "service_name": str(default)}) == 1

    @pytest.mark.parametrize("serve", [{"LOOPGUARD_MAX_SERVICES": "1"}], indirect=True)
    def test_services_past_the_cap_count_as_other(self, serve: _Serve) -> None:
        """Past max_services (LOOPGUARD_MAX_SERVICES), a service counts under 'other' and in
        loopguard_label_overflow_total{label="service_name"}."""
        export_looping_run(serve.url, "first-agent", "triage@v1")
        assert _wait_for(serve, "loopguard_runs_total",
                         {"prompt_template": "triage@v1", "service_name": "first-agent"}) == 1
        export_looping_run(serve.url, "second-agent", "triage@v1")
        assert _wait_for(serve, "loopguard_runs_total",
                         {"prompt_template": "triage@v1", "service_name": "other"}) == 1
        assert _wait_for(serve, "loopguard_label_overflow_total",
                         {"label": "service_name"}) >= 1
        services = {dict(k[1]).get("service_name") for k in serve.samples()}
        assert "second-agent" not in services
