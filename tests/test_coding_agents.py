"""Coding agents' native telemetry: their log events and tool spans become runs of calls.

The sessions (``_agent_sessions``) are emitted through the SDK's real ``LoggerProvider`` and
written as the Collector's file exporter writes logs; ``check`` then reads them like traces.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from _agent_sessions import (
    T0,
    Session,
    codex_trace_spans,
    collector_lines,
    proto_messages,
    sessions,
)
from _otlp_files import json_line
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.cli import main
from otel_loopguard.coding_agents import AgentRecords, agent_event
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.kinds._tools import ToolKinds
from otel_loopguard.otlp._logs import LogEvent, decode_json_logs, iso_time_ns
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import STATUS_ERROR, ModelTurn, SpanRecord


def _write(tmp_path: Path, runs: list[Session], name: str = "logs.jsonl") -> Path:
    path = tmp_path / name
    data = ("\n".join(collector_lines(runs)) + "\n").encode()
    if name.endswith(".gz"):
        data = gzip.compress(data)
    elif name.endswith(".zst"):
        zstandard = pytest.importorskip("zstandard")
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["logs.jsonl", "logs.jsonl.gz", "logs.jsonl.zst"])
def test_check_flags_each_loop_under_its_agent_and_leaves_healthy_sessions_quiet(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    runs = sessions()
    path = _write(tmp_path, runs, name)
    code = main(["check", "--format", "json", str(path)])
    out = capsys.readouterr().out
    doc = json.loads(out)
    reports = {r["run_id"]: r for r in doc["runs"]} if isinstance(doc, dict) else \
        {r["run_id"]: r for r in doc}
    assert code == 1
    for run in runs:
        report = reports[f"{run.agent}:{run.session_id}"]
        assert report["prompt_template"] == run.template
        assert (report["action"] != "continue") is run.loops, report
        if run.loops:
            assert report["findings"][0]["span_id"].startswith(("toolu_", "call_", "replace@"))


def test_each_agents_events_become_calls_with_arguments_results_and_status() -> None:
    by_agent: dict[str, list[SpanRecord]] = {}
    for run in sessions():
        if run.loops:
            records = AgentRecords().from_events(_events(run))
            by_agent[run.agent] = [r for r in records if "execute_tool" in r.name]
    claude, codex, gemini = by_agent["claude-code"], by_agent["codex"], by_agent["gemini-cli"]
    assert claude[0].attributes["gen_ai.tool.name"] == "Bash"
    assert json.loads(claude[0].attributes["gen_ai.tool.call.arguments"])["command"] == "npm test"
    assert "gen_ai.tool.call.result" not in claude[0].attributes  # Claude Code never sends it
    assert claude[0].status_code == STATUS_ERROR and "Exit code 1" in claude[0].status_message
    assert claude[0].end_time_ns - claude[0].start_time_ns == 812_000_000
    assert codex[0].attributes["gen_ai.tool.call.result"].startswith("F\nFAILED")
    assert codex[0].span_id == "call_L000" and codex[0].end_time_ns > 0  # time_unix_nano 0
    assert gemini[0].attributes["gen_ai.tool.name"] == "replace"
    assert gemini[0].trace_id == "gemini-cli:a3e5c7d9-1b2f-4a6c-8e0d-5f7a9c1e3b01"


def _events(run: Session) -> list[LogEvent]:
    return [LogEvent(r["time"] or iso_time_ns(r["attributes"]["event.timestamp"]),
                     r["attributes"], r["body"],
                     r.get("event_name") or r["attributes"].get("event.name", ""),
                     scope_name=run.scope, resource=run.resource) for r in run.records]


@pytest.mark.parametrize(("event", "expected"), [
    (LogEvent(1, {"event.name": "tool_result"}, "claude_code.tool_result"),
     "claude_code.tool_result"),
    (LogEvent(1, {"event.name": "tool_result"}, None, "tool_result",
              scope_name="com.anthropic.claude_code.events"), "claude_code.tool_result"),
    (LogEvent(1, {}, None, "codex.tool_result"), "codex.tool_result"),
    # Codex: the OTLP event_name field is the tracing callsite, the name is the attribute
    (LogEvent(1, {"event.name": "codex.tool_result"}, None,
              "event otel/src/events/session_telemetry.rs:812"), "codex.tool_result"),
    (LogEvent(1, {}, "Tool call: x.", "gemini_cli.tool_call"), "gemini_cli.tool_call"),
    (LogEvent(1, {}, "hello", "app.event"), ""),
])
def test_agent_event_names(event: LogEvent, expected: str) -> None:
    assert agent_event(event) == expected


def test_without_tool_details_claude_code_calls_have_no_arguments_and_only_failures_count(
        ) -> None:
    run = sessions()[0]
    for record in run.records:
        record["attributes"].pop("tool_input", None)
        record["attributes"].pop("tool_parameters", None)
    records = AgentRecords().from_events(_events(run))
    calls = [r for r in records if "execute_tool" in r.name]
    assert all("gen_ai.tool.call.arguments" not in r.attributes for r in calls)
    reports = list(Checker().run(records))
    assert reports[0].findings, "identical failures are still seen without arguments"
    assert {d.detector for d in reports[0].findings} == {"failure"}
    # without the error message either (the default): "ShellError" names nothing of the call
    for record in run.records:
        record["attributes"].pop("error", None)
    bare = list(Checker().run(AgentRecords().from_events(_events(run))))
    assert bare[0].tool_calls == 6 and not bare[0].findings


@pytest.mark.parametrize(("params", "expected"), [
    ('{"mcp_server_name": "siyuan", "mcp_tool_name": "sql_query"}', "mcp__siyuan__sql_query"),
    (None, "mcp_tool"),
    ("not json", "mcp_tool"),
], ids=["with-details", "without-details", "unreadable"])
def test_claude_code_mcp_calls_are_named_by_server_and_tool_when_details_are_on(
        params: str | None, expected: str) -> None:
    """Claude Code names every MCP call ``mcp_tool``; ``tool_parameters`` says which one."""
    attrs = {"session.id": "s", "tool_name": "mcp_tool", "tool_use_id": "toolu_1",
             "success": "true", "duration_ms": "5"}
    if params is not None:
        attrs["tool_parameters"] = params
    event = LogEvent(T0, attrs, "claude_code.tool_result", "tool_result")
    [record] = AgentRecords().from_events([event])
    assert record.attributes["gen_ai.tool.name"] == expected


def test_template_from_resource_attribute_wins() -> None:
    run = sessions()[2]
    run.resource["loopguard.template"] = "repo-x"
    records = AgentRecords().from_events(_events(run))
    [report] = Checker().run(records)
    assert report.prompt_template == "repo-x"


def test_event_and_span_of_one_call_are_checked_once() -> None:
    run = sessions()[0]
    agents = AgentRecords()
    from_events = agents.from_events(_events(run))
    spans = _claude_spans(run, error="", extra={"full_command": "npm test"})
    copies = agents.from_spans(spans)
    assert [c.span_id for c in copies] == [r.span_id for r in from_events
                                           if "execute_tool" in r.name]
    assert all(c.status_code == STATUS_ERROR for c in copies)
    both = [report for report in Checker().run(from_events + spans + copies)
            if report.run_id.startswith("claude-code:")]
    events_only = list(Checker().run(from_events))
    assert both[0].tool_calls == events_only[0].tool_calls == 6
    spans_only = [r for r in Checker().run(spans + copies) if r.run_id.startswith("claude")]
    assert spans_only[0].tool_calls == 6 and spans_only[0].findings


@pytest.mark.parametrize("batches", ["one", "children first"])
def test_a_failed_execution_span_counts_in_a_later_batch_than_its_tool_span(
        batches: str) -> None:
    """Claude Code's ``claude_code.tool.execution`` child ends before its ``claude_code.tool``
    span, so a batching exporter may send it in an earlier request: its failure was lost (a
    failing command read as the same call succeeding). It is remembered for its parent's
    batch: the same findings as when both come together."""
    run = sessions()[0]
    # with the call's input (``OTEL_LOG_TOOL_CONTENT``): a bare failure of one call six times
    spans = _claude_spans(run, error="", extra={"tool_input": '{"command": "npm test"}'})
    children = [s for s in spans if s.name == "claude_code.tool.execution"]
    tools = [s for s in spans if s.name == "claude_code.tool"]
    agents = AgentRecords()
    requests = [spans] if batches == "one" else [children, tools]
    records = [r for request in requests for r in agents.from_spans(request)]
    assert len(records) == 6
    assert all(r.status_code == STATUS_ERROR for r in records)
    [report] = [r for r in Checker().run(records) if r.run_id.startswith("claude-code:")]
    assert report.findings
    assert not agents._failed  # each remembered failure was taken by its parent


def test_an_agents_own_traces_are_not_runs_of_their_own() -> None:
    """Claude Code's received traces hold no call the adapters read (their calls are filed
    under the session): each was also reported as a run of 0 tool calls, one per trace. A trace
    with no tool call, model turn or handoff is no agent's run; a trace with one still is."""
    run = sessions()[0]
    agents = AgentRecords()
    spans = _claude_spans(run, error="")
    reports = list(Checker().run(agents.from_events(_events(run)) + spans
                                 + agents.from_spans(spans)))
    assert [r.run_id for r in reports] == [f"claude-code:{run.session_id}"]
    lone = SpanRecord("ab" * 16, "cd" * 8, None, "execute_tool search", 1, 2,
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})
    assert [r.tool_calls for r in Checker().run([lone])] == [1]


