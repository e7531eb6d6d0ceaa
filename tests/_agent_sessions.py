"""Sessions of Claude Code, Codex CLI and Gemini CLI, shaped as each agent emits its log events.

One looping and one healthy session per agent, emitted through the OpenTelemetry SDK's real
``LoggerProvider`` (resource, scope, body, ``event.name`` and value types as the agent sets
them), then exported with the real ``OTLPLogExporter`` (HTTP or gRPC) or written as the
Collector's ``file`` exporter writes them (one OTLP/JSON ``ExportLogsServiceRequest`` a line).

Sources of each shape (also in ``/work/shared/facts/coding-agents-telemetry.md``):

* **Claude Code**: code.claude.com/docs/en/monitoring-usage ("Events": ``claude_code.tool_result``
  with ``tool_name``, ``success``, ``duration_ms``, ``error``, ``tool_parameters``,
  ``tool_input``; ``claude_code.api_request`` with ``model``, ``cost_usd``, token counts;
  standard attributes ``session.id``, ``prompt.id``, ``event.sequence``), read from the
  ``zhalice2011/claude-code-docs`` mirror (2026-08-22); body ``claude_code.<event>`` and short
  ``event.name``, string ``success``/``duration_ms`` as the Elastic ``claude_code``
  integration notes describe real payloads; scope ``com.anthropic.claude_code.events``.
* **Codex CLI**: ``openai/codex`` ``codex-rs/otel/src/events/session_telemetry.rs``
  (``codex.tool_result``: ``tool_name``, ``call_id``, ``arguments``, ``duration_ms``,
  ``success``, ``output``; ``codex.sse_event`` ``response.completed`` token counts; common
  fields ``conversation.id``, ``model``, ``app.version``...; every value a string through
  ``%``) and ``docs/config.md`` ``[otel]``; ``time_unix_nano`` 0 as a public receiver notes;
  the OTLP ``event_name`` field is the ``tracing`` callsite name
  (``open-telemetry/opentelemetry-rust`` ``opentelemetry-appender-tracing/src/layer.rs``
  ``set_event_name(metadata.name())``, exported by ``opentelemetry-proto``).
* **Gemini CLI**: ``google-gemini/gemini-cli`` ``docs/cli/telemetry.md`` (Logs, "Tools":
  ``gemini_cli.tool_call`` with ``function_name``, ``function_args``, ``duration_ms``,
  ``success``, ``decision``, ``error``, ``error_type``, ``prompt_id``, ``tool_type``;
  ``gemini_cli.api_response`` with ``model``, token counts) and
  ``packages/core/src/telemetry/loggers.ts`` (body sentence, logger ``gemini-cli``);
  ``packages/core/src/telemetry/types.ts`` ``ToolCallEvent.toOpenTelemetryAttributes`` sets no
  call id (only its ``tool_call`` spans carry one, ``gen_ai.tool.call_id``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from _otlp_files import hex_ids
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource

T0 = 1_760_000_000_000_000_000
"""2025-10-09T08:53:20Z in nanoseconds: the sessions' first event."""
SECOND = 1_000_000_000


@dataclass
class Session:
    """One agent session: the records it emits, under one resource and scope."""

    agent: str
    session_id: str
    resource: dict[str, Any]
    scope: str
    loops: bool
    template: str
    records: list[dict[str, Any]] = field(default_factory=list)
    """Each: ``time`` (ns, 0 for none), ``body``, ``attributes``, optionally ``event_name``."""


