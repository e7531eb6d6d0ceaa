"""What every ``check`` output format shares: the summary, safe span text, finding lines.

Anything that came from a span (tool names, run and conversation ids, prompt templates, agent
names, hints quoting them) goes through :func:`clean` before it is printed, so that no control
character, newline, ANSI escape or bidirectional override in a span can forge output lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

import orjson

from otel_loopguard._safe_text import escape_unsafe
from otel_loopguard.types import Action, Decision
from otel_loopguard.waste import Waste

if TYPE_CHECKING:
    from otel_loopguard.exceptions import TraceFileError
    from otel_loopguard.replay.checker import RunReport

__all__ = ["EMPTY_INPUT", "MAX_PROBLEMS_LISTED", "Reporter", "RunEntry", "Summary", "Where",
           "budget_text", "clean", "entries", "fails", "indented_json", "plural", "run_title",
           "summary_line", "waste_text"]


MAX_PROBLEMS_LISTED: Final = 100
"""Input problems kept for the report (stderr and the count show them all)."""
NO_TEMPLATE: Final = "no prompt template"
EMPTY_INPUT: Final = "no spans in the input (--allow-empty accepts empty input)"
"""What the reports say of input without a single span (an error unless allowed)."""


def indented_json(doc: Any) -> str:
    """Return ``json.dumps(doc, indent=2)``, written by orjson when the text is ASCII.

    Why not json.dumps alone: with ``indent`` set, the standard library encodes in Python, not
    C; for the 389 runs of a 10 MB trace file it took 20 ms, orjson 1 ms (about 3% of that
    ``check``). The two write the same text but for non-ASCII characters (json escapes them,
    so such text comes from json.dumps) and the spelling of some floats (``1e-05``, ``1e-5``),
    which parse to the same values.
    """
    try:
        text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # what orjson refuses (an integer of more than 64 bits) json writes
        return json.dumps(doc, indent=2)
    return text if text.isascii() else json.dumps(doc, indent=2)


def clean(text: object) -> str:
    r"""Return ``text`` with every character that could forge or garble a line escaped.

    ``"a\nb"`` becomes ``a\x0ab`` and ``"\x1b[31m"`` becomes ``\x1b[31m`` (literally); printable
    text, non-ASCII letters included, is left alone.
    """
    return escape_unsafe(str(text))


def plural(count: int, noun: str, many: str | None = None) -> str:
    """Return ``"1 run"``, ``"2 runs"``; ``many`` for irregular plurals."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


@dataclass(frozen=True, slots=True)
class Where:
    """Where the first span of a run was read: the input file and its line (0: not a line)."""

    path: str
    line: int = 0


def fails(report: RunReport, fail_on: Action, fail_on_budget: Action | None) -> bool:
    """Return True when the run fails the check.

    It fails when its loop findings reached ``fail_on``, or its budget findings reached
    ``fail_on_budget`` (None: runs over budget never fail).
    """
    return report.action >= fail_on or (
        fail_on_budget is not None and report.budget >= fail_on_budget)


@dataclass(slots=True)
class Summary:
    """Totals of one ``check``, filled as runs are reported."""

    fail_on: Action
    fail_on_budget: Action | None = None
    """The lowest budget action that fails the check (None: never)."""
    runs: int = 0
    tool_calls: int = 0
    flagged: int = 0
    """Runs with a loop finding (above ``continue``)."""
    over_budget: dict[str, int] = field(
        default_factory=lambda: {Action.WARN.label: 0, Action.STOP.label: 0})
    """Runs by the highest action of their budget findings (runs within budget left out)."""
    failed: int = 0
    """Runs that fail the check (``fails``)."""
    actions: dict[str, int] = field(default_factory=lambda: {a.label: 0 for a in Action})
    """Runs by the highest action of their loop findings."""
    highest: Action = Action.CONTINUE
    spans: int = 0
    """Spans read, copies included."""
    duplicate_spans: int = 0
    bad_records: int = 0
    skipped_inputs: int = 0
    """Of ``bad_records``, the whole inputs that could not be read (missing, unreadable)."""
    problems: list[str] = field(default_factory=list)
    """The first input problems (``file:line: reason``), at most ``MAX_PROBLEMS_LISTED``."""
    empty: bool = False
    """True when the input held no span (an error unless empty input is allowed)."""
    waste: Waste = field(default_factory=Waste)
    """What every run wasted, summed."""

    def add(self, report: RunReport) -> None:
        """Count one finished run."""
        self.runs += 1
        self.tool_calls += report.tool_calls
        if report.waste:
            self.waste += report.waste
        self.actions[report.action.label] += 1
        self.highest = max(self.highest, report.action)
        if report.action > Action.CONTINUE:
            self.flagged += 1
        if report.budget > Action.CONTINUE:
            label = report.budget.label
            self.over_budget[label] = self.over_budget.get(label, 0) + 1
        if fails(report, self.fail_on, self.fail_on_budget):
            self.failed += 1

    def problem(self, message: str, *, whole_input: bool = False) -> None:
        """Count one input problem, keeping its message if few are kept so far.

        ``whole_input``: a whole input that could not be read, rather than one record of it.
        """
        self.bad_records += 1
        self.skipped_inputs += whole_input
        if len(self.problems) < MAX_PROBLEMS_LISTED:
            self.problems.append(message)

    @property
    def runs_over_budget(self) -> int:
        """Return how many runs had a budget finding."""
        return sum(self.over_budget.values())

    @property
    def failing(self) -> bool:
        """Return True when a run reached ``fail_on``."""
        return self.failed > 0


def summary_line(summary: Summary) -> str:
    """Return the closing line of the text formats, e.g. ``2 runs, 13 tool calls; 1 flagged``."""
    line = (f"{plural(summary.runs, 'run')}, {plural(summary.tool_calls, 'tool call')}; "
            f"{summary.flagged} flagged")
    if summary.runs_over_budget:
        line += f"; {summary.runs_over_budget} over budget"
    if summary.waste:
        line += f"; wasted {waste_text(summary.waste)}"
    if summary.duplicate_spans:
        line += f"; {plural(summary.duplicate_spans, 'duplicate span')} dropped"
    if summary.bad_records:
        line += f"; {plural(summary.bad_records, 'bad input record')} skipped"
    if summary.failed != summary.flagged:  # flagged below --fail-on, or failed by a budget
        line += f"; {summary.failed} failing the check"
    return line


def waste_text(waste: Waste) -> str:
    """Return ``3 tool calls, 3 model turns, 3,000 input and 150 output tokens, 1.5 s ...``.

    The parts that are zero are left out, but the tool calls (``0 tool calls``).
    """
    parts = [plural(waste.tool_calls, "tool call")]
    if waste.model_turns:
        parts.append(plural(waste.model_turns, "model turn"))
    if waste.input_tokens or waste.output_tokens:
        parts.append(f"{waste.input_tokens:,} input and {waste.output_tokens:,} output tokens")
    if waste.tool_seconds:
        parts.append(f"{_number(waste.tool_seconds, 3)} s in tools")
    parts.extend(f"{_number(amount, 6)} {clean(currency)}"
                 for currency, amount in sorted(waste.cost.items()) if amount)
    return ", ".join(parts)


def _number(value: float, decimals: int) -> str:
    """Return ``1.5``, ``0.009``, ``1,234.5``: no trailing zeros; ``<0.001`` for less."""
    text = f"{value:,.{decimals}f}".rstrip("0").rstrip(".")
    return f"<{10 ** -decimals:.{decimals}f}" if text == "0" else text


def budget_text(report: RunReport) -> str:
    """Return ``over budget (stop)`` for a run over budget, ``""`` for one within budget."""
    return f"over budget ({report.budget.label})" if report.budget > Action.CONTINUE else ""


def run_title(report: RunReport) -> str:
    """Return ``run <id> [<template>]``, cleaned (a conversation id comes from a span)."""
    return f"run {clean(report.run_id)} [{clean(report.prompt_template or NO_TEMPLATE)}]"


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One line of a flagged run: the first finding of each (tool, code, action)."""

    decision: Decision
    text: str
    """e.g. ``stop at call 7 (PERMANENT_FAILURE, failure): crm_lookup - calls 6, 7``."""
    hint: str


def entries(report: RunReport) -> Iterator[RunEntry]:
    """Yield the entries of a run, in order, each (tool, code, action) once; text cleaned."""
    shown: set[tuple[str, str, str]] = set()
    for decision in report.findings:
        key = (decision.tool, decision.code, decision.action.label)
        if key not in shown:
            shown.add(key)
            yield RunEntry(decision, describe(decision), clean(decision.hint))


def describe(decision: Decision) -> str:
    """Return the one-line description of a finding, cleaned."""
    evidence = decision.evidence[0]
    action = decision.action.label
    if evidence.detector == "handoff":  # no tool call triggered it: say where it fell
        where = (f"after call {decision.call_index}" if decision.call_index
                 else "before any tool call")
        cycle = " -> ".join(clean(a) for a in evidence.details.get("cycle", []))
        return f"{action} at a handoff {where} ({decision.code}, handoff): {cycle or 'agents'}"
    if evidence.detector == "idle_turns":  # a model turn, not a tool call, got it
        return (f"{action} at a model turn after call {decision.call_index} ({decision.code}, "
                f"idle_turns): {evidence.count} turns in a row without a tool call")
    indices = evidence.details.get("call_indices") or [decision.call_index]
    calls = ", ".join(str(i) for i in indices)
    return (f"{action} at call {decision.call_index} ({decision.code}, {evidence.detector}): "
            f"{clean(decision.tool)} - {'call' if len(indices) == 1 else 'calls'} {calls}")


class Reporter:
    """Writes one output format as runs finish; subclasses override what they need.

    Args:
        out: where the report goes (stdout or the ``--output`` file).
        fail_on: the lowest action of a loop finding that fails the check.
        fail_on_budget: the lowest action of a budget finding that fails the check (None:
            runs over budget are reported but never fail it).
        quiet: list flagged runs and runs over budget only (text formats).
        color: colour the text format.
    """

    def __init__(self, out: TextIO, *, fail_on: Action, fail_on_budget: Action | None = None,
                 quiet: bool = False, color: bool = False) -> None:
        self.out = out
        self.fail_on = fail_on
        self.fail_on_budget = fail_on_budget
        self.quiet = quiet
        self.color = color
        self.written = 0
        """Runs written so far (for formats that punctuate between runs)."""

    def fails(self, report: RunReport) -> bool:
        """Return True when ``report`` fails the check."""
        return fails(report, self.fail_on, self.fail_on_budget)

    def run(self, report: RunReport, where: Where | None) -> None:
        """Write one finished run."""

    def bad_input(self, error: TraceFileError) -> None:
        """Note one bad input record (stderr has it already)."""

    def finish(self, summary: Summary) -> None:
        """Write what comes after the last run."""

    def close(self) -> None:
        """Release what the reporter holds, finished or not (the check may have failed)."""
