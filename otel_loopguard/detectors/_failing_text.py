"""Whether a successful call's result reads as a failure: the output of a check that failed.

``NO_EFFECT`` is for the agent whose changes do not touch the failure it reruns (the spec's "the
identical failure after each of 6 different edits"). A check that keeps *passing* with the same
output after each change (a type check that prints nothing, ``EXIT:0``) is verification, not a
loop; a result that cannot be read (a digest, a result not captured) says neither. So only a
result that reads as a failure keeps counting: an error or failure word not preceded by ``0`` or
``no`` (``FAILED test_total``, ``TypeError``, ``Traceback``, ``3 errors``), a non-zero exit code or
status, or a ``"passed": false``-style field. The engine asks only when such a result is about
to reach the ``NO_EFFECT`` threshold, so its cost is off the path of ordinary calls.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

__all__ = ["reads_as_failure"]

_MAX_CHARS: Final = 65_536
"""Longer results are read in their first and last 32K characters (where runners put it)."""
_FAILURE_RE: Final = re.compile(
    r"(?<![\w-])(?:(0|no|zero|without)\s+"
    r"(?:[\w.-]+(?:\s+[\w.-]+){0,2}\s+(?:or|and|nor)\s+|(?:[\w.-]+\s+){0,2}))?"
    r"(errors?|fail(?:s|ed|ure|ures|ing)?|traceback|exceptions?|panic(?:ked)?|fatal|"
    r"denied|refused|cannot|can't|could not|unable|\w+(?:error|exception))(?![\w-])"
    r"(?!\"?\s*:\s*(?:null|none|\[\s*\]|\{\s*\}|0\b|false|\"\"))",
    re.IGNORECASE)
"""A failure word, and the ``0`` or ``no`` that makes it a success (``0 errors``), also with up
to two words between them (``No lint errors found``, Cursor's passing lint check; ``Found 0
type errors``) or when it ends a short list the ``no`` opens (``No ESLint warnings or errors``,
next lint's passing line); not a key whose value is empty (``"error": null``, ``"errors": []``,
``errors: 0``)."""
_EXIT_RE: Final = re.compile(
    r"(?:exit(?:ed)?[ _]?(?:with )?(?:code|status)?|return[ _]?(?:code|status))"
    r"\W{0,3}(?![23]\d\d\b)-?[1-9]\d*",
    re.IGNORECASE)
"""A non-zero exit code (``exit code 2``, ``EXIT:1``, ``returncode=1``, ``exited with status
1``), not an HTTP success (``return code 200``) nor a ``return`` of something (``return 5``)."""
_FLAG_RE: Final = re.compile(r'"(?:passed|success|succeeded|ok)"\s*:\s*false', re.IGNORECASE)
"""A result object saying it did not pass (``{"passed": false, ...}``)."""


def reads_as_failure(result: Any) -> bool:
    """Return True when a successful call's result reads as the output of a failed check."""
    if result is None:
        return False
    if isinstance(result, str):
        text = result  # a span's result: a JSON object arrives as its text
    else:
        try:
            text = orjson.dumps(result, default=str).decode()
        except (TypeError, ValueError):
            text = str(result)
    if _FLAG_RE.search(text):
        return True
    if len(text) > _MAX_CHARS:
        text = text[:_MAX_CHARS // 2] + "\n" + text[-_MAX_CHARS // 2:]
    if _EXIT_RE.search(text):
        return True
    return any(match.group(1) is None for match in _FAILURE_RE.finditer(text))
