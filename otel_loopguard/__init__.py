"""otel-loopguard: catch AI agents stuck in tool-call loops, from their OpenTelemetry spans."""

from __future__ import annotations

from typing import Any

from otel_loopguard.config import LoopGuardConfig, ToolOverride
from otel_loopguard.detectors import make_default_detectors
from otel_loopguard.enforce import LoopDetectedResult, ToolGuard
from otel_loopguard.engine import LoopEngine, RunState
from otel_loopguard.exceptions import ConfigError, LoopGuardError, ToolLoopError, TraceFileError
from otel_loopguard.metrics import LoopGuardMetrics, start_metrics_server
from otel_loopguard.policy import Policy
from otel_loopguard.processor import LoopGuardSpanProcessor, install
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.signature import tool_signature
from otel_loopguard.types import Action, Decision, Evidence, Handoff, SpanRecord, ToolCall

__all__ = [
    "Action",
    "Checker",
    "ConfigError",
    "Decision",
    "Evidence",
    "Handoff",
    "LoopDetectedResult",
    "LoopEngine",
    "LoopGuardConfig",
    "LoopGuardError",
    "LoopGuardMetrics",
    "LoopGuardSpanProcessor",
    "Policy",
    "RunReport",
    "RunState",
    "SpanRecord",
    "ToolCall",
    "ToolGuard",
    "ToolLoopError",
    "ToolOverride",
    "TraceFileError",
    "install",
    "make_default_detectors",
    "start_metrics_server",
    "tool_signature",
]


def __getattr__(name: str) -> Any:
    """Serve ``__version__`` lazily from the installed distribution's metadata."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("otel-loopguard")
        except PackageNotFoundError:  # running from a source tree that is not installed
            return "0.0.0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
