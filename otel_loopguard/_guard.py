"""Contain internal errors: log each kind once, count every one, never raise into the app."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger("otel_loopguard")

__all__ = ["InternalErrorGuard"]

_MAX_KINDS = 64


class InternalErrorGuard:
    """Counts and logs (once per kind) errors raised inside loopguard's hooks.

    Thread-safe. With ``raise_errors=True`` (tests) errors propagate instead.
    """

    def __init__(self, count: Callable[[str], None] | None = None, *,
                 raise_errors: bool = False) -> None:
        """Build the guard; ``count(kind)`` is called for every contained error.

        ``kind`` is ``<where>:<exception type>`` (``on_end:KeyError``); past 64 distinct kinds
        a new one is counted as ``<where>:other``, so a stream of odd exceptions cannot grow the
        metric's series without bound.
        """
        self._count = count
        self.raise_errors = raise_errors
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self.errors = 0

    def handle(self, where: str, exc: BaseException) -> None:
        """Record ``exc`` raised in ``where``; re-raise it when ``raise_errors`` is set."""
        kind = f"{where}:{type(exc).__name__}"
        with self._lock:
            self.errors += 1
            first = kind not in self._logged
            if first and len(self._logged) < _MAX_KINDS:
                self._logged.add(kind)
            counted = kind if kind in self._logged else f"{where}:other"
        if self._count is not None:
            with contextlib.suppress(Exception):  # counting must not fail the app either
                self._count(counted)
        if first:
            logger.exception("otel-loopguard: internal error in %s (logged once per kind; "
                             "counted in loopguard_internal_errors_total)", where, exc_info=exc)
        if self.raise_errors:
            raise exc
