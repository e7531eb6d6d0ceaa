"""Durations in nanoseconds, from seconds that may be huge (``1e300`` in a config file)."""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_NS", "seconds_to_ns"]

MAX_NS: Final = 1 << 62
"""About 146 years: any longer duration means "never" in practice."""


def seconds_to_ns(seconds: float) -> int:
    """Return ``seconds`` in whole nanoseconds, at most ``MAX_NS`` (``1e300`` cannot overflow)."""
    ns = seconds * 1e9
    return int(ns) if ns < MAX_NS else MAX_NS
