"""``check --format github``: GitHub Actions workflow commands, one annotation per flagged run.

A run that fails the check (``--fail-on``, ``--fail-on-budget``) is an ``::error``, a run
flagged or over budget below that a ``::warning``; bad
input records are ``::error`` annotations on their file and line. Values are escaped as the
Actions toolkit escapes them (``%``, CR and LF in the message; also ``:`` and ``,`` in
properties), after span text has been cleaned of control characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_loopguard.cli._report import (
    Reporter,
    Summary,
    Where,
    budget_text,
    clean,
    entries,
    run_title,
    waste_text,
)
from otel_loopguard.cli._report import summary_line as _summary_line
from otel_loopguard.types import Action

if TYPE_CHECKING:
    from otel_loopguard.exceptions import TraceFileError
    from otel_loopguard.replay.checker import RunReport

__all__ = ["GithubReporter", "escape_data", "escape_property"]


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (``title``, ``file`` ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    """Annotations for the flagged runs and the bad input, then the totals as a plain line."""

    def run(self, report: RunReport, where: Where | None) -> None:
        """Write the annotation of a flagged run (nothing for a clean one)."""
        budget = budget_text(report)
        if report.action is Action.CONTINUE and not budget:
            return
        level = "error" if self.fails(report) else "warning"
        calls = "1 tool call" if report.tool_calls == 1 else f"{report.tool_calls} tool calls"
        kind = "BUDGET" if report.action is Action.CONTINUE else report.action.label.upper()
        title = f"{kind} {run_title(report)}: {calls}" + (f", {budget}" if budget else "")
        lines = []
        for entry in entries(report):
            lines += [entry.text, f"hint: {entry.hint}"]
        if report.action > Action.CONTINUE:
            lines.append(f"wasted after the first finding: {waste_text(report.waste)}")
        self._command(level, where, title, "\n".join(lines))

    def bad_input(self, error: TraceFileError) -> None:
        """Write an error annotation on the bad record's file and line."""
        self._command("error", Where(error.path, error.line), "otel-loopguard: bad input record",
                      clean(error.reason))

    def finish(self, summary: Summary) -> None:
        """Write the totals, as a plain log line."""
        self.out.write(f"{_summary_line(summary)}\n")

    def _command(self, level: str, where: Where | None, title: str, message: str) -> None:
        props = []
        if where is not None and where.path != "-":  # standard input: no file to annotate
            props.append(f"file={escape_property(clean(where.path))}")
            if where.line:
                props.append(f"line={where.line}")
        props.append(f"title={escape_property(title)}")
        self.out.write(f"::{level} {','.join(props)}::{escape_data(message)}\n")
