"""How many bytes a received span holds: the unit of ``serve``'s byte bounds.

An estimate from the values a span carries (names, attribute keys and values, events, links),
counted as their encoded length (non-ASCII text at four bytes a character) plus a fixed cost
per span and per value. It is an upper bound of the span's OTLP protobuf size, so batches cut
by it fit under a downstream limit, and it grows with what the span holds in memory, so limits
set in it bound memory. Walks the same values the decoder built, once, with no copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_loopguard.otlp._proto import WIRE
from otel_loopguard.types import SpanRecord

__all__ = ["span_bytes", "spans_bytes"]

_SPAN_COST: Final = 160
"""Ids, times, kind, status, flags and the message framing of one span (about 70 encoded)."""
_VALUE_COST: Final = 16
"""Tags, lengths and the ``AnyValue`` wrapper of one value, or one attribute's key-value."""
_MAX_DEPTH: Final = 64
_SCALARS: Final = frozenset({bool, int, float, type(None)})


def span_bytes(record: SpanRecord, payload: Any = None) -> int:
    """Return the bytes ``record`` holds, plus those of its SDK span ``payload`` when kept.

    The SDK span repeats the record's values (the decoders build each separately) and adds
    its links; resources and scopes are shared by the spans of a request and not counted.
    Asked of every span ``serve`` receives: the span's own texts are counted inline.
    """
    name, message = record.name, record.status_message
    size = _SPAN_COST + (len(name) if name.isascii() else 4 * len(name)) \
        + _mapping(record.attributes, 0)
    if message:
        size += len(message) if message.isascii() else 4 * len(message)
    for event, attributes in record.events:
        size += _VALUE_COST + _text(event) + _mapping(attributes, 0)
    if payload is not None:
        size += size
        for link in getattr(payload, "links", None) or ():
            size += _SPAN_COST + _mapping(link.attributes or {}, 0)
    return size


def spans_bytes(records: Sequence[SpanRecord], payloads: Sequence[Any] | None) -> list[int]:
    """Return ``span_bytes`` of each record with its payload (``payloads`` None: none).

    The C decoder's ``span_sizes`` counts a batch of records without payloads at a tenth of the
    cost (``serve`` counts every span it buffers), and leaves records holding anything the
    decoders do not build to ``span_bytes``.
    """
    if payloads is None and WIRE is not None:
        sizes: list[int] | None = WIRE.span_sizes(records)
        if sizes is not None:
            return sizes
    if payloads is None:
        return [span_bytes(record) for record in records]
    return [span_bytes(record, payload) for record, payload in zip(records, payloads,
                                                                   strict=True)]


def _text(text: str) -> int:
    return len(text) if text.isascii() else 4 * len(text)


def _mapping(values: Mapping[str, Any], depth: int) -> int:
    size = _VALUE_COST * len(values)
    for key, value in values.items():  # strings and scalars inline: per span attribute
        size += len(key) if key.isascii() else 4 * len(key)
        kind = type(value)
        if kind is str:
            size += len(value) if value.isascii() else 4 * len(value)
        elif kind in _SCALARS:
            size += _VALUE_COST
        else:
            size += _value(value, depth)
    return size


def _value(value: Any, depth: int) -> int:
    if type(value) in _SCALARS:  # before any isinstance: an ABC check costs a microsecond
        return _VALUE_COST
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes | bytearray):
        return len(value)
    size = _VALUE_COST
    if depth >= _MAX_DEPTH:  # the decoders stop at 32; a mapping built elsewhere may not
        pass
    elif isinstance(value, dict | Mapping):
        size += _mapping(value, depth + 1)
    elif isinstance(value, list | tuple):
        size += sum(_VALUE_COST + _value(item, depth + 1) for item in value)
    return size
