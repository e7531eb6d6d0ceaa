"""PowerShell command lines: what a Windows agent's ``Get-Content`` or ``Set-Content`` does.

Codex CLI on Windows runs its shell calls as ``["powershell.exe", "-Command", SCRIPT]``, and
the script reads and writes files with cmdlets (``Get-Content -Raw -Path a.md``, ``Set-Content
-Path $path -Value $text``), not with ``cat`` and ``>``. Read as a POSIX shell line, every such
call would be a program run: a ``Set-Content`` would change nothing the detectors see, and the
reads around it would look repeated. :func:`read_powershell` gives such a line the kind of its
strongest command, as ``ShellReader`` does for a POSIX line:

- cmdlets by their table (names compared in lower case, common aliases included): reads
  (``Get-Content``, ``Get-ChildItem``, ``Test-Path``, ``Select-String``, ``Write-Output``...),
  changes (``Set-Content``, ``Add-Content``, ``Out-File``, ``New-Item``, ``Remove-Item``,
  ``Copy-Item``, ``Move-Item``, ``Rename-Item``, ``[IO.File]::WriteAllText``...), a wait
  (``Start-Sleep``); any other cmdlet or function runs something (``default``);
- a program (``git status``, ``python x.py``) is read by the POSIX reader's table;
- ``$x = …`` assigns: the command is what follows the ``=``, and a plain string assigned to a
  variable names the file when the variable is given as a path (``$path = 'a.md'; Set-Content
  -Path $path``);
- the target of a cmdlet is its ``-Destination`` (a change), ``-Path``, ``-LiteralPath`` or
  ``-FilePath``, else its first positional argument.

A line is read as PowerShell when it comes from a ``powershell``/``pwsh`` argv, or when its
first command is a cmdlet written ``Verb-Noun`` with a capital (``Get-ChildItem``), an
assignment to a ``$variable``, ``if (…)``, ``foreach (…)`` or ``try {``: a POSIX line starts with
none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from otel_loopguard.kinds._lexer import path_like, segments
from otel_loopguard.kinds._shell import RANK
from otel_loopguard.kinds._shell import _outcome as line_outcome

__all__ = ["is_powershell", "powershell_script", "read_powershell"]

Outcome = tuple[str | None, str | None]

_READS: Final = frozenset({
    "get-content", "get-childitem", "get-item", "get-itemproperty", "test-path",
    "select-string", "select-object", "get-location", "resolve-path", "get-filehash",
    "measure-object", "sort-object", "where-object", "format-table", "format-list",
    "out-string", "out-null", "out-host", "write-output", "write-host", "write-warning",
    "write-information", "write-verbose", "write-error", "get-date", "get-command",
    "get-module", "get-help", "get-process", "get-service", "get-random", "join-path",
    "split-path", "convertto-json", "convertfrom-json", "get-variable", "get-member",
    "set-location", "push-location", "pop-location", "set-strictmode", "get-acl",
    "compare-object", "group-object", "get-unique"})
_CHANGES: Final = frozenset({
    "set-content", "add-content", "out-file", "new-item", "remove-item", "move-item",
    "copy-item", "rename-item", "clear-content", "set-itemproperty", "new-itemproperty",
    "remove-itemproperty", "expand-archive", "compress-archive", "tee-object",
    "install-module", "set-acl"})
_WAITS: Final = frozenset({"start-sleep", "wait-process", "wait-job"})
_ALIASES: Final = {
    "cat": "get-content", "gc": "get-content", "type": "get-content", "ls": "get-childitem",
    "dir": "get-childitem", "gci": "get-childitem", "rm": "remove-item", "del": "remove-item",
    "ri": "remove-item", "rmdir": "remove-item", "cp": "copy-item", "copy": "copy-item",
    "mv": "move-item", "move": "move-item", "ren": "rename-item", "echo": "write-output",
    "sls": "select-string", "ni": "new-item", "mkdir": "new-item", "sc": "set-content",
    "ac": "add-content", "pwd": "get-location", "cd": "set-location", "sleep": "start-sleep",
    "tee": "tee-object", "write": "write-output"}
_NET_WRITES: Final = re.compile(
    r"\[(?:System\.)?IO\.File\]::(?:WriteAll|AppendAll|Copy|Move|Delete|Create)", re.IGNORECASE)
"""A .NET call that writes a file: ``[IO.File]::WriteAllText($p, $s)``."""
_NET_READS: Final = re.compile(r"\[(?:System\.)?IO\.(?:File|Path|Directory)\]::", re.IGNORECASE)
_PATH_OPTIONS: Final = ("-path", "-literalpath", "-filepath")
_SWITCHES: Final = frozenset({
    "-raw", "-force", "-recurse", "-nonewline", "-append", "-passthru", "-whatif",
    "-confirm", "-file", "-directory", "-hidden", "-quiet", "-simplematch", "-casesensitive",
    "-noclobber", "-erroraction", "-name", "-leaf", "-parent", "-resolve"})
"""Options that take no value (so the word after one can be a positional path); ``-Name``
and the like also read as switches, which at worst names a value as the target."""
_KEYWORDS: Final = frozenset({"if", "elseif", "else", "foreach", "for", "while", "do", "until",
                             "try", "catch", "finally", "switch", "return", "throw", "param",
                             "function", "begin", "process", "end", "trap"})
"""Words before a statement's command (``if``, ``try``) or that run none (``function f``)."""
_CMDLET: Final = re.compile(r"[A-Z][a-z]+-[A-Z][A-Za-z]+")
_STARTS_AS_POWERSHELL: Final = re.compile(
    r"\s*(?:\$[A-Za-z_][\w:]*\s*=|[A-Z][a-z]+-[A-Z][A-Za-z]+(?:\s|$)"
    r"|(?:if|foreach|while|switch)\s*\(|try\s*\{)")
