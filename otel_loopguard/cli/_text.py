"""``check --format text`` (the default) and ``--format json``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, TextIO

from otel_loopguard.cli._report import (
    Reporter,
    Summary,
    Where,
    budget_text,
    clean,
    entries,
    indented_json,
    run_title,
    summary_line,
    waste_text,
)
from otel_loopguard.replay.checker import report_to_json
from otel_loopguard.types import Action

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport

__all__ = ["JsonReporter", "TextReporter", "use_color"]

_COLORS: Final = {Action.CONTINUE: "32", Action.WARN: "33", Action.REPLAN: "35",
                  Action.STOP: "1;31"}
_DIM: Final = "2"
_OFF: Final = ("", "0", "false")
"""Values of ``FORCE_COLOR`` and ``CLICOLOR_FORCE`` that do not force colour."""


def use_color(mode: str, out: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Return whether to colour: ``always``, ``never``, or ``auto``.

    ``auto``, in order: ``NO_COLOR`` set (to anything but the empty string) turns colour off;
    ``FORCE_COLOR`` (any value but empty, ``0`` or ``false``) or ``CLICOLOR_FORCE`` (any value
    but empty or ``0``) turns it on, even into a pipe or a CI log; ``TERM=dumb`` turns it off;
    else a terminal gets colour. ``--color always|never`` overrides them all.
    """
    if mode != "auto":
        return mode == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR", "").lower() not in _OFF \
            or environ.get("CLICOLOR_FORCE", "0") not in _OFF:
        return True
    if environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


class TextReporter(Reporter):
    """One line per run, one entry per finding, then totals.

    A run's line starts with ``ok``, the highest action of its loop findings, or ``budget``
    for a run over budget that does not loop.
    """

    def run(self, report: RunReport, where: Where | None) -> None:
        """Write the run line and, for a flagged run, its entries with their hints."""
        calls = "1 tool call" if report.tool_calls == 1 else f"{report.tool_calls} tool calls"
        budget = budget_text(report)
        if report.action is Action.CONTINUE and not budget:
            if not self.quiet:
                label = self._paint("ok   ", Action.CONTINUE)
                self.out.write(f"{label} {run_title(report)}: {calls}, no loop\n")
                self.written += 1
            return
        self.written += 1
        if report.action is Action.CONTINUE:  # over budget, but not looping
            label = self._paint("budget", report.budget)
            self.out.write(f"{label} {run_title(report)}: {calls}, no loop, {budget}\n")
        else:
            label = self._paint(f"{report.action.label.upper():5}", report.action)
            self.out.write(f"{label} {run_title(report)}: {calls}"
                           f"{', ' + budget if budget else ''}\n")
        for entry in entries(report):
            self.out.write(f"  - {entry.text}\n")
            self.out.write(f"    {self._dim('hint:')} {entry.hint}\n")
        if report.action is not Action.CONTINUE:
            self.out.write(f"  {self._dim('wasted after the first finding:')} "
                           f"{waste_text(report.waste)}\n")

    def finish(self, summary: Summary) -> None:
        """Write the totals line (after a blank line, when runs were written)."""
        self.out.write(f"{chr(10) if self.written else ''}{summary_line(summary)}\n")

    def _paint(self, text: str, action: Action) -> str:
        return f"\x1b[{_COLORS[action]}m{text}\x1b[0m" if self.color else text

    def _dim(self, text: str) -> str:
        return f"\x1b[{_DIM}m{text}\x1b[0m" if self.color else text


class JsonReporter(Reporter):
    """One JSON document, written run by run as the runs finish (never all held in memory).

    The same document ``json.dump(..., indent=2)`` of the whole would write (``indented_json``).
    """

    def run(self, report: RunReport, where: Where | None) -> None:
        """Write one run of the ``runs`` array."""
        doc = report_to_json(report)
        if where is not None and where.path != "-":  # standard input: no file to name
            # cleaned as every format names it: a file name that is not UTF-8 would be a lone
            # surrogate escape (\udcff), which strict JSON parsers reject with the document
            doc = {"run_id": doc.pop("run_id"), "file": clean(where.path), "line": where.line,
                   **doc}
        text = indented_json(doc).replace("\n", "\n    ")
        self.out.write(('{\n  "runs": [' if not self.written else ",") + "\n    " + text)
        self.written += 1

    def finish(self, summary: Summary) -> None:
        """Close the ``runs`` array and write the summary."""
        doc = {"runs": summary.runs, "tool_calls": summary.tool_calls,
               "failed": summary.failed, "fail_on": summary.fail_on.label,
               "fail_on_budget": "never" if summary.fail_on_budget is None
               else summary.fail_on_budget.label,
               "actions": summary.actions, "over_budget": summary.over_budget,
               "spans": summary.spans,
               "duplicate_spans": summary.duplicate_spans, "bad_records": summary.bad_records,
               "bad_input": [clean(problem) for problem in summary.problems],
               "waste": summary.waste.to_json()}
        text = indented_json(doc).replace("\n", "\n  ")
        self.out.write(('{\n  "runs": []' if not self.written else "\n  ]") + ',\n  "summary": '
                       + text + "\n}\n")
