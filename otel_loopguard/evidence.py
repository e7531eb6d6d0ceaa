"""The ``loopguard.*`` attributes that describe a decision, for spans, events and logs.

Built in one place for every path (the live processor, ``serve``'s forwarded spans, the
enforce-mode guard and the framework integrations). Never raw arguments or results.

``EvidenceLog`` emits findings as OpenTelemetry log events (``loopguard.loop_detected``)
through the Logs API: one record per finding, emitted with ``Logger.emit(event_name=...)`` (the
way the Logs API carries events; the separate Events API is gone from the SDK), correlated with
the span the finding is about (its trace id, span id and flags are that span's), with
``evidence_attributes`` as attributes and one short line as body.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Final

from opentelemetry import trace
from opentelemetry._logs import (
    Logger,
    LoggerProvider,
    SeverityNumber,
    get_logger,
    get_logger_provider,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext

from otel_loopguard.exceptions import ConfigError
from otel_loopguard.types import Decision

__all__ = ["EVENT_NAME", "LOGGER_NAME", "EvidenceLog", "evidence_attributes"]

logger = logging.getLogger("otel_loopguard")

EVENT_NAME: Final = "loopguard.loop_detected"
"""Name of the span event (and log event) that carries a finding."""


def evidence_attributes(decision: Decision, run_id: str, mode: str,
                        template: str | None = None) -> dict[str, Any]:
    """Return the ``loopguard.*`` attributes describing a decision (no raw payloads).

    ``template``, when given, is the ``prompt_template`` label the finding was counted under
    (``loopguard.prompt_template``), so a trace opened from a metric names the same template.
    """
    top = decision.evidence[0] if decision.evidence else None
    attrs: dict[str, Any] = {
        "loopguard.action": decision.action.label, "loopguard.code": decision.code,
        "loopguard.detector": decision.detector, "loopguard.run_id": run_id,
        "loopguard.hint": decision.hint, "loopguard.mode": mode,
        "loopguard.call_index": decision.call_index,
        "loopguard.escalated": decision.escalated,
        "loopguard.finding": "loop" if decision.loop else "budget",
    }
    if template is not None:
        attrs["loopguard.prompt_template"] = template
    if top is not None:
        attrs["loopguard.count"] = top.count
        repeats = top.details.get("repeats_span_ids")
        if repeats:
            attrs["loopguard.repeats_span_ids"] = [str(s) for s in repeats]
        for key in ("call", "result"):
            if key in top.details:
                attrs[f"loopguard.{key}_signature"] = str(top.details[key])
    return attrs


LOGGER_NAME: Final = "otel_loopguard"
"""Instrumentation scope of the log events."""


class EvidenceLog:
    """Emits one ``loopguard.loop_detected`` log event per finding.

    Thread-safe (the SDK logger is). Emitting costs nothing measurable until a finding.

    Args:
        logger_provider: where the events go; default the global one
            (``opentelemetry._logs.get_logger_provider()``), looked up at each emit until one
            is set, so a provider configured after loopguard still receives them.
    """

    def __init__(self, logger_provider: LoggerProvider | None = None) -> None:
        """Get the ``otel_loopguard`` logger from ``logger_provider`` (or the global one).

        Raises:
            ConfigError: when the installed OpenTelemetry API cannot emit events as log
                records (``Logger.emit`` without ``event_name``: before 1.37).
        """
        import otel_loopguard

        if not _emits_events():
            raise ConfigError("evidence = logs needs opentelemetry-api and opentelemetry-sdk "
                              "1.37 or newer (Logger.emit with event_name); upgrade them, or "
                              "set evidence = spans")

        self._explicit = logger_provider is not None
        self._provider = logger_provider
        self._logger = get_logger(LOGGER_NAME, otel_loopguard.__version__,
                                  logger_provider=logger_provider)
        self._warned = False

    def emit(self, decision: Decision, evidence: dict[str, Any], span_context: SpanContext | None,
             timestamp: int | None = None) -> None:
        """Emit the finding ``decision``, described by ``evidence``, about ``span_context``.

        Args:
            decision: a flagged decision.
            evidence: its ``evidence_attributes``.
            span_context: the span the finding is about (the tool call's, for a tool call).
            timestamp: when it happened, in nanoseconds (the span's end); default now.
        """
        if not self._warned:
            self._warn_if_unconfigured()
        # never the caller's current span: without a span context, an invalid one (no ids)
        span = trace.INVALID_SPAN if span_context is None else NonRecordingSpan(span_context)
        context = trace.set_span_in_context(span)
        self._logger.emit(
            timestamp=timestamp, context=context, severity_number=SeverityNumber.WARN,
            severity_text="WARN", event_name=EVENT_NAME, attributes=evidence,
            body=f"loop detected by {decision.detector}: {decision.action.label}")

    def _warn_if_unconfigured(self) -> None:
        """Say once when the events go nowhere: no LoggerProvider, or one without processors."""
        self._warned = True
        provider = self._provider if self._explicit else get_logger_provider()
        if not self._explicit and type(provider).__name__ == "ProxyLoggerProvider":
            logger.warning("otel-loopguard: evidence goes to log events, but no OpenTelemetry "
                           "LoggerProvider is configured (set one with "
                           "opentelemetry._logs.set_logger_provider); findings are only "
                           "counted in the metrics")
        elif _has_no_processor(provider):
            logger.warning("otel-loopguard: evidence goes to log events, but the OpenTelemetry "
                           "LoggerProvider has no log record processor, so they are not exported "
                           "(OTEL_LOGS_EXPORTER=none?); findings are only counted in the metrics")


def _has_no_processor(provider: Any) -> bool:
    """Return True for an SDK ``LoggerProvider`` that has no log record processor.

    Reads the SDK's private processor list defensively: False when it is not there.
    """
    multi = getattr(provider, "_multi_log_record_processor", None)
    processors = getattr(multi, "_log_record_processors", None)
    return isinstance(processors, tuple | list) and not processors


def _emits_events() -> bool:
    """Return True when the installed Logs API emits events (``Logger.emit(event_name=...)``)."""
    try:
        return "event_name" in inspect.signature(Logger.emit).parameters
    except (TypeError, ValueError):
        return False
