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


def configure_logging(level: str, fmt: str) -> Callable[[], None]:
    """Send the ``otel_loopguard`` loggers' records at ``level`` or above to stderr.

    Returns:
        A function that puts the ``otel_loopguard`` logger back as it was.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(message)s"))
    logger = logging.getLogger("otel_loopguard")
    before = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # the application's root handlers would print it a second time

    def restore() -> None:
        logger.removeHandler(handler)
        logger.level, logger.propagate = before

    return restore