def _iso(ns: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- Claude Code ---------------------------------------------------------------------------
def claude_code(session_id: str, *, loops: bool, start: int = T0) -> Session:
    """A Claude Code session (``OTEL_LOG_TOOL_DETAILS=1``): npm test failing, or a fix."""
    resource = {"service.name": "claude-code", "service.version": "2.1.214",
                "os.type": "linux", "host.arch": "amd64"}
    out = Session("claude-code", session_id, resource, "com.anthropic.claude_code.events",
                  loops, "claude-code/claude-sonnet-4-5")
    seq = [0]
    now = [start]

    def emit(event: str, attrs: dict[str, Any], *, step: int = SECOND) -> None:
        now[0] += step
        seq[0] += 1
        common = {"session.id": session_id, "user.id": "u-7f3a", "organization.id": "org-1",
                  "terminal.type": "vscode", "prompt.id": "p-1",
                  "event.name": event, "event.timestamp": _iso(now[0]),
                  "event.sequence": seq[0]}
        out.records.append({"time": now[0], "body": f"claude_code.{event}",
                            "attributes": {**common, **attrs}})

    def api(turn: int) -> None:
        emit("api_request", {"model": "claude-sonnet-4-5", "cost_usd": 0.0123,
                             "duration_ms": 2100,
                             "input_tokens": 1200 + turn, "output_tokens": 180,
                             "cache_read_tokens": 9000, "cache_creation_tokens": 0,
                             "request_id": f"req_{turn:04d}", "query_source": "repl_main_thread"})

    def tool(use_id: str, name: str, tool_input: dict[str, Any], *, ok: bool,
             params: dict[str, Any] | None = None, error: str = "") -> None:
        emit("tool_decision", {"tool_name": name, "tool_use_id": use_id, "decision": "accept",
                               "source": "config"}, step=1)
        attrs: dict[str, Any] = {
            "tool_name": name, "tool_use_id": use_id, "success": "true" if ok else "false",
            "duration_ms": "812", "decision_type": "accept", "decision_source": "config",
            "tool_input_size_bytes": "64", "tool_result_size_bytes": "2048",
            "tool_input": json.dumps(tool_input)}
        if params is not None:
            attrs["tool_parameters"] = json.dumps(params)
        if not ok:
            attrs["error_type"] = "ShellError"
            attrs["error"] = error
        emit("tool_result", attrs)

    emit("user_prompt", {"prompt_length": "42"})
    if loops:
        for turn in range(6):
            api(turn)
            tool(f"toolu_01L{turn:03d}", "Bash", {"command": "npm test",
                                                   "description": "Run the tests"},
                 ok=False, params={"bash_command": "npm", "full_command": "npm test",
                                   "timeout": 120000},
                 error="Error: Exit code 1\nFAIL src/app.test.ts\n  1 failing")
        return out
    steps = [("Glob", {"pattern": "src/**/*.ts"}, True),
             ("Read", {"file_path": "/repo/src/app.ts"}, True),
             ("Grep", {"pattern": "parseDate", "path": "/repo/src"}, True),
             ("Edit", {"file_path": "/repo/src/app.ts", "old_string": "a", "new_string": "b"},
              True),
             ("Bash", {"command": "npm test", "description": "Run the tests"}, False),
             ("Edit", {"file_path": "/repo/src/date.ts", "old_string": "c", "new_string": "d"},
              True),
             ("Bash", {"command": "npm test", "description": "Run the tests"}, True),
             ("TodoWrite", {"todos": [{"content": "fix parseDate", "status": "completed"}]},
              True)]
    for turn, (name, tool_input, ok) in enumerate(steps):
        api(turn)
        tool(f"toolu_01H{turn:03d}", name, tool_input, ok=ok,
             error="" if ok else "Error: Exit code 1")
    return out


# --- Codex CLI -----------------------------------------------------------------------------
def codex(conversation_id: str, *, loops: bool, start: int = T0) -> Session:
    """A Codex CLI session (``codex exec``): the same failing test run, or a fix."""
    resource = {"service.name": "codex_exec", "service.version": "0.46.0", "env": "dev"}
    out = Session("codex", conversation_id, resource, "codex_otel.log_only", loops,
                  "codex/gpt-5-codex")
    now = [start]

    def emit(event: str, attrs: dict[str, Any]) -> None:
        now[0] += SECOND
        common = {"event.name": event, "event.timestamp": _iso(now[0]),
                  "conversation.id": conversation_id, "app.version": "0.46.0",
                  "auth_mode": "ApiKey", "originator": "codex_exec", "terminal.type": "xterm",
                  "model": "gpt-5-codex", "slug": "gpt-5-codex"}
        # time_unix_nano is 0 on Codex records: the time is in event.timestamp only; the
        # OTLP event_name field is the tracing callsite (opentelemetry-appender-tracing sets
        # it to the event's metadata name), the agent's name is the event.name attribute
        out.records.append({"time": 0, "body": None, "attributes": {**common, **attrs},
                            "event_name": "event otel/src/events/session_telemetry.rs:"
                                          f"{700 + len(out.records)}"})

    def turn(n: int) -> None:
        # each response twice, as Codex logs it: the stream's note of the server-sent event
        # (its duration), then the client's record of the response (its token counts)
        emit("codex.sse_event", {"event.kind": "response.completed", "duration_ms": "1500"})
        emit("codex.sse_event", {"event.kind": "response.completed",
                                 "input_token_count": str(3000 + n), "output_token_count": "220",
                                 "cached_token_count": "2000", "reasoning_token_count": "64",
                                 "tool_token_count": "0"})

    def shell(call_id: str, command: str, output: str, *, ok: bool,
              tool: str = "shell") -> None:
        args = {"command": ["bash", "-lc", command], "workdir": "/repo", "timeout_ms": 120000}
        emit("codex.tool_result", {"tool_name": tool, "call_id": call_id,
                                   "arguments": json.dumps(args), "duration_ms": "930",
                                   "success": "true" if ok else "false", "output": output,
                                   "mcp_server": "", "mcp_server_origin": ""})

    emit("codex.conversation_starts", {"provider_name": "openai",
                                       "approval_policy": "on-request",
                                       "sandbox_policy": "workspace-write"})
    emit("codex.user_prompt", {"prompt_length": "51", "prompt": "[REDACTED]"})
    if loops:
        for n in range(6):
            turn(n)
            shell(f"call_L{n:03d}", "pytest tests/test_dates.py -q",
                  "F\nFAILED tests/test_dates.py::test_parse - AssertionError\n1 failed in 0.12s",
                  ok=False)
        return out
    turn(0)
    shell("call_H000", "rg -n parse_date src", "src/dates.py:12:def parse_date(s):", ok=True)
    turn(1)
    shell("call_H001", "sed -n 1,40p src/dates.py", "def parse_date(s):\n    ...", ok=True)
    turn(2)
    patch = "*** Begin Patch\n*** Update File: src/dates.py\n@@\n-    ...\n+    return s\n" \
        "*** End Patch"
    emit("codex.tool_result", {"tool_name": "apply_patch", "call_id": "call_H002",
                               "arguments": json.dumps({"input": patch}), "duration_ms": "40",
                               "success": "true", "output": "Success. Updated the following "
                               "files:\nM src/dates.py"})
    turn(3)
    shell("call_H003", "pytest tests/test_dates.py -q", "F\n1 failed in 0.12s", ok=False)
    turn(4)
    shell("call_H004", "sed -n 1,60p tests/test_dates.py", "def test_parse(): ...", ok=True)
    turn(5)
    shell("call_H005", "pytest tests/test_dates.py -q", ".\n1 passed in 0.10s", ok=True)
    return out


# --- Gemini CLI ----------------------------------------------------------------------------
def gemini_cli(session_id: str, *, loops: bool, start: int = T0) -> Session:
    """A Gemini CLI session: a ``replace`` failing on a missing string, or a clean edit."""
    resource = {"service.name": "gemini-cli", "service.version": "v22.17.0",
                "session.id": session_id}
    out = Session("gemini-cli", session_id, resource, "gemini-cli", loops,
                  "gemini-cli/gemini-2.5-pro")
    now = [start]

    def emit(event: str, body: str, attrs: dict[str, Any]) -> None:
        now[0] += SECOND
        common = {"session.id": session_id, "installation.id": "inst-42", "interactive": True,
                  "event.name": event, "event.timestamp": _iso(now[0])}
        out.records.append({"time": now[0], "body": body, "attributes": {**common, **attrs}})

    def response(n: int) -> None:
        emit("gemini_cli.api_response", "API response from gemini-2.5-pro. Status: 200. "
             "Duration: 2300ms.", {"model": "gemini-2.5-pro", "status_code": 200,
                                   "duration_ms": 2300, "input_token_count": 5000 + n,
                                   "output_token_count": 150, "cached_content_token_count": 0,
                                   "thoughts_token_count": 40, "tool_token_count": 0,
                                   "total_token_count": 5190 + n, "prompt_id": f"{session_id}"
                                   "########1", "auth_type": "gemini-api-key"})

    def call(n: int, name: str, args: dict[str, Any], *, ok: bool, error: str = "") -> None:
        attrs: dict[str, Any] = {"function_name": name, "function_args": json.dumps(args,
                                                                                    indent=2),
                                 "duration_ms": 7, "success": ok, "decision": "auto_accept",
                                 "prompt_id": f"{session_id}########1", "tool_type": "native",
                                 "content_length": 120}  # no call id: Gemini CLI sends none
        if not ok:
            attrs.update({"error": error, "error.message": error,
                          "error_type": "edit_no_occurrence_found",
                          "error.type": "edit_no_occurrence_found"})
        body = f"Tool call: {name}. Decision: auto_accept. Success: {str(ok).lower()}. " \
            "Duration: 7ms."
        emit("gemini_cli.tool_call", body, attrs)

    emit("gemini_cli.user_prompt", "User prompt. Length: 37.",
         {"prompt_length": 37, "prompt_id": f"{session_id}########1",
          "auth_type": "gemini-api-key"})
    if loops:
        edit = {"file_path": "/repo/src/dates.py", "old_string": "return None",
                "new_string": "return parse(s)"}
        for n in range(6):
            response(n)
            call(n, "replace", edit, ok=False, error="Failed to edit, could not find the "
                 "string to replace.")
        return out
    steps = [("list_directory", {"path": "/repo/src"}),
             ("read_file", {"absolute_path": "/repo/src/dates.py"}),
             ("search_file_content", {"pattern": "parse_date"}),
             ("replace", {"file_path": "/repo/src/dates.py", "old_string": "pass",
                          "new_string": "return s"}),
             ("run_shell_command", {"command": "pytest -q", "description": "run tests"}),
             ("write_file", {"file_path": "/repo/NOTES.md", "content": "done"})]
    for n, (name, args) in enumerate(steps):
        response(n)
        call(n, name, args, ok=True)
    return out


def sessions(start: int = T0) -> list[Session]:
    """Return a looping and a healthy session of each agent."""
    return [claude_code("6f1c2a8e-0b4d-4f7e-9a51-3c2d1e0f9a01", loops=True, start=start),
            claude_code("6f1c2a8e-0b4d-4f7e-9a51-3c2d1e0f9a02", loops=False, start=start),
            codex("0199c0de-7a11-7c3e-8d4f-2b1a0c9e8d01", loops=True, start=start),
            codex("0199c0de-7a11-7c3e-8d4f-2b1a0c9e8d02", loops=False, start=start),
            gemini_cli("a3e5c7d9-1b2f-4a6c-8e0d-5f7a9c1e3b01", loops=True, start=start),
            gemini_cli("a3e5c7d9-1b2f-4a6c-8e0d-5f7a9c1e3b02", loops=False, start=start)]


# --- emitting ------------------------------------------------------------------------------
def emit(runs: Sequence[Session], exporter: LogRecordExporter) -> int:
    """Emit the sessions' records through SDK loggers (one provider per resource); count them."""
    count = 0
    for run in runs:
        provider = LoggerProvider(resource=Resource.create(run.resource), shutdown_on_exit=False)
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        logger = provider.get_logger(run.scope, run.resource.get("service.version"))
        for record in run.records:
            logger.emit(timestamp=record["time"] or None, observed_timestamp=(
                record["time"] or None), body=record["body"],
                attributes=record["attributes"], event_name=record.get("event_name"))
            count += 1
        provider.force_flush()
    return count


def proto_messages(runs: Sequence[Session], *, per_message: int = 5) -> list[bytes]:
    """Return the sessions as serialized protobuf ``ExportLogsServiceRequest`` messages."""
    exporter = InMemoryLogRecordExporter()
    emit(runs, exporter)
    records = list(exporter.get_finished_logs())
    return [encode_logs(records[at:at + per_message]).SerializeToString()
            for at in range(0, len(records), per_message)]


def collector_lines(runs: Sequence[Session], *, per_line: int = 5) -> list[str]:
    """Return the sessions as the Collector's file exporter writes logs (JSON Lines)."""
    exporter = InMemoryLogRecordExporter()
    emit(runs, exporter)
    records = list(exporter.get_finished_logs())
    lines = []
    for at in range(0, len(records), per_line):
        request = encode_logs(records[at:at + per_line])
        lines.append(json.dumps(hex_ids(MessageToDict(request))))
    return lines


# --- Codex CLI's trace copy ------------------------------------------------------------------
def codex_trace_spans(run: Session, exporter: Any) -> int:
    """Emit a Codex session as its ``trace_exporter`` sends it; return the tool results sent.

    Codex records its events a second time on its current ``tracing`` span (``trace_event!``,
    target ``codex_otel.trace_safe``, ``codex-rs/otel/src/events/session_telemetry.rs``), which
    ``tracing-opentelemetry`` exports as span events named by their callsite (``event
    codex-rs/otel/src/events/session_telemetry.rs:<line>``: the event has no ``message``), with
    ``level`` and ``target`` first and each field typed as recorded (``%`` a string, ``i64``
    an int, ``bool`` a bool). ``codex.tool_result`` there has no ``arguments`` and no
    ``output``, their lengths instead. One span per model turn here, holding its response's
    ``sse_event`` and the turn's tool result.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create(run.resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(str(run.resource["service.name"]))
    common = ("event.timestamp", "conversation.id", "app.version", "auth_mode", "originator",
              "terminal.type", "model", "slug")  # the trace copy has no user.* fields
    span: Any = None
    sent = 0
    for at, record in enumerate(run.records):
        attrs = record["attributes"]
        event = attrs["event.name"]
        when = iso_time_ns(attrs["event.timestamp"])
        if event == "codex.sse_event" and "duration_ms" in attrs:
            continue  # the stream's note is a log event only (log_event!)
        if event == "codex.sse_event":
            if span is not None:
                span.end(end_time=when - 1)
            span = tracer.start_span("handle_responses", start_time=when - SECOND // 2)
        if span is None or event not in ("codex.sse_event", "codex.tool_result"):
            continue
        fields: dict[str, Any] = {"level": "INFO", "target": "codex_otel.trace_safe",
                                  "event.name": event}
        if event == "codex.tool_result":
            sent += 1
            fields.update({"tool_name": attrs["tool_name"], "call_id": attrs["call_id"],
                           "duration_ms": attrs["duration_ms"], "success": attrs["success"],
                           "arguments_length": len(attrs["arguments"]),
                           "output_length": len(attrs["output"]),
                           "output_line_count": len(attrs["output"].splitlines()),
                           "tool_origin": "builtin", "mcp_tool": False})
        else:
            fields.update({key: attrs[key] for key in (
                "event.kind", "input_token_count", "output_token_count", "tool_token_count")})
        fields.update({key: attrs[key] for key in common})
        span.add_event(f"event codex-rs/otel/src/events/session_telemetry.rs:{1000 + at}",
                       fields, timestamp=when)
    if span is not None:
        span.end(end_time=iso_time_ns(run.records[-1]["attributes"]["event.timestamp"]) + 1)
    provider.force_flush()
    return sent


def iso_time_ns(text: str) -> int:
    """Return an ``event.timestamp`` (``2025-10-09T08:53:21.000Z``) in nanoseconds."""
    import datetime

    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
