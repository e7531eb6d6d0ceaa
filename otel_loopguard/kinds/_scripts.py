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
from typing import Final

from otel_loopguard.kinds._lexer import _body_end as body_end

__all__ = ["code_outcome", "stdin_scripts"]

_STDIN_HEREDOC: Final = re.compile(
    r"(?:^|[\s;&|(])(?:[\w./-]*/)?python[0-9.]*(?:[ \t]+-[A-Za-z]+)*(?:[ \t]+-)?[ \t]*<<-?"
    r"[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([\w.-]+))")
"""A Python interpreter reading its script from a heredoc on the same line (``python3 -
<<'PY'``, ``python <<EOF``), with its delimiter."""
_WRITES: Final = re.compile(
    r"""\.write_(?:text|bytes)\(|\.open\(\s*['"][rbt]*[wax+]"""
    r"""|\bopen\([^()\n]*,\s*(?:mode\s*=\s*)?['"][rbt]*[wax+]""")
"""A call that writes a file: ``p.write_text(…)``, ``p.open("w")``, ``open(f, "a")``."""
_PATHS: Final = re.compile(r"""\b(?:Path|open)\(\s*[rRuU]?(['"])([^'"\n]{1,1024})\1""")
"""A path literal given to ``Path(…)`` or ``open(…)``."""
_PATH_LIKE: Final = re.compile(r"[^\s-]\S{0,1023}")


def stdin_scripts(text: str) -> list[tuple[str, str | None] | None]:
    """Return the outcome of the script of each heredoc fed to a Python interpreter, in order.

    Each is ``code_outcome``'s: None for a script that writes no file.
    """
    found: list[tuple[str, str | None] | None] = []
    for match in _STDIN_HEREDOC.finditer(text):
        line_end = text.find("\n", match.end())
        if line_end < 0:
            break
        delimiter = match.group(1) or match.group(2) or match.group(3) or ""
        found.append(code_outcome(text[line_end + 1:body_end(text, line_end + 1, delimiter)]))
    return found


def code_outcome(code: str) -> tuple[str, str | None] | None:
    """Return ``("mutating", target)`` when the Python ``code`` writes a file, else None."""
    if _WRITES.search(code) is None:
        return None
    paths = {found.group(2) for found in _PATHS.finditer(code)}
    target = paths.pop() if len(paths) == 1 else None
    if target is not None and (_PATH_LIKE.fullmatch(target) is None or target.isdigit()):
        target = None
    return "mutating", target
