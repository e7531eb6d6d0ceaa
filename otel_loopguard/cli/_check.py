"""``otel-loopguard check``: replay saved OTLP traces and report loops (a CI gate).

Exit codes: 0 when no run fails, 1 when one does (its loop findings reach ``--fail-on``, or its
budget findings ``--fail-on-budget``, by default the same level), 2 on bad input (a bad record,
no span at all unless ``--allow-empty``) or usage; 2 wins over 1.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any, Final, TextIO, cast

from otel_loopguard.assembly import LONE_TOOL_CALL_HINT
from otel_loopguard.cli._inputs import Inputs, expand
from otel_loopguard.cli._report import MAX_PROBLEMS_LISTED, Reporter, Summary, clean, plural
from otel_loopguard.cli._text import JsonReporter, TextReporter, use_color
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.environment_variables import LOOPGUARD_CONFIG_FILE
from otel_loopguard.exceptions import LoopGuardError, TraceFileError
from otel_loopguard.replay.checker import Checker
from otel_loopguard.replay.tracefile import DEFAULT_MAX_DECOMPRESSED_BYTES, DEFAULT_MAX_LINE_BYTES
from otel_loopguard.types import Action

__all__ = ["CONFIG_HELP", "add_parser", "parse_size"]

CONFIG_HELP: Final = f"TOML config file (default: ${LOOPGUARD_CONFIG_FILE} when set)"
"""``--config``'s help, of ``check`` and ``serve``: the file is read from the variable too."""

_FORMATS: Final[dict[str, type[Reporter] | tuple[str, str]]] = {
    "text": TextReporter, "json": JsonReporter, "junit": ("_junit", "JunitReporter"),
    "sarif": ("_sarif", "SarifReporter"), "github": ("_github", "GithubReporter")}
"""Each format's reporter; the CI formats' as (module of ``otel_loopguard.cli``, class),
imported when chosen (the XML escaping of junit alone imports ``urllib.request``)."""
_SIZE_RE: Final = re.compile(r"\s*(\d+)\s*([kmg]i?b?|b)?\s*", re.IGNORECASE)
_SHIFTS: Final = {"": 0, "b": 0, "k": 10, "m": 20, "g": 30}
_MAX_SIZE: Final = 1 << 40


def run_key_default() -> str:
    """The effective default of ``--run-key`` (``check`` and ``serve``), for its help."""
    value = os.environ.get("LOOPGUARD_RUN_KEY", "").strip()
    if value in ("trace", "conversation", "agent"):
        return f"{value}, from LOOPGUARD_RUN_KEY"
    return "trace, or run_key in --config / LOOPGUARD_CONFIG_FILE"


