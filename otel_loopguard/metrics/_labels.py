"""Label values kept printable, short and few: what a span may put into a metric label.

``clean_label`` escapes control and bidirectional characters and shortens a long value to its
start and a hash; ``LabelCap`` keeps at most so many distinct values of one label and counts
the others under ``other``. A missing value is ``unknown``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from otel_loopguard._fork import after_fork_in_child
from otel_loopguard._safe_text import escape_unsafe
from otel_loopguard.signature import digest

__all__ = ["MAX_LABEL_CHARS", "OTHER", "UNKNOWN", "LabelCap", "clean_label", "uncapped_label"]

UNKNOWN: Final = "unknown"
OTHER: Final = "other"
MAX_LABEL_CHARS: Final = 128
"""Longest label value kept as it is; longer ones keep their start and a short hash."""


def clean_label(value: str) -> str:
    r"""Return ``value`` as a label value every exposition format can write, at most 128 chars.

    Control and bidirectional characters, and lone surrogates, are escaped (``\x1b``,
    ``\u202e``): a span must not put a terminal escape or a reversed string into a label.
    """
    value = escape_unsafe(value)
    if len(value) > MAX_LABEL_CHARS:
        value = value[:MAX_LABEL_CHARS - 9] + "~" + digest(value)[:8]
    return value


def uncapped_label(value: str | None) -> str:
    """Return the label a value would have with no cap: cleaned, ``unknown`` when missing."""
    return clean_label(value) if value else UNKNOWN


class LabelCap:
    """Keeps at most ``limit`` distinct values of one label; the rest become ``other``.

    Thread-safe: the set only grows under a lock; lookups of known values take no lock.
    """

    def __init__(self, label: str, limit: int, on_overflow: Callable[[str], None]) -> None:
        """Cap ``label`` at ``limit`` values, calling ``on_overflow(label)`` when folding."""
        self.label, self.limit = label, limit
        self._known: frozenset[str] = frozenset({UNKNOWN, OTHER})
        self._lock = threading.Lock()
        after_fork_in_child(self._new_lock)
        self._on_overflow = on_overflow

    def _new_lock(self) -> None:
        """Give a forked child an unheld lock (see ``InternalErrorGuard._new_lock``)."""
        self._lock = threading.Lock()

    def __call__(self, value: str | None, *, uses: int = 1) -> str:
        """Return ``value`` if it fits under the cap, ``other`` when it does not.

        A value longer than ``MAX_LABEL_CHARS`` is shortened (its start and a short hash of
        the whole), and one that UTF-8 cannot encode (lone surrogates) has those characters
        replaced, so no span can make ``/metrics`` unrenderable or huge. ``uses``: how many
        increments the label is asked for at once; a folded value reports each to
        ``on_overflow``.
        """
        if not value:
            return UNKNOWN
        if value in self._known:
            return value
        value = clean_label(value)
        with self._lock:
            if value not in self._known and len(self._known) - 2 < self.limit:
                self._known = self._known | {value}
        if value in self._known:
            return value
        for _ in range(uses):
            self._on_overflow(self.label)
        return OTHER
