"""The lines ``otel-loopguard serve`` prints for finished runs: time, service.name, the run."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from _otlp_files import export_looping_run
from _prometheus import free_port
from _signals import sigterm_when_handled

from otel_loopguard.cli import main
from otel_loopguard.cli._serve import report_line
from otel_loopguard.replay.checker import RunReport


def test_flagged_run_line_carries_time_and_service_name(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A flagged run received over OTLP/HTTP is printed with the time it was reported (UTC) and
    the service.name of the agent that sent it."""
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)
    from otel_loopguard.cli import _serve

    bound = threading.Event()  # set once *this* serve listens, not whoever took the port
    start = _serve.LoopGuardReceiver.start

    def start_and_tell(receiver: Any) -> None:
        start(receiver)
        bound.set()

    monkeypatch.setattr(_serve.LoopGuardReceiver, "start", start_and_tell)
    before = datetime.now(timezone.utc)
    for _ in range(5):  # another process may take the free port before serve binds it
        port = free_port()
        bound.clear()

        def agent(port: int = port) -> None:
            if bound.wait(20):  # shutdown checks accepted spans first
                sigterm_when_handled(lambda: export_looping_run(f"http://127.0.0.1:{port}",
                                                                "checkout-agent"))

        thread = threading.Thread(target=agent, daemon=True)
        thread.start()
        code = main(["serve", "--no-grpc", "--http-port", str(port), "--reorder-window", "0"])
        thread.join(20 if code == 0 else 0)
        captured = capsys.readouterr()
        if not (code == 2 and "Address already in use" in captured.err):
            break
    assert code == 0
    (line,) = captured.out.splitlines()
    report = json.loads(line)
    assert list(report)[:3] == ["time", "service.name", "run_id"]
    assert report["service.name"] == "checkout-agent"
    assert report["action"] == "warn"
    assert report["time"].endswith("Z")
    when = datetime.fromisoformat(report["time"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= when <= datetime.now(timezone.utc)


def test_run_without_service_name() -> None:
    """A run whose spans carry no service.name prints it as null, with a millisecond UTC time."""
    now = datetime(2025, 3, 1, 12, 30, 5, 123456, tzinfo=timezone.utc)
    line = report_line(RunReport(run_id="r1"), now)
    assert line["time"] == "2025-03-01T12:30:05.123Z"
    assert line["service.name"] is None
    assert line["run_id"] == "r1"