def test_a_call_sent_both_ways_is_read_whole_whichever_copy_comes_first() -> None:
    """Claude Code's beta span of a call carries no tool_input: when it arrived before the
    event, the poorer copy was kept and the event's dropped, so the same session gave other
    findings (a replan read as a warn) by arrival order. The copy kept is now completed from
    the other: the same findings and template either way, as from the events alone."""
    run = sessions()[0]

    def findings(order: str) -> tuple[str | None, list[tuple[str, int]]]:
        agents = AgentRecords()
        from_events = agents.from_events(_events(run))
        spans = [SpanRecord(f"{index:032x}", f"{index + 1:016x}", f"{99:016x}",
                            "claude_code.tool", record["time"] - 812_000_000, record["time"],
                            {"tool_name": record["attributes"]["tool_name"],
                             "tool_use_id": record["attributes"]["tool_use_id"],
                             "session.id": record["attributes"]["session.id"]},
                            resource=run.resource)
                 for index, record in enumerate(r for r in run.records
                                                if r["attributes"]["event.name"] == "tool_result")]
        copies = agents.from_spans(spans)
        records = {"events": from_events, "events first": from_events + copies,
                   "spans first": copies + from_events}[order]
        [report] = [r for r in Checker().run(records) if r.run_id.startswith("claude-code:")]
        return report.prompt_template, [(d.code, d.call_index) for d in report.findings]

    alone = findings("events")
    assert alone[1]  # the session loops
    assert findings("spans first") == findings("events first") == alone


