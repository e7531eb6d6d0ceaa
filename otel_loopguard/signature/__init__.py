"""Canonical signatures of tool arguments and results.

A signature is a short digest of a canonical form: JSON strings parsed, mapping keys sorted,
strings trimmed with inner whitespace collapsed (no case folding), volatile result fields
stripped, and oversized values replaced by their hash. Only digests are kept, so memory per call
is bounded whatever the payload, and no input raises.

The package, by concern: ``_bounds`` (how far a value is read), ``_form`` (the canonical form,
its JSON text and digest), ``_args`` (a call's signature), ``_volatile`` (result keys to
ignore) and ``_results`` (a result's signature and the facts the detectors read from it);
``_text`` (the form of a plain-text result) and ``_native`` (the optional C accelerator of both
forms).
"""

from __future__ import annotations

from otel_loopguard.signature._args import (
    call_signature,
    canonical_args,
    normalize_args,
    tool_signature,
)
from otel_loopguard.signature._form import digest, normalize_value
from otel_loopguard.signature._results import ResultInfo, analyze_result
from otel_loopguard.signature._text import ACCELERATED
from otel_loopguard.signature._volatile import DEFAULT_VOLATILE_KEYS, VolatileMatcher

__all__ = [
    "ACCELERATED",
    "DEFAULT_VOLATILE_KEYS",
    "ResultInfo",
    "VolatileMatcher",
    "analyze_result",
    "call_signature",
    "canonical_args",
    "digest",
    "normalize_args",
    "normalize_value",
    "tool_signature",
]