_POWERSHELLS: Final = frozenset({"powershell", "pwsh", "powershell.exe", "pwsh.exe"})


def powershell_script(argv: list[str] | tuple[str, ...]) -> str | None:
    """Return the script of ``["powershell.exe", ..., "-Command", SCRIPT]``, or None.

    None when ``argv`` does not run PowerShell, or runs a script file (``-File``).
    """
    if not argv or argv[0].replace("\\", "/").rsplit("/", 1)[-1].lower() not in _POWERSHELLS:
        return None
    for index, arg in enumerate(argv[1:], 1):
        option = arg.lower()
        if option in ("-command", "-c", "/command", "/c"):
            return " ".join(argv[index + 1:]) if index + 1 < len(argv) else ""
        if option in ("-file", "-f", "/file"):
            return None
        if not option.startswith(("-", "/")):
            return " ".join(argv[index:])  # powershell.exe Get-ChildItem: the command itself
    return ""


def is_powershell(text: str) -> bool:
    """Whether a command line reads as PowerShell: it starts with a cmdlet or an assignment."""
    return _STARTS_AS_POWERSHELL.match(text) is not None


def read_powershell(text: str, program: Callable[[list[str]], Outcome]) -> Outcome:
    """Return the (kind, target) of a PowerShell line.

    ``program`` reads a native program's words (``git status``), as the POSIX reader does.
    """
    variables: dict[str, str] = {}
    best: Outcome = (None, None)
    best_rank = -1
    waits = False
    for segment, writes in segments(text):
        words = _statement(segment, variables)
        if not writes and not words:
            continue
        kind, target = ("mutating", writes[0]) if writes else _command(words, variables, program)
        if kind is None or kind == "exempt":
            waits = waits or kind == "exempt"
            continue
        rank = RANK.get(kind, 3)
        if rank > best_rank:
            best, best_rank = (kind, target), rank
        elif kind == best[0] and best[1] is None and target is not None:
            best = (kind, target)
    return line_outcome(best[0], best_rank, best[1], waits)  # as a POSIX line combines


def _statement(words: list[str], variables: dict[str, str]) -> list[str]:
    """Return the words of a statement's command: braces, keywords and ``$x =`` left out.

    A plain string assigned to a variable is noted in ``variables``.
    """
    words = [word for word in words if word not in ("{", "}")]
    while words and words[0].lower() in _KEYWORDS:  # if … { Remove-Item x }: its command
        words = words[1:]
    if len(words) >= 2 and words[0][:1] == "$" and words[1] == "=":
        if len(words) == 3:
            variables[words[0].lower()] = words[2]
        words = words[2:]
    return words


def _command(words: list[str], variables: dict[str, str],
             program: Callable[[list[str]], Outcome]) -> Outcome:
    first = words[0]
    if first[:1] in ("$", "(", "[", "@", "'", '"') or first[:1].isdigit():
        line = " ".join(words)
        if _NET_WRITES.search(line):
            return "mutating", None
        return "read", None  # an expression: a value computed, nothing run
    name = first.lower()
    name = _ALIASES.get(name, name)
    if name in _CHANGES or name in _READS:
        kind = "mutating" if name in _CHANGES else "read"
        return kind, _target(words[1:], variables, kind == "mutating")
    if name in _WAITS:
        return "exempt", None
    if _CMDLET.fullmatch(first):
        return "default", None  # another cmdlet, or a function of the script's
    return program(words)


def _target(args: list[str], variables: dict[str, str], change: bool) -> str | None:
    """Return the file a cmdlet's arguments name.

    ``-Destination`` of a change, ``-Path``, ``-LiteralPath`` or ``-FilePath``, else the first
    positional argument.
    """
    named: dict[str, str] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        option = arg.lower()
        if option.startswith("-") and len(option) > 1:
            if option not in _SWITCHES and index + 1 < len(args):
                named.setdefault(option.split(":", 1)[0], args[index + 1])
                index += 1
        else:
            positional.append(arg)
        index += 1
    keys = ("-destination", *_PATH_OPTIONS) if change else _PATH_OPTIONS
    found = next((named[key] for key in keys if key in named), None)
    if found is None and positional:
        found = positional[0]
    if found is not None and found[:1] == "$":
        found = variables.get(found.lower())
    return found if found is not None and path_like(found) else None