def _claude_spans(run: Any, error: str | None = None,
                  extra: dict[str, str] | None = None) -> list[SpanRecord]:
    """Claude Code's ``claude_code.tool`` spans of ``run``'s calls: no ``tool_input`` (but
    ``extra``), and with ``error`` a failed ``claude_code.tool.execution`` child under each,
    which says only that the call failed."""
    spans: list[SpanRecord] = []
    for index, record in enumerate(r for r in run.records
                                   if r["attributes"]["event.name"] == "tool_result"):
        attrs = record["attributes"]
        tool = SpanRecord(f"{index:032x}", f"{2 * index + 1:016x}", f"{99:016x}",
                          "claude_code.tool", record["time"] - 812_000_000, record["time"],
                          {"tool_name": attrs["tool_name"], "tool_use_id": attrs["tool_use_id"],
                           "session.id": attrs["session.id"], **(extra or {})},
                          resource=run.resource)
        spans.append(tool)
        if error is not None:
            spans.append(SpanRecord(tool.trace_id, f"{2 * index + 2:016x}", tool.span_id,
                                    "claude_code.tool.execution", tool.start_time_ns,
                                    tool.end_time_ns, {"success": "false"}, STATUS_ERROR,
                                    error))
    return spans


@pytest.mark.parametrize("order", ["events first", "spans first"])
def test_serve_completes_the_copy_it_keeps_whichever_comes_first(order: str) -> None:
    """serve kept the first copy of a call and dropped the other unread: with Claude Code's
    spans before its events, a looping session's arguments (the event's ``tool_input``) were
    lost and it went unflagged, and a failure's message (the event's error) read as a bare
    failure. It completes the kept copy as ``check`` does: the findings of the events alone,
    in either order, over two requests."""
    run = sessions()[0]  # Claude Code's looping session: the same failing command
    for record in run.records:
        if record["attributes"]["event.name"] == "tool_result":
            record["attributes"]["error"] = "String to replace not found in file."

    def findings(records: list[list[SpanRecord]]) -> list[tuple[str, int]]:
        stream = StreamingChecker(LoopGuardConfig(), raise_internal_errors=True)
        reports = [r for batch in records for r in stream.add(batch)] + stream.flush()
        [report] = [r for r in reports if r.run_id.startswith("claude-code:")]
        return [(d.code, d.call_index) for d in report.findings]

    agents = AgentRecords()
    events = agents.from_events(_events(run))
    copies = agents.from_spans(_claude_spans(run, error="failed"))
    alone = findings([events])
    assert alone and alone[0][0] == "PERMANENT_FAILURE"  # the event's message says permanent
    batches = [events, copies] if order == "events first" else [copies, events]
    assert findings(batches) == alone


