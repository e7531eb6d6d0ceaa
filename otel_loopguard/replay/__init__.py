"""Replay of saved traces through the engine, for ``otel-loopguard check``.

``tracefile.iter_spans`` streams OTLP trace files (JSON Lines, JSON, protobuf; plain or gzip)
as ``SpanRecord``s; ``checker.Checker`` groups them into runs with the shared assembly and
reports each run. ``otel_loopguard.checker`` and ``otel_loopguard.tracefile`` stay importable.
"""

from __future__ import annotations

from otel_loopguard.replay.checker import Checker, RunReport, report_to_json
from otel_loopguard.replay.tracefile import iter_spans

__all__ = ["Checker", "RunReport", "iter_spans", "report_to_json"]
