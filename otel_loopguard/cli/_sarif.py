"""``check --format sarif``: SARIF 2.1.0, one result per finding, for code-scanning UIs.

Each finding (as ``--format json`` lists them) is a result whose rule is its code
(``STAGNANT_RESULT`` ...), at level ``error`` when it fails the check (a loop finding at
``--fail-on``, a budget finding at ``--fail-on-budget``) and ``warning`` below that,
located in the trace file (and line) where its run's first span was read.
The partial fingerprint is made of the prompt template, tool, code and action, so a loop that
comes back run after run is one alert, not a new one per trace id. Results are written as runs
finish, at most ``MAX_RESULTS`` (GitHub code scanning rejects a run with more); the rules, the
input problems and the totals follow them.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from otel_loopguard._findings import budget_part, loop_action
from otel_loopguard.cli._report import (
    EMPTY_INPUT,
    NO_TEMPLATE,
    Reporter,
    Summary,
    Where,
    clean,
    describe,
    plural,
)
from otel_loopguard.types import Action

if TYPE_CHECKING:
    from otel_loopguard.exceptions import TraceFileError
    from otel_loopguard.replay.checker import RunReport
    from otel_loopguard.types import Decision

__all__ = ["MAX_RESULTS", "SarifReporter"]

MAX_RESULTS: Final = 25_000
"""Results written at most: GitHub code scanning rejects a SARIF run with more."""
_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"
_STDIN_URI: Final = "stdin"
"""The artifact of a result read from standard input (there is no file to name)."""
_UNKNOWN_URI: Final = "unknown"
"""The artifact of a result whose first trace is no longer remembered."""
_RULES: Final = {
    "STAGNANT_RESULT": "The same call keeps returning the same result",
    "STALLED_RESULT": "Different calls in a row keep returning the same result",
    "POLL_STAGNANT": "A polling tool keeps returning the same result",
    "REPEATED_CALL": "The same call is repeated",
    "CYCLE_DETECTED": "A sequence of tool calls repeats back to back",
    "PERMANENT_FAILURE": "A call is retried after a permanent error",
    "REPEATED_FAILURE": "A tool keeps failing the same way",
    "MUTATING_FAILURE": "A mutating tool keeps failing identically",
    "REPEATED_READ": "The same range of the same file is read again and again",
    "REPEATED_BATCH": "The same set of parallel tool calls is repeated",
    "HANDOFF_LOOP": "Agents hand off to each other in a cycle",
    "NEAR_DUPLICATE": "Near-identical calls of one tool with no progress",
    "NO_EFFECT": "A call keeps returning the same result whatever changes between",
    "REPEATED_BLOCK": "A block of tool calls comes back identically, other calls between",
    "IDLE_TURNS": "Model turns in a row call no tool and repeat",
    "BUDGET_WARNING": "A run is close to its budget",
    "BUDGET_EXHAUSTED": "A run exceeded its budget",
}


class SarifReporter(Reporter):
    """One SARIF log with one run (of otel-loopguard), streamed result by result."""

    def __init__(self, out: TextIO, *, fail_on: Action, fail_on_budget: Action | None = None,
                 quiet: bool = False, color: bool = False) -> None:
        super().__init__(out, fail_on=fail_on, fail_on_budget=fail_on_budget, quiet=quiet,
                         color=color)
        self._rules: dict[str, tuple[int, str]] = {}
        """Rule id -> (index, detector), in order of first use."""
        self._notifications: list[dict[str, Any]] = []
        self._dropped = 0
        """Findings not written once ``MAX_RESULTS`` were."""

    def run(self, report: RunReport, where: Where | None) -> None:
        """Write one result per finding of the run (counting those past ``MAX_RESULTS``)."""
        for decision in report.findings:
            if self.written >= MAX_RESULTS:
                self._dropped += 1
            else:
                self._write(self._result(report, decision, where))

    def bad_input(self, error: TraceFileError) -> None:
        """Keep a tool execution notification for a bad record (the first 100)."""
        if len(self._notifications) >= 100:
            return
        note: dict[str, Any] = {"level": "error", "message": {"text": clean(str(error))}}
        if error.path != "-":
            note["locations"] = [_location(Where(error.path, error.line))]
        self._notifications.append(note)

    def finish(self, summary: Summary) -> None:
        """Close the results and write the tool, its rules, the invocation and the totals."""
        from otel_loopguard import __version__

        rules = [{"id": rule, "name": _name(rule),
                  "shortDescription": {"text": _RULES.get(rule, rule)},
                  "properties": {"detector": detector}}
                 for rule, (_, detector) in self._rules.items()]
        invocation: dict[str, Any] = {
            "executionSuccessful": not summary.bad_records and not summary.empty}
        if summary.empty:
            self._notifications.append({"level": "error", "message": {"text": EMPTY_INPUT}})
        if self._dropped:
            text = (f"{plural(self._dropped, 'more finding')} not written: GitHub code scanning "
                    f"accepts at most {MAX_RESULTS:,} results per run (--format json lists them "
                    "all)")
            self._notifications.append({"level": "warning", "message": {"text": text}})
        if self._notifications:
            invocation["toolExecutionNotifications"] = self._notifications
        tail = {
            "tool": {"driver": {"name": "otel-loopguard", "version": str(__version__),
                                "rules": rules}},
            "invocations": [invocation],
            "properties": {"fail_on": self.fail_on.label,
                           "fail_on_budget": _label(self.fail_on_budget), "runs": summary.runs,
                           "tool_calls": summary.tool_calls, "actions": summary.actions,
                           "over_budget": summary.over_budget,
                           "spans": summary.spans, "duplicate_spans": summary.duplicate_spans,
                           "bad_records": summary.bad_records,
                           "results_dropped": self._dropped,
                           "waste": summary.waste.to_json()},
        }
        text = json.dumps(tail, indent=2)[1:-1].replace("\n", "\n    ").rstrip()
        head = "" if self.written else self._open()
        self.out.write(head + "\n      ]," + text + "\n    }\n  ]\n}\n")

    def _open(self) -> str:
        return (f'{{\n  "$schema": "{_SCHEMA}",\n  "version": "2.1.0",\n  "runs": [\n    {{\n'
                '      "results": [')

    def _write(self, result: dict[str, Any]) -> None:
        text = json.dumps(result, indent=2).replace("\n", "\n        ")
        self.out.write((self._open() if not self.written else ",") + "\n        " + text)
        self.written += 1

    def _fails(self, decision: Decision) -> bool:
        """Return True for a loop finding at ``--fail-on``, a budget one at ``--fail-on-budget``."""
        if loop_action(decision) >= self.fail_on:
            return True
        budget = budget_part(decision)
        return (budget is not None and self.fail_on_budget is not None
                and budget.action >= self.fail_on_budget)

    def _result(self, report: RunReport, decision: Decision,
                where: Where | None) -> dict[str, Any]:
        rule = decision.code
        if rule not in self._rules:
            self._rules[rule] = (len(self._rules), decision.detector)
        template = report.prompt_template or NO_TEMPLATE
        level = "error" if self._fails(decision) else "warning"
        text = (f"{describe(decision)}, in run {clean(report.run_id)} [{clean(template)}]. "
                f"{clean(decision.hint)}")
        logical: dict[str, Any] = {"name": clean(decision.tool or "handoff"),
                                   "fullyQualifiedName": f"{clean(template)}/"
                                                         f"{clean(decision.tool or 'handoff')}"}
        location: dict[str, Any] = {"logicalLocations": [logical]}
        if where is not None and where.path != "-":
            location.update(_location(where))
        else:  # GitHub code scanning rejects a result without a physical location
            location["physicalLocation"] = {"artifactLocation": {
                "uri": _STDIN_URI if where is not None else _UNKNOWN_URI}}
        fingerprint = hashlib.sha256("\x00".join(
            (template, decision.tool, rule, decision.action.label)).encode()).hexdigest()
        return {
            "ruleId": rule, "ruleIndex": self._rules[rule][0], "level": level,
            "message": {"text": text}, "locations": [location],
            "partialFingerprints": {"loopguardFinding/v1": fingerprint[:32]},
            "properties": {"run_id": report.run_id, "trace_ids": report.trace_ids,
                           "prompt_template": report.prompt_template,
                           "tool": decision.tool, "action": decision.action.label,
                           "call_index": decision.call_index, "span_id": decision.span_id,
                           "detector": decision.detector, "escalated": decision.escalated,
                           "run_waste": report.waste.to_json()},
        }


def _label(action: Action | None) -> str:
    return "never" if action is None else action.label


def _location(where: Where) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(where.path)}}
    if where.line:
        physical["region"] = {"startLine": where.line}
    return {"physicalLocation": physical}


def _uri(path: str) -> str:
    r"""Return a relative URI reference for a relative path, a ``file:`` URI for an absolute one.

    The path's bytes are percent-encoded, as ``as_uri`` does: a file name that is not UTF-8
    (``bad\xff.jsonl``, read as ``bad\udcff.jsonl``) is ``bad%FF.jsonl``.
    """
    if os.path.isabs(path):
        return Path(path).as_uri()
    return urllib.parse.quote(os.fsencode(path.replace(os.sep, "/")))


def _name(rule: str) -> str:
    """Return ``StagnantResult`` for ``STAGNANT_RESULT`` (SARIF rule names are identifiers)."""
    return "".join(part.capitalize() for part in rule.split("_"))
