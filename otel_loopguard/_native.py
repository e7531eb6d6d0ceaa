"""The optional C accelerators (built by ``hatch_build.py``), and the switch that turns them off.

Each is an extension module next to the Python code it speeds up, which stays the definition:
``signature/_accel`` (result and argument signatures) and ``otlp/_wire`` (OTLP protobuf trace
requests, and the span records of OTLP/JSON ones). A module that is not built is simply absent;
``OTEL_LOOPGUARD_PURE_PYTHON=1`` in the environment turns them all off.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(name: str) -> ModuleType | None:
    """Return the compiled module ``name``, or None when it is not built or turned off."""
    if os.environ.get("OTEL_LOOPGUARD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