def test_gemini_cli_tool_spans_do_not_count_its_calls_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Gemini CLI exports a ``tool_call`` span for every call along with its log events (one
    # OTLP endpoint for both, packages/core/src/telemetry/sdk.ts); the span names the call by
    # ``gen_ai.tool.call_id``, which the event lacks, and ends OK on a failed edit (the tool
    # returns its error). Read as calls, the spans doubled the run and broke its failure streak.
    run = sessions()[4]
    logs = _write(tmp_path, [run])
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(run.resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("gemini-cli", "v1")
    calls = [r for r in run.records if r["attributes"]["event.name"] == "gemini_cli.tool_call"]
    for n, record in enumerate(calls):
        span = tracer.start_span("tool_call", start_time=record["time"] - 7_000_000, attributes={
            "gen_ai.tool.name": record["attributes"]["function_name"],
            "gen_ai.tool.call_id": f"replace-{1760000000000 + n}-{n:04x}",
            "gen_ai.conversation.id": run.session_id})
        span.set_attributes({"gen_ai.operation.name": "tool_call",
                             "gen_ai.agent.name": "gemini-cli"})
        span.set_status(Status(StatusCode.OK))
        span.end(end_time=record["time"] - 1_000_000)
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json_line(exporter.get_finished_spans()) + "\n")
    assert main(["check", "--format", "json", str(logs), str(traces)]) == 1
    reports = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    report = reports[f"gemini-cli:{run.session_id}"]
    assert report["tool_calls"] == len(calls) == 6
    first = report["findings"][0]
    assert first["call_index"] == 3 and first["code"] == "PERMANENT_FAILURE"


def _check_runs(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["check", "--format", "json", *map(str, paths)])
    return {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}


def test_codex_tool_results_sent_as_span_events_are_read_and_counted_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Codex's trace copy of an event is a span event named by its tracing callsite (``event
    # codex-rs/otel/src/events/session_telemetry.rs:<line>``), its ``event.name`` attribute
    # the agent's name; the reader matched the span event's name, so a session sent with
    # ``trace_exporter`` only was never seen. Every tool result on a span is a call.
    looping, healthy = sessions()[2:4]
    exporter = InMemorySpanExporter()
    assert codex_trace_spans(looping, exporter) == codex_trace_spans(healthy, exporter) == 6
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json_line(exporter.get_finished_spans()) + "\n")
    alone = _check_runs([traces], capsys)
    stuck, fine = alone[f"codex:{looping.session_id}"], alone[f"codex:{healthy.session_id}"]
    assert stuck["tool_calls"] == fine["tool_calls"] == 6
    # no arguments and no output in the trace copy: a bare failure names nothing of the call,
    # so six of them are not known to be one call failing six times
    assert not stuck["findings"] and not fine["findings"]
    # with its log events too, each call is counted once, with what the events carry
    logs = _write(tmp_path, [looping, healthy])
    events_only = _check_runs([logs], capsys)
    both = _check_runs([logs, traces], capsys)
    for run in (looping, healthy):
        run_id = f"codex:{run.session_id}"
        assert both[run_id]["tool_calls"] == 6
        assert both[run_id]["findings"] == events_only[run_id]["findings"]


def test_gemini_cli_calls_ending_in_the_same_millisecond_are_not_taken_for_copies() -> None:
    # Gemini CLI sends no call id and runs read-only tools in parallel (Promise.all); its
    # events are stamped to the millisecond, so a batch's calls often end in the same one.
    def read(path: str, time_ns: int = T0) -> LogEvent:
        attrs = {"session.id": "s1", "event.name": "gemini_cli.tool_call",
                 "function_name": "read_file", "duration_ms": 1, "success": True,
                 "function_args": json.dumps({"file_path": path}, indent=2)}
        return LogEvent(time_ns, attrs, "Tool call: read_file.", "gemini_cli.tool_call")

    events = [read("/repo/a.py"), read("/repo/b.py"), read("/repo/c.py"),
              read("/repo/a.py", T0 + 10**9)]
    records = AgentRecords().from_events(events + events[:1])  # and an exporter's retry
    checker = Checker()
    [report] = checker.run(records)
    assert report.tool_calls == 4 and checker.duplicate_spans == 1


