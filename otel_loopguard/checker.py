"""Stable import path of :mod:`otel_loopguard.replay.checker` (``Checker``, ``RunReport``)."""

from __future__ import annotations

from otel_loopguard.replay.checker import Checker, RunReport, report_to_json

__all__ = ["Checker", "RunReport", "report_to_json"]
