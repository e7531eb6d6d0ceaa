"""otel-loopguard: catch AI agents stuck in tool-call loops, from their OpenTelemetry spans."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_loopguard.config import LoopGuardConfig, ModelPrice, ToolOverride
    from otel_loopguard.detectors import make_default_detectors
    from otel_loopguard.enforce import LoopDetectedResult, ToolGuard
    from otel_loopguard.engine import LoopEngine, RunState
    from otel_loopguard.exceptions import (
        ConfigError,
        LoopGuardError,
        ToolLoopError,
        TraceFileError,
    )
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
    "ModelPrice",
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


_SOURCES: Final = {
    "otel_loopguard.replay.checker": ("Checker", "RunReport"),
    "otel_loopguard.config": ("LoopGuardConfig", "ModelPrice", "ToolOverride"),
    "otel_loopguard.detectors": ("make_default_detectors",),
    "otel_loopguard.enforce": ("LoopDetectedResult", "ToolGuard"),
    "otel_loopguard.engine": ("LoopEngine", "RunState"),
    "otel_loopguard.exceptions": ("ConfigError", "LoopGuardError", "ToolLoopError",
                                  "TraceFileError"),
    "otel_loopguard.metrics": ("LoopGuardMetrics", "start_metrics_server"),
    "otel_loopguard.policy": ("Policy",),
    "otel_loopguard.processor": ("LoopGuardSpanProcessor", "install"),
    "otel_loopguard.signature": ("tool_signature",),
    "otel_loopguard.types": ("Action", "Decision", "Evidence", "Handoff", "SpanRecord",
                             "ToolCall"),
}
"""Where each public name lives. Importing the package imports none of them: the pytest plugin,
the ``opentelemetry-instrument`` hook and the command line load only what they use."""
_MODULE_OF: Final = {name: module for module, names in _SOURCES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a public name on first use; serve ``__version__`` from the installed metadata."""
    module = _MODULE_OF.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups no longer reach this function
        return value
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("otel-loopguard")
        except PackageNotFoundError:  # running from a source tree that is not installed
            return "0.0.0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the public names too, before their first use has imported them."""
    return sorted({*globals(), *__all__})
