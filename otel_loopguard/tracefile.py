"""Stable import path of :mod:`otel_loopguard.replay.tracefile` (``iter_spans``)."""

from __future__ import annotations

from otel_loopguard.replay.tracefile import iter_spans

__all__ = ["iter_spans"]
