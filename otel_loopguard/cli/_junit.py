"""``check --format junit``: JUnit XML, one test case per run, as CI systems read it.

``<testsuites>`` holds one ``<testsuite>``; each run is a ``<testcase>`` (class name: the
prompt template, so CI groups runs by template), with a ``<failure>`` when the run fails the
check (its loop findings reached ``--fail-on``, type the action; or its budget findings
``--fail-on-budget``, type ``budget``) and its findings in ``<system-out>`` when it was flagged
or over budget below that. Bad input
(or no span at all) is one more test case with an ``<error>``. The counts come first in the
XML, so the test cases are spooled to a temporary file (in memory while small) until the end.
The document is ASCII, any other character a reference (``&#233;``): it stays the UTF-8 it
declares whatever the encoding of standard output (a Windows pipe writes cp1252).
"""

from __future__ import annotations

import datetime
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Final, TextIO
from xml.sax.saxutils import escape, quoteattr

from otel_loopguard.cli._report import (
    NO_TEMPLATE,
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
from otel_loopguard.types import Action

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport

__all__ = ["JunitReporter"]

_SPOOL_BYTES: Final = 4 << 20
_SUITE: Final = "otel-loopguard check"


class JunitReporter(Reporter):
    """Test cases spooled as runs finish; the document written at the end."""

    def __init__(self, out: TextIO, *, fail_on: Action, fail_on_budget: Action | None = None,
                 quiet: bool = False, color: bool = False) -> None:
        super().__init__(out, fail_on=fail_on, fail_on_budget=fail_on_budget, quiet=quiet,
                         color=color)
        self._cases = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed in close()
            max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8")
        self._started = time.monotonic()
        self._timestamp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

    def run(self, report: RunReport, where: Where | None) -> None:
        """Spool the test case of one run."""
        attrs = {"classname": clean(report.prompt_template or NO_TEMPLATE),
                 "name": run_title(report)}
        if where is not None and where.path != "-":  # standard input: no file to name
            attrs["file"] = clean(where.path)
            if where.line:
                attrs["line"] = str(where.line)
        budget = budget_text(report)
        lines = [f"{report.action.label}: {plural(report.tool_calls, 'tool call')}"
                 + (f", {budget}" if budget else "")]
        for entry in entries(report):
            lines += [entry.text, f"  hint: {entry.hint}"]
        if report.action > Action.CONTINUE:
            lines.append(f"wasted after the first finding: {waste_text(report.waste)}")
        body = _text("\n".join(lines))
        out = self._cases
        out.write(f"    <testcase{_attributes(attrs)}>\n")
        if self.fails(report):
            # a loop names the failure when there is one; else the budget does
            kind = report.action.label if report.action >= self.fail_on else "budget"
            message = f"{kind.upper()} {run_title(report)}"
            out.write(f"      <failure message={_attr(message)} "
                      f"type={_attr(kind)}>{body}</failure>\n")
        elif report.action > Action.CONTINUE or budget:
            out.write(f"      <system-out>{body}</system-out>\n")
        out.write("    </testcase>\n")
        self.written += 1

    def finish(self, summary: Summary) -> None:
        """Write the document: counts, the spooled test cases, the input error if any."""
        errors = 1 if summary.bad_records or summary.empty else 0
        counts = {"tests": str(summary.runs + errors), "failures": str(summary.failed),
                  "errors": str(errors), "skipped": "0",
                  "time": f"{time.monotonic() - self._started:.3f}"}
        self.out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        self.out.write(f"<testsuites{_attributes({'name': _SUITE, **counts})}>\n")
        suite = {"name": _SUITE, **counts, "timestamp": self._timestamp.isoformat()}
        self.out.write(f"  <testsuite{_attributes(suite)}>\n")
        self._properties(summary)
        self._cases.seek(0)
        shutil.copyfileobj(self._cases, self.out)
        if errors:
            self._input_error(summary)
        self.out.write("  </testsuite>\n</testsuites>\n")

    def _properties(self, summary: Summary) -> None:
        """Write the suite's waste totals as ``<properties>`` (``loopguard.waste.*``)."""
        waste = summary.waste.to_json()
        cost = waste.pop("cost")
        items = [(f"loopguard.waste.{name}", str(value)) for name, value in waste.items()]
        items += [(f"loopguard.waste.cost.{clean(currency)}", str(amount))
                  for currency, amount in cost.items()]
        self.out.write("    <properties>\n")
        for name, value in items:
            self.out.write(f"      <property{_attributes({'name': name, 'value': value})}/>\n")
        self.out.write("    </properties>\n")

    def close(self) -> None:
        """Drop the spooled test cases."""
        self._cases.close()

    def _input_error(self, summary: Summary) -> None:
        if summary.bad_records:
            message = f"{plural(summary.bad_records, 'bad input record')} skipped"
            kind = "bad input"
        else:
            message, kind = "no spans in the input", "empty input"
        body = _text("\n".join(clean(p) for p in summary.problems))
        self.out.write(f'    <testcase classname="otel-loopguard" name="input">\n'
                       f"      <error message={_attr(message)} type={_attr(kind)}>"
                       f"{body}</error>\n    </testcase>\n")


def _attributes(attrs: dict[str, str]) -> str:
    return "".join(f" {name}={_attr(value)}" for name, value in attrs.items())


def _text(value: str) -> str:
    """Return ``value`` as XML character data, in ASCII."""
    return _ascii(escape(value))


def _attr(value: str) -> str:
    """Return ``value`` as a quoted XML attribute value, in ASCII."""
    return _ascii(quoteattr(value))


def _ascii(xml: str) -> str:
    """Return ``xml`` with every character past ASCII written as a character reference.

    Span text reaches here cleaned, so there is no lone surrogate (no reference XML forbids).
    """
    return xml if xml.isascii() else xml.encode("ascii", "xmlcharrefreplace").decode("ascii")
