"""The optional C accelerator of the signatures (``_accel.c``), or None.

It computes the canonical forms of ``_text`` (plain-text results) and ``_form`` (parsed JSON
results and arguments) in one pass each, and gives the same findings as the Python definitions,
which stay the reference (``tests/test_accel.py``). It is built when the package is installed with
a C compiler and the Python headers at hand (``hatch_build.py``); without it, or with
``LOOPGUARD_PURE_PYTHON=1`` in the environment, the Python definitions run.
"""

from __future__ import annotations

from types import ModuleType
from typing import Final

from otel_loopguard._native import load

NATIVE: Final[ModuleType | None] = load("otel_loopguard.signature._accel")
"""The compiled module, when it is built and not turned off."""
