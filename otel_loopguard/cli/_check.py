"""``otel-loopguard check``: replay saved OTLP traces and report loops (a CI gate)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay.checker import Checker, RunReport, report_to_json
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import Action, SpanRecord

__all__ = ["add_parser"]

_PROGRESS_MIN_BYTES = 8 << 20


def add_parser(commands: Any) -> None:
    """Register ``check`` on the subcommand parser."""
    parser = commands.add_parser(
        "check", help="replay saved OTLP traces and report loops",
        description="Replay saved OTLP traces (JSON lines as the Collector's file exporter "
                    "writes them, a JSON document, .gz, OTLP protobuf, or - for stdin) through "
                    "the detectors. Exit 0 when no run reaches --fail-on, 1 when one does, 2 on "
                    "bad input or usage.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files, or - for stdin")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--config", metavar="FILE", help="TOML config file")
    parser.add_argument("--fail-on", choices=("warn", "replan", "stop"), default="stop",
                        help="lowest action that makes the exit code 1 (default: stop)")
    parser.add_argument("--run-key", choices=("trace", "conversation", "agent"),
                        help="how tool calls are grouped into runs (default: trace)")
    parser.add_argument("--strict", action="store_true",
                        help="stop at the first bad line instead of skipping it")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="text format: list flagged runs only")
    parser.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Run ``check`` and return its exit code."""
    overrides = {"run_key": args.run_key} if args.run_key else {}
    config = LoopGuardConfig.load(args.config, **overrides)
    errors: list[TraceFileError] = []

    def on_error(error: TraceFileError) -> None:
        errors.append(error)
        print(f"otel-loopguard: {error}", file=sys.stderr)

    spans = _all_spans(args.paths, args.strict, on_error)
    reports = Checker(config).run(spans)  # streamed: memory is bounded by the open runs
    if args.format == "json":
        highest = _print_json(reports, sys.stdout)
    else:
        highest = _print_text(reports, sys.stdout, quiet=args.quiet)
    if errors:
        print(f"otel-loopguard: {len(errors)} bad input record(s) skipped", file=sys.stderr)
        return 2
    return 1 if highest >= Action.parse(args.fail_on) else 0


def _all_spans(paths: list[str], strict: bool, on_error: Any) -> Iterator[SpanRecord]:
    for path in paths:
        progress = _progress_bar(path)
        yield from iter_spans(path, strict=strict, on_error=on_error, progress=progress)
        if progress is not None:
            sys.stderr.write("\n")


def _progress_bar(path: str) -> Any:
    if path == "-" or not sys.stderr.isatty():
        return None
    try:
        total = os.path.getsize(path)
    except OSError:
        return None
    if total < _PROGRESS_MIN_BYTES:
        return None

    def show(done: int) -> None:
        share = min(1.0, done / total)
        bar = "#" * int(share * 30)
        sys.stderr.write(f"\r{os.path.basename(path)} [{bar:<30}] {share:4.0%}")
        sys.stderr.flush()

    return show


def _print_json(reports: Iterable[RunReport], out: TextIO) -> Action:
    """Write the JSON document run by run as the runs finish; return the highest action.

    The same document ``json.dump(..., indent=2)`` of the whole would write, without holding
    every run in memory.
    """
    actions = {a.label: 0 for a in Action}
    runs = calls = 0
    highest = Action.CONTINUE
    out.write('{\n  "runs": [')
    for report in reports:
        actions[report.action.label] += 1
        runs, calls = runs + 1, calls + report.tool_calls
        highest = max(highest, report.action)
        text = json.dumps(report_to_json(report), indent=2).replace("\n", "\n    ")
        out.write(("," if runs > 1 else "") + "\n    " + text)
    summary = json.dumps({"runs": runs, "tool_calls": calls, "actions": actions}, indent=2)
    out.write(("\n  ]" if runs else "]") + ',\n  "summary": ' + summary.replace("\n", "\n  ")
              + "\n}\n")
    return highest


def _print_text(reports: Iterable[RunReport], out: TextIO, *, quiet: bool) -> Action:
    """Write each run as it finishes, then the totals; return the highest action."""
    runs = calls = flagged = 0
    highest = Action.CONTINUE
    for report in reports:
        runs, calls = runs + 1, calls + report.tool_calls
        highest = max(highest, report.action)
        if report.action is Action.CONTINUE:
            if not quiet:
                out.write(f"ok    run {report.run_id}: {report.tool_calls} tool calls, "
                          "no loop\n")
            continue
        flagged += 1
        _explain(report, out)
    out.write(f"\n{runs} run(s), {calls} tool call(s); {flagged} flagged\n")
    return highest


def _explain(report: RunReport, out: TextIO) -> None:
    template = f" [{report.prompt_template}]" if report.prompt_template else ""
    out.write(f"{report.action.label.upper():5} run {report.run_id}{template}: "
              f"{report.tool_calls} tool calls\n")
    shown: set[tuple[str, str, str]] = set()
    for decision in report.findings:
        key = (decision.tool, decision.code, decision.action.label)
        if key in shown:
            continue
        shown.add(key)
        evidence = decision.evidence[0]
        if evidence.detector == "handoff":  # no tool call triggered it: say where it fell
            where = (f"after call {decision.call_index}" if decision.call_index
                     else "before any tool call")
            cycle = " -> ".join(str(a) for a in evidence.details.get("cycle", []))
            out.write(f"  - {decision.action.label} at a handoff {where} ({decision.code}, "
                      f"handoff): {cycle or 'agents'}\n")
            out.write(f"    hint: {decision.hint}\n")
            continue
        if evidence.detector == "idle_turns":  # a model turn, not a tool call, got it
            out.write(f"  - {decision.action.label} at a model turn after call "
                      f"{decision.call_index} ({decision.code}, idle_turns): {evidence.count} "
                      "turns in a row without a tool call\n")
            out.write(f"    hint: {decision.hint}\n")
            continue
        indices = evidence.details.get("call_indices") or [decision.call_index]
        calls = ", ".join(str(i) for i in indices)
        out.write(f"  - {decision.action.label} at call {decision.call_index} "
                  f"({decision.code}, {evidence.detector}): {decision.tool} - calls {calls}\n")
        out.write(f"    hint: {decision.hint}\n")
