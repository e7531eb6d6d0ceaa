"""Package and module runners: the command that ``npx``, ``uv run`` or ``python -m`` runs.

``ShellReader`` (``kinds._shell``) reads a runner's command as the command itself: ``npx
prettier --write`` changes files as ``prettier --write`` does, ``uv run pytest`` runs tests.
Only what is clear is unwrapped: a runner option not in its table, or a script runner's word
without a specific rule of its own (``yarn test``), leaves the runner a program run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from otel_loopguard.kinds._table import (
    MODULE_RUNNERS,
    PACKAGE_RUNNERS,
    PYTHON_FLAGS,
    PYTHON_VALUE_OPTIONS,
    RUNNER_GLOBAL_OPTIONS,
    SCRIPT_RUNNERS,
    RunnerOptions,
)

__all__ = ["RUN_WORDS", "PackageRunners", "command_name"]

_VERSIONED: Final = re.compile(r"(python|pip|pypy)[0-9.]*")

RUNNERS: Final[Mapping[str, tuple[tuple[tuple[str, ...], RunnerOptions | None], ...]]] = {
    word: tuple(sorted(((tuple(key.split()[1:]), options)
                        for key, options in [*PACKAGE_RUNNERS.items(),
                                             *((key, None) for key in SCRIPT_RUNNERS)]
                        if key.split()[0] == word), key=lambda rule: -len(rule[0])))
    for word in {key.split()[0] for key in [*PACKAGE_RUNNERS, *SCRIPT_RUNNERS]}}
"""Runner word → (subcommand words, options; None for a script runner), the longest first."""
RUN_WORDS: Final = MODULE_RUNNERS | RUNNERS.keys()
"""Commands that may run another one named after their options (``python -m``, ``npx``)."""


def command_name(word: str) -> str:
    """Return the command name of ``word``: its basename, versions folded (python3.11 → python)."""
    name = word.rsplit("/", 1)[-1] if "/" in word else word
    if name[:1] != "p" or name[-1] not in "0123456789.":  # no version to fold
        return name
    versioned = _VERSIONED.fullmatch(name)
    return versioned.group(1) if versioned else name


class PackageRunners:
    """``ShellReader``'s reading of runners: a mixin over its ``_match``."""

    if TYPE_CHECKING:
        def _match(self, name: str, args: list[str], positional: list[str] | None = None,
                   specific_only: bool = False) -> tuple[str, int] | None: ...

    def _runs(self, name: str, args: list[str]) -> tuple[str | None, list[str]]:
        """Return (the command a module or package runner runs, its arguments).

        (None, the runner's arguments) when ``name`` runs no other command: not a runner, a
        runner's own subcommand (``pnpm -F web install``: global options dropped), or unclear.
        """
        if name in MODULE_RUNNERS:
            module = module_of(args)
            return (module[0], module[1:]) if module else (None, args)
        start = skip_options(args, 0, RUNNER_GLOBAL_OPTIONS.get(name))
        if start is None:
            return None, args
        if self._match(name, args[start:], specific_only=True) is not None:
            return None, args[start:]
        run = self._run_by(name, args, start)
        return (run[0], run[1:]) if run else (None, args)

    def _run_by(self, runner: str, args: list[str], start: int) -> list[str] | None:
        """Return the command a package runner runs from ``args[start:]``, or None.

        None when it is not clear: an option of the runner not in its table, nothing after the
        options, or a script runner's word without a specific rule (``yarn test``).
        """
        for subs, options in RUNNERS[runner]:
            end = start + len(subs)
            if tuple(args[start:end]) != subs:
                continue
            if options is not None:
                found = skip_options(args, end, options)
                if found is None:
                    return None
                end = found + 1 if found < len(args) and args[found] == "--" else found
            if end >= len(args) or args[end][:1] == "-":
                return None
            command = [package_command(args[end]), *args[end + 1:]]
            if options is None and self._match(command_name(command[0]), command[1:],
                                               specific_only=True) is None:
                return None
            return command
        return None


def module_of(args: list[str]) -> list[str] | None:
    """Return the module and its arguments of ``python [options] -m module …``, or None.

    The interpreter's own options may come first (``-u``, ``-B``, ``-X dev``, ``-W error``);
    any other word before ``-m`` (``-c``, a script) runs no module.
    """
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-m":
            return args[index + 1:] if index + 1 < len(args) else None
        if arg[:2] == "-m":
            return [arg[2:], *args[index + 1:]]  # python -mpytest
        if arg in PYTHON_VALUE_OPTIONS:
            index += 2
        elif arg[:2] in PYTHON_VALUE_OPTIONS or (
                len(arg) > 1 and arg[0] == "-" and all(c in PYTHON_FLAGS for c in arg[1:])):
            index += 1  # -Xdev, -Werror, -u, -OO, -Bu
        else:
            return None
    return None


def skip_options(args: list[str], index: int, options: RunnerOptions | None) -> int | None:
    """Return the index of the first word at or after ``index`` that is not an option.

    ``options`` are (options without a value, options with one); an option not among them gives
    None. ``--`` ends the options (its index is returned).
    """
    if options is None:
        return index
    flags, values = options
    while index < len(args):
        arg = args[index]
        if arg[:1] != "-" or arg in ("-", "--"):
            return index
        if arg in flags:
            index += 1
        elif arg in values:
            index += 2
        elif arg.partition("=")[0] in values and "=" in arg:
            index += 1
        else:
            return None
    return index


def package_command(word: str) -> str:
    """Return a runner's command word without its version (``prettier@3``, ``ruff==0.6``)."""
    for index, char in enumerate(word):
        if char in "=<>!~" and index:
            word = word[:index]
            break
    at = word.rfind("@")
    return word[:at] if at > 0 and "/" not in word[at:] else word
