"""What the OTLP/JSON and protobuf decoders share: field errors, value ranges, the result.

Both decoders accept exactly what the OTLP protobuf schema can hold (ids of 16 and 8 bytes,
unsigned 64-bit times, signed 64-bit integers, values nested at most ``MAX_VALUE_DEPTH``
levels), so every span they accept can be written back as protobuf, e.g. when ``serve``
forwards it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final

from otel_loopguard.types import SpanRecord

__all__ = ["MAX_VALUE_DEPTH", "REMOTE_PARENT", "DecodedSpans", "FieldError", "TooDeep",
           "sdk_builders", "short"]

TRACE_ID_BYTES: Final = 16
SPAN_ID_BYTES: Final = 8
ZERO_SPAN_ID: Final = "0" * (2 * SPAN_ID_BYTES)
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
UINT32_MAX: Final = 2**32 - 1
MAX_VALUE_DEPTH: Final = 32
"""Arrays and maps nested in one attribute value. A protobuf parser refuses messages nested
more than 100 deep, which an attribute value of 47 levels reaches; 32 keeps every accepted span
readable downstream."""
REMOTE_PARENT: Final = 0x300
"""``Span.flags`` bits ``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`` (0x100) and
``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` (0x200): both set, the parent is known to be remote
(``SpanRecord.parent_is_remote``). ``_wire.c`` reads the same two bits."""
_MAX_REPR: Final = 40


class FieldError(ValueError):
    """A malformed OTLP field; ``str()`` gives ``path: problem``."""

    def __init__(self, path: str, problem: str) -> None:
        """Name the field (``path``, possibly empty) and what is wrong with it."""
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem

    def under(self, prefix: str) -> FieldError:
        """Return the same error with ``prefix`` prepended to its field path."""
        if not self.path:
            return FieldError(prefix, self.problem)
        sep = "" if self.path.startswith("[") else "."
        return FieldError(f"{prefix}{sep}{self.path}", self.problem)


class TooDeep(FieldError):
    """A value nested deeper than ``MAX_VALUE_DEPTH``.

    Named at its attribute, not level by level (a path through 32 arrays would fill the
    message).
    """

    def __init__(self) -> None:
        """Say how deep a value may go."""
        super().__init__("", f"nested deeper than {MAX_VALUE_DEPTH} levels")


@functools.cache
def sdk_builders() -> ModuleType:
    """Return ``otlp._sdk``, the SDK span builders, imported when a decoder first needs them.

    Only forwarding (``payloads=True``) builds SDK spans. ``check`` never does, and importing
    the OpenTelemetry SDK is most of its start-up. Cached: an import statement in a function
    costs ~2 µs a call, this ~0.05 µs, and the decoders ask once per forwarded span.
    """
    from otel_loopguard.otlp import _sdk

    return _sdk


def short(value: Any) -> str:
    """Return a repr of ``value`` cut to 40 characters, for error messages."""
    text = "null" if value is None else repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


@dataclass(slots=True)
class DecodedSpans:
    """The spans of one export request: the good ones, and how many were malformed."""

    spans: list[SpanRecord] = field(default_factory=list)
    rejected: int = 0
    """Malformed spans left out (each counted once)."""
    problem: str = ""
    """The first malformed span's problem, with its field path."""
    payloads: list[Any] | None = None
    """With ``payloads=True``: an SDK ``ReadableSpan`` per good span, for forwarding."""

    def take(self, spans: Iterable[Any], path: str,  # noqa: PLR0917
             record: Callable[[Any, Any, str], SpanRecord], resource: Any, scope: str,
             payload: Callable[[Any, SpanRecord, Any, Any], Any], sdk: tuple[Any, Any],
             done: Sequence[SpanRecord | None] | None = None) -> None:
        """Decode the spans of one scope: keep the good ones, count and name the others.

        ``record(span, resource, scope)`` builds a record; with payloads,
        ``payload(span, record, *sdk)`` the SDK span. A ``FieldError`` from either rejects
        that span alone. ``done``: records already built (no payloads), None for the spans
        still to build.
        """
        records, payloads = self.spans, self.payloads
        for index, span in enumerate(spans):
            if done is not None and (built := done[index]) is not None:
                records.append(built)
                continue
            try:
                decoded = record(span, resource, scope)
                if payloads is not None:
                    payloads.append(payload(span, decoded, *sdk))
            except FieldError as exc:
                self.reject(1, exc.under(f"{path}.spans[{index}]"))
                continue
            records.append(decoded)

    def reject(self, count: int, error: FieldError) -> None:
        """Count ``count`` malformed spans; keep the first problem."""
        self.rejected += count
        if not self.problem and count:
            self.problem = str(error)
