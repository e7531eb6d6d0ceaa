"""``serve``'s log lines on stderr: text as written, or one JSON object a line."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Final

__all__ = ["LEVELS", "JsonFormatter", "configure_logging"]

LEVELS: Final = ("debug", "info", "warning", "error")
"""The values of ``--log-level``."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object.

    Keys: ``time`` (RFC 3339, UTC), ``level``, ``logger``, ``message``, and ``exception`` (the
    traceback) when there is one.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as one line of JSON (newlines in the message are escaped)."""
        moment = datetime.fromtimestamp(record.created, timezone.utc)
        line = {"time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "level": record.levelname.lower(), "logger": record.name,
                "message": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


_LOGGERS: Final = ("otel_loopguard", "opentelemetry")
"""The loggers ``serve``'s stderr carries: its own, and the OpenTelemetry SDK's (the exporter
that forwards spans logs its retries and failures there)."""


def configure_logging(level: str, fmt: str) -> Callable[[], None]:
    """Send the records of ``_LOGGERS`` at ``level`` or above to stderr, in ``fmt``.

    Returns:
        A function that puts those loggers back as they were.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(message)s"))
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    before = [(logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(level.upper())
        logger.propagate = False  # the application's root handlers would print it a second time

    def restore() -> None:
        for logger, (was_level, was_propagating) in zip(loggers, before, strict=True):
            logger.removeHandler(handler)
            logger.level, logger.propagate = was_level, was_propagating

    return restore