@pytest.mark.parametrize(("command", "kind"), [
    ("sed -i 's/a/b/' src/dates.py", "mutating"), ("cat src/dates.py", "read")])
def test_codex_shell_command_calls_are_classified_by_their_command(command: str,
                                                                   kind: str) -> None:
    # Codex's shell tool for most models is shell_command, a command line (ShellCommand in
    # codex-rs model info), beside the older shell (an argv list)
    kinds = ToolKinds(LoopGuardConfig())
    assert kinds.kind("shell_command", arguments={"command": command, "workdir": "/repo"}) == kind


@pytest.mark.parametrize("tool", ["search_file_content", "grep_search"])
def test_gemini_cli_searches_are_reads_under_either_name(tool: str) -> None:
    # Gemini CLI 0.28 renamed its search tool from search_file_content to grep_search (Cursor's
    # search tool has that name too): a search read again is left to reread, as a read
    assert ToolKinds(LoopGuardConfig()).kind(tool, arguments={"pattern": "parse_date"}) == "read"


def test_a_codex_model_response_is_one_step_though_logged_twice() -> None:
    """Codex logs a completed response twice (the stream's note with its duration, the
    client's record with its tokens): both counted made a ``max_steps`` budget fire at half
    its steps. The healthy session: 6 responses and 6 tool calls, 12 steps."""
    run = sessions()[3]
    records = AgentRecords().from_events(_events(run))
    turns = [r for r in records if r.name.startswith("chat")]
    assert len(turns) == 6
    assert all(t.attributes.get("gen_ai.usage.input_tokens") for t in turns)
    # output_token_count already holds the reasoning tokens (the Responses API's usage, which
    # Codex's total adds to the input): its reasoning_token_count (64) is not added again
    assert {t.attributes["gen_ai.usage.output_tokens"] for t in turns} == {220}

    def budget(steps: int) -> list[str]:
        config = LoopGuardConfig.create(max_steps_warn=steps)
        reports = list(Checker(config).run(iter(AgentRecords().from_events(_events(run)))))
        return [e.code for r in reports for d in r.findings for e in d.evidence
                if e.detector == "budget"]

    assert budget(13) == []
    assert budget(12) != []


def test_a_paused_session_continues_in_a_new_run_in_serve() -> None:
    now = [0]
    agents = AgentRecords(clock=lambda: now[0], pause_seconds=10)
    events = _events(sessions()[4])
    first = agents.from_events(events[:3])
    now[0] = 11 * 10**9
    later = agents.from_events(events[3:])
    assert {r.trace_id for r in first} == {"gemini-cli:a3e5c7d9-1b2f-4a6c-8e0d-5f7a9c1e3b01"}
    assert {r.trace_id for r in later} == {"gemini-cli:a3e5c7d9-1b2f-4a6c-8e0d-5f7a9c1e3b01#1"}


def test_malformed_log_records_are_counted_and_the_good_ones_kept() -> None:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": "12", "attributes": [{"key": "event.name",
                                               "value": {"stringValue": "codex.tool_result"}}]},
        {"timeUnixNano": "twelve"},
        {"traceId": "xyz"}]}]}]}
    decoded = decode_json_logs(doc)
    assert len(decoded.events) == 1 and decoded.events[0].event_name == "codex.tool_result"
    assert decoded.rejected == 2
    assert decoded.problem.startswith("resourceLogs[0].scopeLogs[0].logRecords[1].timeUnixNano")


@pytest.mark.parametrize("time", ["18446744073709551616", "99999999999999999999",
                                  18446744073709551616])
def test_a_log_time_past_64_bits_is_refused(time: Any) -> None:
    """A time a fixed64 cannot hold was taken, and then broke the forwarded protobuf (the
    record and the run's findings lost downstream): it is a bad record, named, like another."""
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": "18446744073709551615"}, {"observedTimeUnixNano": time}]}]}]}
    decoded = decode_json_logs(doc)
    assert [e.time_ns for e in decoded.events] == [2**64 - 1]
    assert decoded.rejected == 1
    assert decoded.problem.startswith(
        "resourceLogs[0].scopeLogs[0].logRecords[1].observedTimeUnixNano: expected unsigned "
        "64-bit nanoseconds")


