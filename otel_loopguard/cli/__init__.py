"""The ``otel-loopguard`` command line: ``check``, ``demo``, ``serve`` and ``assets``.

Exit codes: 0 clean, 1 a run reached ``--fail-on`` (``check``), 2 usage or input error.
Results go to stdout, diagnostics to stderr: one line for any error, never a traceback (an
unexpected one says so, with its type and message).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Final

from otel_loopguard.exceptions import ConfigError, LoopGuardError

__all__ = ["main"]

EXIT_OK = 0
EXIT_LOOPS = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # never returns
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


_COMMANDS: Final = ("check", "demo", "serve", "assets")
"""The subcommands, in help order; each is the module ``otel_loopguard.cli._<name>``."""
_OPTIONAL: Final = frozenset({"demo", "serve"})
"""Commands whose module may fail to import (its extra is not installed): left out then."""


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the parser; with ``argv`` naming a command first, that command's alone.

    Each command's module imports what it runs (``serve`` the receiver and Prometheus, ``demo``
    the OpenTelemetry SDK): registering only the command asked for keeps them out of the
    others' start-up. Anything else (no command, an option first, a misspelt command) gets
    every command, for the help and the error message.
    """
    parser = _Parser(prog="otel-loopguard",
                     description="Catch AI agents stuck in tool-call loops, from their "
                                 "OpenTelemetry spans.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    first = next(iter(sys.argv[1:] if argv is None else argv), None)
    for name in (first,) if first in _COMMANDS else _COMMANDS:
        try:
            module = importlib.import_module(f"otel_loopguard.cli._{name}")
        except ImportError:  # pragma: no cover - an optional command's dependencies
            if name not in _OPTIONAL:
                raise
            continue
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = _build_parser(argv)
    args = parser.parse_args(argv)
    if args.version:
        from otel_loopguard import __version__
        from otel_loopguard.otlp._proto import WIRE
        from otel_loopguard.signature import ACCELERATED

        print(f"otel-loopguard {__version__} (C accelerators: signatures "
              f"{'on' if ACCELERATED else 'off'}, OTLP decoder {'on' if WIRE else 'off'})")
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the command's handler; any error is one line on stderr and exit code 2."""
    try:
        code: int = args.handler(args)
    except ConfigError as exc:
        message = f"config error: {exc}"
    except LoopGuardError as exc:
        message = str(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away, e.g. `check ... | head -1`
        _silence_stdout()
        message = "output closed before the report was complete (broken pipe)"
    except Exception as exc:  # never a traceback: one line, and the details in the debug log
        logging.getLogger("otel_loopguard").debug("unexpected error", exc_info=True)
        message = f"unexpected error: {type(exc).__name__}: {exc}"
    else:
        return code
    from otel_loopguard.cli._report import clean  # a bad record's reason may quote a span

    print(f"otel-loopguard: {clean(message)}", file=sys.stderr)
    return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture it)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
