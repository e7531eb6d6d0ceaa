"""Zero-code install: an ``opentelemetry_post_instrument`` entry point.

``opentelemetry-instrument python app.py`` loads the SDK configurator (which sets the global
``TracerProvider`` and its exporters from ``OTEL_*`` variables), then the instrumentors, then
every ``opentelemetry_post_instrument`` entry point; ours adds a ``LoopGuardSpanProcessor``
configured by ``LOOPGUARD_*`` variables. The exporters are already registered at that point,
so evidence is written as ``loopguard.loop_detected`` events on the open agent span.
``LOOPGUARD_ENABLED=false`` turns it off.
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.environment_variables import LOOPGUARD_ENABLED

logger = logging.getLogger(__name__)

__all__ = ["post_instrument"]


def post_instrument() -> None:
    """Install loopguard on the global SDK tracer provider (called by opentelemetry-instrument)."""
    if os.environ.get(LOOPGUARD_ENABLED, "true").strip().lower() in ("false", "0", "no", "off"):
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        logger.warning("otel-loopguard: the global tracer provider is %s, not the SDK's; "
                       "loopguard was not installed", type(provider).__name__)
        return
    from otel_loopguard.processor import install

    install(tracer_provider=provider)