def test_iso_timestamps() -> None:
    assert iso_time_ns("2025-10-09T08:53:21.000Z") == T0 + 10**9
    assert iso_time_ns("not a time") == 0


@pytest.mark.parametrize("framing", ["one message", "format: proto"])
def test_protobuf_logs_are_checked_as_their_json_is(
        tmp_path: Path, framing: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A logs pipeline's protobuf file gives the findings its OTLP/JSON file gives."""
    runs = sessions()
    assert main(["check", "--format", "json", str(_write(tmp_path, runs))]) == 1
    from_json = json.loads(capsys.readouterr().out)
    if framing == "one message":
        data = proto_messages(runs, per_message=10_000)[0]
    else:  # the Collector's file exporter: each message after its 4-byte big-endian length
        data = b"".join(struct.pack(">I", len(m)) + m for m in proto_messages(runs))
    path = tmp_path / "logs.binpb"
    path.write_bytes(data)
    assert main(["check", "--format", "json", str(path)]) == 1
    captured = capsys.readouterr()
    def unplaced(runs: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in run.items() if k not in ("file", "line")} for run in runs]

    assert unplaced(json.loads(captured.out)["runs"]) == unplaced(from_json["runs"])
    assert captured.err == ""


def test_a_trace_message_of_spans_without_ids_is_still_reported_as_spans(
        tmp_path: Path) -> None:
    """Spans without trace ids stay malformed spans, though the message also reads as logs."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name = "execute_tool search"
    path = tmp_path / "traces.binpb"
    path.write_bytes(request.SerializeToString())
    errors: list[Any] = []
    assert list(iter_spans(str(path), on_error=errors.append)) == []
    assert [e.reason for e in errors] == [
        "all 1 spans rejected: resource_spans[0].scope_spans[0].spans[0].trace_id: "
        "expected 16 bytes, got 0"]


def test_logs_and_traces_files_are_checked_together(tmp_path: Path) -> None:
    path = _write(tmp_path, sessions()[:2])
    spans = list(iter_spans(str(path), strict=True))
    assert sum("execute_tool" in s.name for s in spans) == 6 + 8


def test_a_session_spread_over_several_files_keeps_its_template(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The Collector's file exporter rotates its file: a session's model request can be in one
    # file and its next tool calls in the next. The template (agent/model) must not depend on
    # where the rotation fell: every file of a check shares the sessions' latest models.
    runs = sessions()
    lines = collector_lines(runs, per_line=1)
    folder = tmp_path / "rotated"
    folder.mkdir()
    for at in range(0, len(lines), 7):
        (folder / f"logs-{at:03d}.jsonl").write_text("\n".join(lines[at:at + 7]) + "\n")
    code = main(["check", "--format", "json", str(folder)])
    reports = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert code == 1
    assert {f"{run.agent}:{run.session_id}": run.template for run in runs} == {
        run_id: report["prompt_template"] for run_id, report in reports.items()}


def test_a_session_checked_in_pieces_numbers_its_turns_on_in_one_run() -> None:
    """``serve`` checks a session piece by piece (each reorder window's events): the pieces
    continue one run, and their model turns are numbered on, as in one piece (numbered from 1
    in each piece, the calls of one turn a piece looked like one parallel batch)."""
    run = sessions()[3]  # Codex, healthy: a model response before each call

    def events_seen(pieces: int) -> tuple[list[RunReport], list[tuple[str, int | None]]]:
        seen: list[tuple[str, int | None]] = []
        checker = Checker(on_event=lambda _r, _d, e: seen.append(
            (type(e).__name__, e.index if isinstance(e, ModelTurn) else e.turn)))
        records = AgentRecords().from_events(_events(run))
        size = -(-len(records) // pieces)
        reports = [report for at in range(0, len(records), size)
                   for report in checker.feed_trace(records[0].trace_id,
                                                    records[at:at + size])]
        return reports + list(checker.flush()), seen

    [whole], in_one = events_seen(1)
    [pieced], in_six = events_seen(6)
    assert in_six == in_one
    assert [e for e in in_one if e[0] == "ModelTurn"] == [("ModelTurn", n) for n in range(1, 7)]
    assert (pieced.run_id, pieced.tool_calls) == (whole.run_id, whole.tool_calls) == (
        f"codex:{run.session_id}", 6)


def _claude_writes(contents: list[str]) -> list[LogEvent]:
    """Claude Code ``Write`` events of one file, each ``tool_input`` cut as Claude Code cuts it:
    every string value to its first 512 characters."""
    return [LogEvent(T0 + n * 1_000_000_000, {
        "session.id": "s-cut", "tool_name": "Write", "tool_use_id": f"toolu_{n}",
        "success": "true", "duration_ms": "12",
        "tool_input": json.dumps({"file_path": "src/app.ts", "content": content[:512]})},
        "claude_code.tool_result", "tool_result") for n, content in enumerate(contents)]


def test_claude_code_values_it_cut_do_not_make_different_calls_the_same() -> None:
    """Three writes of one file whose contents begin alike and differ after 512 characters
    arrive identical; not known to be the same call, they are no repeat. Short contents,
    sent whole, still are."""
    header = "import { a } from './a';\n" * 30  # 750 characters in common
    cut = [header + f"export const version = {n};\n" for n in range(3)]
    reports = list(Checker().run(AgentRecords().from_events(_claude_writes(cut))))
    assert [d.code for r in reports for d in r.findings] == []
    whole = ["export const version = 1;\n"] * 3
    reports = list(Checker().run(AgentRecords().from_events(_claude_writes(whole))))
    assert [d.code for r in reports for d in r.findings] == ["REPEATED_CALL"]


def _gemini_refusals(prompts_between: bool) -> list[LogEvent]:
    """Four edits of one file that the user turns down (Gemini CLI's ``decision`` ``reject``),
    each after a model response; with ``prompts_between``, the user says what they want
    after each refusal (a ``user_prompt`` event, the words not logged)."""
    events: list[LogEvent] = []
    for n in range(4):
        at = T0 + n * 10 * 10**9
        if prompts_between and n:
            events.append(LogEvent(at, {"session.id": "s-no", "event.name":
                                        "gemini_cli.user_prompt", "prompt_length": 40,
                                        "prompt_id": f"s-no########{n}"},
                                   "User prompt.", "gemini_cli.user_prompt"))
        events.append(LogEvent(at + 10**9, {"session.id": "s-no", "event.name":
                                            "gemini_cli.api_response", "model": "gemini-2.5-pro",
                                            "duration_ms": 900, "input_token_count": 10},
                               "API response.", "gemini_cli.api_response"))
        events.append(LogEvent(at + 2 * 10**9, {
            "session.id": "s-no", "event.name": "gemini_cli.tool_call", "function_name": "replace",
            "function_args": json.dumps({"file_path": "docs/a.md", "new_string": f"v{n}"}),
            "duration_ms": 3, "success": False, "decision": "reject"},
            "Tool call: replace. Decision: reject. Success: false.", "gemini_cli.tool_call"))
    return events


def test_a_refused_edit_after_the_users_new_prompt_is_a_new_attempt() -> None:
    """A call the user turned down is no failure of the tool, and the user's next prompt is
    new input: four edits of one file refused, each after the user said what they want, are
    four attempts. Refused with nothing said between them, they add up as failures do."""
    records = AgentRecords().from_events(_gemini_refusals(prompts_between=True))
    calls = [r for r in records if not r.name.startswith("chat")]
    assert {r.status_message for r in calls} == {"declined by the user"}
    turns = [r for r in records if r.name.startswith("chat")]
    assert [json.loads(t.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"]
            for t in turns[1:]] == [f"prompt s-no########{n}" for n in range(1, 4)]
    reports = list(Checker().run(iter(records)))
    assert [e.code for r in reports for d in r.findings for e in d.evidence] == []
    reports = list(Checker().run(iter(AgentRecords().from_events(
        _gemini_refusals(prompts_between=False)))))
    assert "MUTATING_FAILURE" in {e.code for r in reports for d in r.findings for e in d.evidence}


def test_a_logged_prompt_is_the_next_model_requests_input() -> None:
    """A prompt is the input of the session's next model request, told apart by a digest of
    its words when the user logs them (the session keeps a few bytes, not the prompt), by its id
    or time when not; a prompt is used once."""
    def event(name: str, at: int, **attrs: Any) -> LogEvent:
        return LogEvent(T0 + at, {"session.id": "s-p", "event.name": name, **attrs}, name, name)

    records = AgentRecords().from_events([
        event("claude_code.user_prompt", 1, prompt="fix the date parser", **{"prompt.id": "p1"}),
        event("claude_code.api_request", 2, model="claude-sonnet-4-5"),
        event("claude_code.api_request", 3, model="claude-sonnet-4-5"),
        event("codex.user_prompt", 4, prompt="[REDACTED]")])
    inputs = [r.attributes.get("gen_ai.input.messages") for r in records]
    [message] = json.loads(inputs[0])
    assert message["role"] == "user"
    said = message["parts"][0]["content"]
    assert said.startswith("prompt ") and "date parser" not in said and len(said) < 64
    assert inputs[1] is None and len(records) == 2
    again = AgentRecords().from_events([
        event("claude_code.user_prompt", 1, prompt="fix the date parser"),
        event("claude_code.api_request", 2), event("claude_code.user_prompt", 3, prompt="ok"),
        event("claude_code.api_request", 4)])
    told = [json.loads(r.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"]
            for r in again]
    assert told[0] == said and told[1] != said


def test_a_prompt_goes_to_a_request_after_it_whatever_order_the_batches_come_in() -> None:
    """A Collector sends batches in parallel: a request that ended before the user's prompt
    may arrive after it. The prompt is that later request's input, not the late one's."""
    def event(name: str, at: int, **attrs: Any) -> LogEvent:
        return LogEvent(T0 + at, {"session.id": "s-o", "event.name": name, **attrs}, name, name)

    records = AgentRecords().from_events([
        event("claude_code.user_prompt", 2, prompt="now fix the tests"),
        event("claude_code.api_request", 1, model="claude-sonnet-4-5"),  # before the prompt
        event("claude_code.api_request", 3, model="claude-sonnet-4-5")])
    assert [r.attributes.get("gen_ai.input.messages") is not None for r in records] == [
        False, True]


def test_a_claude_code_call_the_user_rejected_is_read_from_its_tool_decision() -> None:
    """Claude Code logs no ``tool_result`` for a rejected call (its ``decision_type`` is always
    ``accept``): the ``tool_decision`` event with ``decision`` ``reject`` is the call's only
    copy. The same command rejected again and again, nothing said between, is seen; an
    accepted decision is no call (its ``tool_result`` follows)."""
    def decision(n: int, verdict: str, source: str) -> LogEvent:
        attrs = {"session.id": "s-rej", "event.name": "tool_decision", "prompt.id": "p1",
                 "tool_name": "Bash", "tool_use_id": f"toolu_{n}", "decision": verdict,
                 "source": source, "tool_source": "builtin",
                 "tool_parameters": json.dumps({"bash_command": "rm",
                                                "full_command": "rm -rf build/"})}
        return LogEvent(T0 + n * 10**9, attrs, "claude_code.tool_decision", "tool_decision")

    records = AgentRecords().from_events(
        [decision(0, "accept", "config")] + [decision(n, "reject", "user_reject")
                                             for n in range(1, 7)])
    assert [r.span_id for r in records] == [f"toolu_{n}" for n in range(1, 7)]
    assert {r.status_message for r in records} == {"declined by the user"}
    assert json.loads(records[0].attributes["gen_ai.tool.call.arguments"]) == {
        "command": "rm -rf build/"}
    [report] = Checker().run(iter(records))
    assert report.tool_calls == 6 and report.findings
    [denied] = AgentRecords().from_events([decision(1, "reject", "config")])
    assert denied.status_code == STATUS_ERROR and "not allowed" in denied.status_message


def test_gemini_cli_calls_of_one_batch_logged_in_one_millisecond_are_all_kept() -> None:
    """Gemini CLI logs a batch's calls together once all are done: one millisecond. Without
    ``function_args`` (``logPrompts`` off), or with the same arguments, and no call id, calls
    that ran differently (duration, result size, error) are still distinct calls; an
    exporter's retry of the request is still one copy."""
    def call(args: dict[str, Any] | None, n: int) -> LogEvent:
        attrs: dict[str, Any] = {
            "session.id": "s-b", "event.name": "gemini_cli.tool_call",
            "function_name": "run_shell_command", "duration_ms": 7 + n, "success": False,
            "decision": "auto_accept", "error": f"Command exited with code {n + 1}",
            "content_length": 100 + n, "prompt_id": "s-b########1"}
        if args is not None:
            attrs["function_args"] = json.dumps(args, indent=2)
        return LogEvent(T0, attrs, "Tool call: run_shell_command.", "gemini_cli.tool_call")

    for args in (None, {"command": "make test"}):
        batch = [call(args, n) for n in range(3)]
        agents = AgentRecords()
        records = agents.from_events(batch) + agents.from_events(batch)  # and the retry
        checker = Checker()
        [report] = checker.run(iter(records))
        assert report.tool_calls == 3 and checker.duplicate_spans == 3, args
