"""The pytest plugin otel-loopguard installs (entry point ``pytest11``, name ``otel_loopguard``).

It registers one fixture, ``loopguard_harness``, and nothing else: no hooks, no options, no
span processor, no global tracer provider. Loading it imports only this module; the harness and
the OpenTelemetry SDK are imported when a test asks for the fixture. ``-p no:otel_loopguard``
turns it off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from otel_loopguard.testing import LoopGuardHarness

__all__ = ["loopguard_harness"]


@pytest.fixture(name="loopguard_harness")
def loopguard_harness() -> Iterator[LoopGuardHarness]:
    """Yield a fresh ``LoopGuardHarness`` (its own provider, exporter and fake clock)."""
    from otel_loopguard.testing import LoopGuardHarness

    harness = LoopGuardHarness()
    yield harness
    harness.shutdown()
