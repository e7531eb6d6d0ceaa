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
        logger.error("otel-loopguard: not installed: %s", exc)
    except Exception as exc:  # the app must start whatever goes wrong here
        logger.error("otel-loopguard: not installed: %s: %s", type(exc).__name__, exc)
        logger.debug("otel-loopguard: install failure", exc_info=True)


def _install() -> None:
    raw = os.environ.get(LOOPGUARD_ENABLED)
    if raw is not None and not parse_env_value(LOOPGUARD_ENABLED, _ENABLED_RULE, raw):
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        logger.warning("otel-loopguard: the global tracer provider is %s, not the SDK's; "
                       "loopguard was not installed", type(provider).__name__)
        return
    from otel_loopguard.processor import install

    config = LoopGuardConfig.load()
    try:
        install(config, tracer_provider=provider)
    except OSError as exc:  # install() adds the processor before it starts the metrics server
        logger.error("otel-loopguard: %s; loop detection runs without it", exc.strerror or exc)
