"""``serve --log-level`` and ``--log-format json``: what reaches stderr, and in which shape."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from _signals import sigterm_when_handled

from otel_loopguard.cli import main
from otel_loopguard.cli._logs import JsonFormatter


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


def _serve(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *flags: str,
           during: Callable[[Any], None] = lambda receiver: None) -> tuple[int, str]:
    """Run ``serve`` on a free port in this process, call ``during(receiver)`` once it listens
    and its signal handlers are in place, then stop it with SIGTERM; return (code, stderr)."""
    from otel_loopguard.cli import _serve as serve_module

    start = serve_module.LoopGuardReceiver.start
    original = signal.getsignal(signal.SIGTERM)

    def start_and_act(receiver: Any) -> None:
        start(receiver)

        threading.Thread(target=sigterm_when_handled, args=(lambda: during(receiver),),
                         kwargs={"original": original}, daemon=True).start()

    monkeypatch.setattr(serve_module.LoopGuardReceiver, "start", start_and_act)
    code = main(["serve", "--no-grpc", "--http-port", "0", *flags])
    return code, capsys.readouterr().err


class TestLogFormat:
    def test_json_lines(self, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
        """With --log-format json every stderr line is a JSON object: the listening line and
        the shutdown line at level info, with a UTC time and the logger's name."""
        code, err = _serve(monkeypatch, capsys, "--log-format", "json")
        assert code == 0
        lines = [json.loads(line) for line in err.splitlines()]
        assert [line["level"] for line in lines] == ["info", "info"]
        assert "listening on OTLP/HTTP http://127.0.0.1:" in lines[0]["message"]
        assert "shutting down" in lines[1]["message"]
        assert all(line["logger"] == "otel_loopguard.cli._serve" for line in lines)
        assert all(line["time"].endswith("Z") for line in lines)

    def test_library_warnings_are_json_too(self, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """A warning logged by the receiver (a tool span with no parent) comes out as JSON as
        well."""
        def post_lone_tool_call(receiver: Any) -> None:
            span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "execute_tool search",
                    "startTimeUnixNano": "1", "endTimeUnixNano": "2",
                    "attributes": [{"key": key, "value": {"stringValue": value}} for key, value
                                   in (("gen_ai.operation.name", "execute_tool"),
                                       ("gen_ai.tool.name", "search"))]}
            body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
            request = urllib.request.Request(f"{receiver.http_url}/v1/traces", body.encode(),
                                             {"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=10).read()
            assert receiver.flush(10)

        code, err = _serve(monkeypatch, capsys, "--log-format", "json",
                           "--reorder-window", "0", during=post_lone_tool_call)
        assert code == 0
        lines = [json.loads(line) for line in err.splitlines()]
        warnings = [line for line in lines if line["level"] == "warning"]
        assert len(warnings) == 1
        assert warnings[0]["logger"].startswith("otel_loopguard")
        assert "a tool span with no parent span" in warnings[0]["message"]

    def test_the_sdk_exporters_messages_follow_the_format_and_level(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """The OpenTelemetry SDK's loggers (the forwarding exporter's retries) follow
        --log-format and --log-level too: they came out as plain text, and at any level."""
        from otel_loopguard.cli._logs import configure_logging

        exporter = logging.getLogger("opentelemetry.exporter.otlp.proto.grpc.exporter")
        restore = configure_logging("warning", "json")
        try:
            exporter.warning("Transient error %s encountered while exporting, retrying", "X")
            exporter.info("not at this level")
        finally:
            restore()
        (line,) = [json.loads(text) for text in capsys.readouterr().err.splitlines()]
        assert (line["level"], line["logger"]) == ("warning", exporter.name)
        assert line["message"] == "Transient error X encountered while exporting, retrying"
        assert logging.getLogger("opentelemetry").propagate is True  # put back

    def test_text_is_the_message(self, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """The default text format writes each message as it is, one per line."""
        code, err = _serve(monkeypatch, capsys)
        assert code == 0
        lines = err.splitlines()
        assert lines[0].startswith("otel-loopguard serve: listening on OTLP/HTTP")
        assert lines[1] == "otel-loopguard serve: shutting down (finishing accepted spans)"


class TestLogLevel:
    def test_warning_level_hides_the_info_lines(self, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """--log-level warning writes neither the listening line nor the shutdown line."""
        code, err = _serve(monkeypatch, capsys, "--log-level", "warning")
        assert (code, err) == (0, "")

    def test_debug_level_and_logger_restored(self, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        """--log-level debug lets debug records through; afterwards the otel_loopguard logger
        is as it was (serve run in a test or an application leaves nothing behind)."""
        logger = logging.getLogger("otel_loopguard")
        before = (logger.level, logger.propagate, list(logger.handlers))

        def debug_line(_receiver: Any) -> None:
            logging.getLogger("otel_loopguard.test").debug("a debug line")

        code, err = _serve(monkeypatch, capsys, "--log-level", "debug", during=debug_line)
        assert code == 0 and "a debug line" in err.splitlines()
        assert (logger.level, logger.propagate, list(logger.handlers)) == before

    def test_bad_level_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown level is refused by the parser, exit 2."""
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--log-level", "verbose"])
        assert exited.value.code == 2
        assert "--log-level" in capsys.readouterr().err


def test_json_formatter_keeps_the_traceback_on_one_line() -> None:
    """An exception's traceback is a field of the one JSON line, not lines of its own."""
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("otel_loopguard.x", logging.ERROR, __file__, 1, "failed %s",
                                   ("here",), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    doc = json.loads(line)
    assert (doc["level"], doc["message"]) == ("error", "failed here")
    assert doc["exception"].endswith("ValueError: boom")
