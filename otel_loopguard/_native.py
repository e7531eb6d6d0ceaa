"""The optional C accelerators (built by ``hatch_build.py``), and the switch that turns them off.

Each is an extension module next to the Python code it speeds up, which stays the definition:
``signature/_accel`` (result and argument signatures), ``otlp/_wire`` (OTLP protobuf trace
requests, and the span records of OTLP/JSON ones), ``_span_end`` (the live processor's work
in ``span.end()`` of a span: how it reads it, and a blank model span kept aside) and
``kinds/_reader`` (what a shell command line reads, changes or runs). A module that
is not built is simply absent; ``LOOPGUARD_PURE_PYTHON=1`` in the environment turns them all off
(``OTEL_LOOPGUARD_PURE_PYTHON``, the older spelling, too).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

PURE_PYTHON_VARIABLES: Final = ("LOOPGUARD_PURE_PYTHON", "OTEL_LOOPGUARD_PURE_PYTHON")
"""The switch, and its older spelling (``hatch_build.py`` reads the same two)."""


def pure_python() -> bool:
    """Return whether the environment turns the accelerators off (any value but ``0``)."""
    return any(os.environ.get(name, "") not in ("", "0") for name in PURE_PYTHON_VARIABLES)


def load(name: str) -> ModuleType | None:
    """Return the compiled module ``name``, or None when it is not built or turned off."""
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
