"""Zero-code install: an ``opentelemetry_post_instrument`` entry point.

``opentelemetry-instrument python app.py`` loads the SDK configurator (which sets the global
``TracerProvider`` and its exporters from ``OTEL_*`` variables), then the instrumentors, then
every ``opentelemetry_post_instrument`` entry point; ours adds a ``LoopGuardSpanProcessor``
configured by ``LOOPGUARD_*`` variables. The exporters are already registered at that point,
so evidence is written as ``loopguard.loop_detected`` events on the open agent span (or, with
``LOOPGUARD_EVIDENCE=logs``, as log events to the ``LoggerProvider`` the SDK set up).
``LOOPGUARD_ENABLED=false`` turns it off.

It fails soft: the hook runs inside the application's start-up, after the rest of the
auto-configuration, so a bad ``LOOPGUARD_*`` value or a metrics port already in use is logged as
one line and never raised (which would make ``opentelemetry-instrument`` log a traceback and skip
any hook registered after this one). A bad setting leaves loopguard out; a busy metrics port
leaves detection running without ``/metrics``.
"""

from __future__ import annotations

import logging
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.config._fields import FieldRule, parse_env_value
from otel_loopguard.environment_variables import LOOPGUARD_ENABLED
from otel_loopguard.exceptions import ConfigError

logger = logging.getLogger(__name__)

__all__ = ["post_instrument"]

_ENABLED_RULE = FieldRule("bool", True, "whether opentelemetry-instrument installs loopguard")


def post_instrument() -> None:
    """Install loopguard on the global SDK tracer provider (called by opentelemetry-instrument).

    Never raises: every failure is one logged line, and the application starts either way.
    """
    try:
        _install()
    except ConfigError as exc:
        _say(logging.ERROR, f"otel-loopguard: not installed: {exc}")
    except Exception as exc:  # the app must start whatever goes wrong here
        _say(logging.ERROR, f"otel-loopguard: not installed: {type(exc).__name__}: {exc}")
        logger.debug("otel-loopguard: install failure", exc_info=True)


def _install() -> None:
    raw = os.environ.get(LOOPGUARD_ENABLED)
    if raw is not None and not parse_env_value(LOOPGUARD_ENABLED, _ENABLED_RULE, raw):
        return
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return  # the SDK is off: no spans to watch, and no /metrics that reads "no loops"
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        _say(logging.WARNING, f"otel-loopguard: the global tracer provider is "
                              f"{type(provider).__name__}, not the SDK's; loopguard was not "
                              "installed")
        return
    from otel_loopguard.processor import install

    config = LoopGuardConfig.load()
    try:
        install(config, tracer_provider=provider)
    except OSError as exc:  # install() adds the processor before it starts the metrics server
        _say(logging.ERROR, f"otel-loopguard: {exc.strerror or exc}; loop detection runs "
                            "without it")


def _say(level: int, message: str) -> None:
    """Log ``message``, and print it on stderr when no handler would show it there.

    Once the SDK's logging handler is on the root logger (``OTEL_PYTHON_LOGGING_AUTO_
    INSTRUMENTATION_ENABLED``), Python's last-resort output to stderr no longer runs, and with
    ``OTEL_LOGS_EXPORTER=none`` the line went nowhere: loopguard was silently absent.
    """
    logger.log(level, message)
    handlers = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += current.handlers
        current = current.parent if current.propagate else None
    if handlers and not any(isinstance(h, logging.StreamHandler)
                            and getattr(h, "stream", None) in (sys.stderr, sys.stdout)
                            for h in handlers):
        print(message, file=sys.stderr)