def add_parser(commands: Any) -> None:
    """Register ``check`` on the subcommand parser."""
    parser = commands.add_parser(
        "check", help="replay saved OTLP traces and report loops",
        description="Replay saved OTLP traces (JSON lines as the Collector's file exporter "
                    "writes them, a JSON document, OTLP protobuf; plain, .gz or .zst; a "
                    "directory, read recursively; or - for stdin) through the detectors. Exit 0 "
                    "when no run reaches --fail-on (loops) or --fail-on-budget (budgets), 1 "
                    "when one does, 2 on bad or empty input or "
                    "usage.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="trace files or directories, or - for stdin")
    parser.add_argument("--format", choices=tuple(_FORMATS), default="text",
                        help="output format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="write the report to FILE instead of stdout (written when the "
                             "check completes)")
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument("--fail-on", choices=("warn", "replan", "stop"), default="stop",
                        help="lowest action of a loop finding that makes the exit code 1 "
                             "(default: stop)")
    parser.add_argument("--fail-on-budget", choices=("warn", "stop", "never"),
                        help="lowest action of a budget finding that makes the exit code 1; "
                             "never: runs over budget are reported but pass (default: as "
                             "--fail-on)")
    parser.add_argument("--run-key", choices=("trace", "conversation", "agent"),
                        help=f"how tool calls are grouped into runs (default: {run_key_default()})")
    parser.add_argument("--strict", action="store_true",
                        help="stop at the first bad record instead of skipping it")
    parser.add_argument("--allow-empty", action="store_true",
                        help="accept input without any span (exit 0 instead of 2)")
    parser.add_argument("--max-decompressed", type=parse_size, metavar="SIZE",
                        default=DEFAULT_MAX_DECOMPRESSED_BYTES,
                        help="largest size a compressed file may expand to, e.g. 512MiB "
                             "(default: 1GiB)")
    parser.add_argument("--max-line-bytes", type=parse_size, metavar="SIZE",
                        default=DEFAULT_MAX_LINE_BYTES,
                        help="largest line, JSON document or protobuf message held; a longer "
                             "line is reported and skipped unread (default: 64MiB)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text format: auto (a terminal, unless NO_COLOR is "
                             "set), always or never")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="text format: list only flagged runs and runs over "
                             "budget (the summary line stays)")
    parser.set_defaults(handler=run_check)


def parse_size(text: str) -> int:
    """Return a size in bytes from ``1073741824``, ``512MiB``, ``1G`` or ``64k`` (binary units)."""
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size in bytes (e.g. 512MiB, 1GiB): {text!r}")
    size = int(match.group(1)) << _SHIFTS[(match.group(2) or "")[:1].lower()]
    if not 0 < size <= _MAX_SIZE:
        raise argparse.ArgumentTypeError(
            f"a size must be more than 0 and at most 1024GiB: {text!r}")
    return size


def run_check(args: argparse.Namespace) -> int:
    """Run ``check`` and return its exit code."""
    overrides = {"run_key": args.run_key} if args.run_key else {}
    config = LoopGuardConfig.load(args.config, **overrides)
    fail_on = Action.parse(args.fail_on)
    budget_name = args.fail_on_budget or args.fail_on
    fail_on_budget = None if budget_name == "never" else Action.parse(budget_name)
    summary = Summary(fail_on=fail_on, fail_on_budget=fail_on_budget)
    left_out: list[TraceFileError] = []
    files = expand(args.paths, None if args.strict else left_out.append)
    to_stdout = args.output is None or args.output == "-"
    if not files and left_out and to_stdout:  # nothing to read: name each path, no report
        for error in left_out:
            _say(clean(str(error)))
        return 2
    # with --output FILE the report is written all the same: a CI step that collects it (a
    # JUnit test report) finds the missing input there as an error, not a missing file
    with _output(args.output, hold=args.strict) as out:
        # a report file is coloured only when asked (--color always), not by the environment
        color = use_color(args.color, sys.stdout) if to_stdout else args.color == "always"
        reporter = _reporter(args.format)(out, fail_on=fail_on, fail_on_budget=fail_on_budget,
                                          quiet=args.quiet, color=color)

        def on_error(error: TraceFileError) -> None:
            inputs.clear_progress()  # on a terminal, the message must not extend its line
            summary.problem(str(error), whole_input=not error.line)
            if summary.bad_records <= MAX_PROBLEMS_LISTED:
                _say(clean(str(error)))
            elif summary.bad_records == MAX_PROBLEMS_LISTED + 1:
                _say(f"more bad records not shown (the first {MAX_PROBLEMS_LISTED} are)")
            reporter.bad_input(error)

        inputs = Inputs(files, strict=args.strict, on_error=on_error,
                        max_decompressed_bytes=args.max_decompressed,
                        max_line_bytes=args.max_line_bytes)
        for error in left_out:
            on_error(error)
        # A report written to the terminal that shows the progress starts on a clean line.
        shared = to_stdout and not args.strict and _isatty(sys.stdout)
        checker = Checker(config)
        lone = 0
        try:
            for report in checker.run(inputs.spans()):  # streamed: memory bounded by open runs
                summary.add(report)
                lone += report.unparented_tool_calls
                if shared:
                    inputs.clear_progress()
                reporter.run(report, inputs.where(report))
            summary.spans = inputs.spans_read
            summary.duplicate_spans = checker.duplicate_spans
            # input without spans, and nothing bad in it: --allow-empty accepts it (bad input
            # is never accepted, so its reports do not offer the flag)
            summary.empty = summary.spans == 0 and not args.allow_empty \
                and not summary.bad_records
            reporter.finish(summary)
        except BaseException:  # its one line on stderr (--strict's bad record) starts clean
            inputs.clear_progress()
            raise
        finally:
            reporter.close()
    if lone:
        _say(f"note: {plural(lone, 'tool call')} with no parent span and no conversation id: "
             f"{LONE_TOOL_CALL_HINT}")
    if checker.split_traces:
        _say(f"note: {plural(checker.split_traces, 'trace')} went on after being checked: "
             "the later spans were checked as a run of their own, so a loop across the "
             "pieces is not seen (a trace is checked once 10,000 spans have passed without "
             f"one of its own, or when more than max_runs = {config.max_runs:,} traces are "
             "open: raise max_runs, or check such traces in a file of their own)")
    return _verdict(summary, args.paths)


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _reporter(name: str) -> type[Reporter]:
    """Return the reporter class of the format ``name``."""
    found = _FORMATS[name]
    if isinstance(found, tuple):
        module, attribute = found
        found = getattr(importlib.import_module(f"otel_loopguard.cli.{module}"), attribute)
    return cast(type[Reporter], found)


def _verdict(summary: Summary, paths: list[str]) -> int:
    """Say what is wrong with the input, if anything; return the exit code."""
    code = 1 if summary.failing else 0
    if summary.bad_records:
        unread = summary.skipped_inputs
        records = summary.bad_records - unread
        _say(", ".join(part for part in (
            f"{plural(unread, 'input')} skipped" if unread else "",
            f"{plural(records, 'bad input record')} skipped" if records else "") if part))
        code = 2
    if summary.empty:
        where = clean(paths[0]) if len(paths) == 1 else f"the {plural(len(paths), 'input')}"
        _say(f"nothing to check: no spans in {where} (--allow-empty accepts empty input)")
        code = 2
    elif summary.spans and not summary.tool_calls and not summary.flagged:
        _say(f"note: none of the {plural(summary.spans, 'span')} is a tool call, so only "
             "handoff loops could have been detected")
    return code


@contextlib.contextmanager
def _in_place(path: str) -> Iterator[TextIO]:
    """Yield ``path`` opened for writing: a device, FIFO or socket (``/dev/null``, a pipe).

    Such a file is written as it is: replacing it, as a regular file's report replaces it
    once complete, would put a regular file where the device or the pipe was.
    """
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _unwritable(path: str, exc: OSError) -> LoopGuardError:
    """Return the one-line error of a report that cannot be written to ``path``."""
    if exc.errno == errno.ENOENT:  # worded as a missing input is
        return LoopGuardError(f"{path}: cannot write the report: no such directory "
                              f"{os.path.dirname(path) or '.'}")
    return LoopGuardError(f"{path}: cannot write the report: {exc.strerror or exc}")


def _say(message: str) -> None:
    print(f"otel-loopguard: {message}", file=sys.stderr)


_FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""Errors of a write that found no room: a full disk, a quota, a file size limit."""


@contextlib.contextmanager
def _to_stdout(hold: bool) -> Iterator[TextIO]:
    """Yield stdout, or with ``hold`` a spooled file copied to stdout once complete.

    A write that stdout refuses for want of room (``_FULL``) is one line naming standard
    output; other errors pass on as they are.
    """
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a span's text must not fail on a narrow terminal encoding
        reconfigure(errors="backslashreplace")
    try:
        if not hold:
            yield sys.stdout
        else:
            import shutil
            import tempfile

            with tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+", encoding="utf-8",
                                               errors="backslashreplace", newline="\n") as held:
                yield cast(TextIO, held)
                held.seek(0)
                shutil.copyfileobj(held, sys.stdout)
        sys.stdout.flush()
    except OSError as exc:  # a full disk: only a write fails so (not reading an input)
        if exc.errno in _FULL:
            raise _unwritable("standard output", exc) from None
        raise


@contextlib.contextmanager
def _output(path: str | None, *, hold: bool = False) -> Iterator[TextIO]:
    """Yield stdout, or a temporary file that replaces ``path`` once the report is complete.

    With ``hold`` (``--strict``), stdout gets the report only once it is complete: a check that
    stops at a bad record leaves nothing there, not the runs reported before it (half a JSON
    or SARIF document).
    """
    if path is None or path == "-":
        with _to_stdout(hold) as stream:
            yield stream
        return
    if os.path.isdir(path):
        raise LoopGuardError(f"{path}: cannot write the report: is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        with _in_place(path) as stream:
            yield stream
        return
    import tempfile  # only here: with shutil and random, 2 ms of every check's start-up

    target = os.path.realpath(path)  # through a symlink: the link keeps naming the report
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below
            "w", encoding="utf-8", newline="\n", dir=os.path.dirname(target), delete=False,
            prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with handle:
            yield cast(TextIO, handle)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(handle.name, 0o666 & ~mask)  # as open() would have made it
        os.replace(handle.name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        if hold and isinstance(exc, LoopGuardError) and os.path.isfile(target):
            with contextlib.suppress(OSError):
                os.unlink(target)  # --strict stopped: no earlier run's report left to publish
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise _unwritable(path, exc) from None
        raise
