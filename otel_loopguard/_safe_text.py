r"""Text from spans made safe for a terminal, a log line or a metric label: one rule, one place.

A span's names and attributes come from whoever sends them. Written raw, an ESC starts a
terminal escape sequence, a newline forges a log line, and a bidirectional override (U+202E)
makes a label read differently from what it is. ``escape_unsafe`` writes such characters as
``\x1b`` or ``\u202e`` (visible, reversible by eye) and leaves all other text alone.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE", "escape_unsafe"]

UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff"
    "\U000e0000-\U000e007f]")
"""C0 and C1 controls (newlines and ESC included), bidirectional marks and overrides, line and
paragraph separators, BOM, interlinear annotations, non-characters and lone surrogates, and the
invisible ones (zero-width spaces and joiners, word joiner, soft hyphen, tag characters), which
make two different values read the same."""


def escape_unsafe(text: str) -> str:
    r"""Return ``text`` with every character of ``UNSAFE`` escaped.

    ``"a\nb"`` becomes ``a\x0ab`` and ``"\x1b[31m"`` becomes ``\x1b[31m`` (literally); printable
    text, non-ASCII letters included, is returned as it is (the same object).
    """
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
