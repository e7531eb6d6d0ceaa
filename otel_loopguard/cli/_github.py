"""``check --format github``: GitHub Actions workflow commands, one annotation per flagged run.

A run that fails the check (``--fail-on``, ``--fail-on-budget``) is an ``::error``, a run
flagged or over budget below that a ``::warning``; bad
input records are ``::error`` annotations on their file and line. GitHub shows the first
``SHOWN_PER_STEP`` annotations of each kind of a step and drops the rest without a word, so
past that a closing ``::notice`` counts them. Values are escaped as the Actions toolkit escapes
them (``%``, CR and LF in the message; also ``:`` and ``,`` in properties), after span text has
been cleaned of control characters.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final

from otel_loopguard.cli._report import (
    EMPTY_INPUT,
    Reporter,
    Summary,
    Where,
    budget_text,
    clean,
    entries,
    plural,
    run_title,
    waste_text,
)
from otel_loopguard.cli._report import summary_line as _summary_line
from otel_loopguard.types import Action

if TYPE_CHECKING:
    from typing import TextIO

    from otel_loopguard.exceptions import TraceFileError
    from otel_loopguard.replay.checker import RunReport

__all__ = ["SHOWN_PER_STEP", "GithubReporter", "escape_data", "escape_property"]

SHOWN_PER_STEP: Final = 10
"""Annotations of one kind (error, warning) GitHub shows for a step; it drops the others."""


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (``title``, ``file`` ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    """Annotations for the flagged runs and the bad input, then the totals as a plain line."""

    def __init__(self, out: TextIO, *, fail_on: Action, fail_on_budget: Action | None = None,
                 quiet: bool = False, color: bool = False) -> None:
        super().__init__(out, fail_on=fail_on, fail_on_budget=fail_on_budget, quiet=quiet,
                         color=color)
        self._annotations: Counter[str] = Counter()
        """Annotations written, by kind."""

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
        """Write the totals as a plain log line, after any closing annotations.

        Those are an error for input without a span, and a notice if GitHub hides annotations.
        """
        if summary.empty:
            self._command("error", None, "otel-loopguard: nothing to check", EMPTY_INPUT)
        if max(self._annotations.values(), default=0) > SHOWN_PER_STEP:
            counts = " and ".join(plural(self._annotations[level], f"{level} annotation")
                                  for level in ("error", "warning") if self._annotations[level])
            self._command("notice", None, "otel-loopguard: more annotations than GitHub shows",
                          f"{counts} written: GitHub shows the first {SHOWN_PER_STEP} of each "
                          "kind of a step; the step's log lists them all")
        self.out.write(f"{_summary_line(summary)}\n")

    def _command(self, level: str, where: Where | None, title: str, message: str) -> None:
        props = []
        if where is not None and where.path != "-":  # standard input: no file to annotate
            props.append(f"file={escape_property(clean(where.path))}")
            if where.line:
                props.append(f"line={where.line}")
        props.append(f"title={escape_property(title)}")
        self.out.write(f"::{level} {','.join(props)}::{escape_data(message)}\n")
        self._annotations[level] += 1
