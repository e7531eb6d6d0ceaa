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
from collections.abc import Mapping, Sequence
from typing import Final

from otel_loopguard.exceptions import ConfigError, LoopGuardError

__all__ = ["main"]

EXIT_OK = 0
EXIT_LOOPS = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    commands: Mapping[str, argparse.ArgumentParser]
    """The top-level parser's command parsers by name (set by ``_build_parser``)."""

    def error(self, message: str) -> None:  # type: ignore[override]  # never returns
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


_COMMANDS: Final = ("check", "demo", "serve", "assets")
"""The subcommands, in help order; each is the module ``otel_loopguard.cli._<name>``."""
_OPTIONAL: Final = frozenset({"demo", "serve"})
"""Commands whose module may fail to import (its extra is not installed): left out then."""


def _build_parser(argv: Sequence[str] | None = None) -> _Parser:
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
    parser.commands = commands.choices
    return parser


def _parse(parser: _Parser, argv: Sequence[str]) -> argparse.Namespace:
    """Return the parsed ``argv``; a command's arguments are parsed by that command's parser.

    The top-level parser would take ``check a.jsonl -q b.jsonl``'s second path for an unknown
    argument (argparse reads positionals only up to the first flag), and word a mistyped flag
    (``check --fial-on``) as its own error, with its ``COMMAND ...`` usage. The command's parser,
    asked for intermixed arguments, reads paths on both sides of a flag, and an error names the
    command and shows the flags it takes. Words after ``--`` are positional
    (``check -- -traces.jsonl``): each goes through the parser as a stand-in that cannot read
    as a flag, and is put back.
    """
    command = parser.commands.get(argv[0]) if argv else None
    if command is None:
        return parser.parse_args(argv)
    words, after = list(argv[1:]), []
    if "--" in words:  # what follows is positional; intermixed parsing fails on a leading --
        cut = words.index("--")
        words, after = words[:cut], words[cut + 1:]
    stand_ins = {f"\0{index}": word for index, word in enumerate(after)}
    args = command.parse_intermixed_args([*words, *stand_ins])
    for name, value in vars(args).items():
        if isinstance(value, list) and stand_ins:
            setattr(args, name, [stand_ins.get(v, v) if isinstance(v, str) else v
                                 for v in value])
        elif isinstance(value, str) and value in stand_ins:
            setattr(args, name, stand_ins[value])
    args.command, args.version = argv[0], False
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _build_parser(argv)
    args = _parse(parser, argv)
    if args.version:
        from otel_loopguard import __version__
        from otel_loopguard.adapters import accelerated as span_end
        from otel_loopguard.kinds._shell import ACCELERATED as SHELL_READER
        from otel_loopguard.otlp._proto import WIRE
        from otel_loopguard.signature import ACCELERATED

        print(f"otel-loopguard {__version__} (C accelerators: signatures "
              f"{'on' if ACCELERATED else 'off'}, OTLP decoder {'on' if WIRE else 'off'}, "
              f"span processor {'on' if span_end() else 'off'}, "
              f"shell reader {'on' if SHELL_READER else 'off'})")
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
