"""Inline Python scripts that write files: ``python3 - <<'PY' … Path(p).write_text(…) … PY``.

Coding agents (Codex CLI, mini-swe-agent and others) often edit a file with a short Python
script, fed on standard input through a heredoc or given with ``-c``, rather than with an edit
tool. Such a line changes a file as ``sed -i`` does: ``ShellReader`` reads it as a change
(``mutating``) whose target is the one file the script names, so that it ends a streak of
failed edits of that file and counts as a change of state between two reads. A script that
writes nothing (``print(…)``, a test) stays a program run.

Only what is clear counts: a call of ``.write_text``, ``.write_bytes``, or ``open`` with a
writing mode; the target is the one path literal given to ``Path(…)`` or ``open(…)`` (none
when the script names several, or builds its paths).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from otel_loopguard.kinds._lexer import _body_end as body_end
from otel_loopguard.kinds._lexer import path_like

__all__ = ["code_outcome", "script_writes", "stdin_scripts"]

_STDIN_HEREDOC: Final = re.compile(
    r"python[0-9.]*(?:[ \t]+-[A-Za-z]+)*(?:[ \t]+-)?[ \t]*<<-?"
    r"[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([\w.-]+))")
"""A Python interpreter reading its script from a heredoc on the same line (``python3 -
<<'PY'``, ``/usr/bin/python <<EOF``), with its delimiter; matched where ``python`` starts a word
or follows a ``/``."""
_OPEN_WRITE: Final = re.compile(
    r"""open\((?:[^()\n]*,\s*(?:mode\s*=\s*)?['"][rbt]*[wax+])""")
"""``open(f, "w")``, ``open(f, mode="a")``: ``open`` with a writing mode."""
_DOT_OPEN_WRITE: Final = re.compile(r"""open\(\s*['"][rbt]*[wax+]""")
"""``p.open("w")``: a path's ``open`` with a writing mode."""
_PATH_LITERAL: Final = re.compile(r"""(?:Path|open)\(\s*[rRuU]?(['"])([^'"\n]{1,1024})\1""")
"""A path literal given to ``Path(…)`` or ``open(…)``."""


def stdin_scripts(text: str) -> list[tuple[str, str | None] | None]:
    """Return the outcome of the script of each heredoc fed to a Python interpreter, in order.

    Each is ``code_outcome``'s: None for a script that writes no file.
    """
    found: list[tuple[str, str | None] | None] = []
    for start in _starts(text, "python", ".-"):
        match = _STDIN_HEREDOC.match(text, start)
        if match is None:
            continue
        line_end = text.find("\n", match.end())
        if line_end < 0:
            break
        delimiter = match.group(1) or match.group(2) or match.group(3) or ""
        found.append(code_outcome(text[line_end + 1:body_end(text, line_end + 1, delimiter)]))
    return found


def script_writes(text: str) -> bool:
    """Whether ``text`` holds a call that writes a file, as a script would make it."""
    if ".write_text(" in text or ".write_bytes(" in text:
        return True
    for start in _starts(text, "open("):
        if _OPEN_WRITE.match(text, start) or (
                text[start - 1:start] == "." and _DOT_OPEN_WRITE.match(text, start)):
            return True
    return False


def code_outcome(code: str) -> tuple[str, str | None] | None:
    """Return ``("mutating", target)`` when the Python ``code`` writes a file, else None."""
    if not script_writes(code):
        return None
    paths = {found.group(2) for word in ("Path(", "open(") for start in _starts(code, word)
             if (found := _PATH_LITERAL.match(code, start)) is not None}
    target = paths.pop() if len(paths) == 1 else None
    return "mutating", target if target is not None and path_like(target) else None


def _starts(text: str, word: str, after: str = "") -> Iterator[int]:
    """Yield where ``word`` starts a word in ``text``.

    At the start of ``text``, or after a character that is not a letter, digit or ``_``, nor
    one of ``after``. ``str.find`` from one to the next: a regular expression that must look
    behind its match would be tried at every position of a multi-KB heredoc (+56k
    instructions per coding agent's command line on average, against +5k so).
    """
    start = text.find(word)
    while start >= 0:
        before = text[start - 1:start]
        if not before or not (before.isalnum() or before == "_" or before in after):
            yield start
        start = text.find(word, start + 1)
