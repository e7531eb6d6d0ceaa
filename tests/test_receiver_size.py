"""``span_bytes``: the unit of ``serve``'s byte bounds, counted as ``_size`` documents it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from otel_loopguard.receiver._size import span_bytes
from otel_loopguard.types import STATUS_ERROR, SpanRecord

SPAN, VALUE = 160, 16
"""The fixed costs of one span and of one value (or key-value)."""


def _record(name: str = "tool", attributes: dict[str, Any] | None = None,
            **fields: Any) -> SpanRecord:
    return SpanRecord("0" * 32, "1" * 16, None, name, 0, 1, attributes or {}, **fields)


def test_texts_count_their_length_and_non_ascii_four_bytes_a_character() -> None:
    """Name, keys and string values count their length; a non-ASCII text 4 bytes a character."""
    assert span_bytes(_record("tool")) == SPAN + 4
    assert span_bytes(_record("tööl")) == SPAN + 16
    assert span_bytes(_record("t", {"key": "value"})) == SPAN + 1 + VALUE + 3 + 5
    assert span_bytes(_record("t", {"kéy": "välue"})) == SPAN + 1 + VALUE + 12 + 20


def test_scalars_arrays_and_maps_count_a_value_each() -> None:
    """A scalar is one value; arrays and maps add a value per item, nested as deep as they go."""
    attributes = {"n": 3, "f": 0.5, "b": True, "z": None, "l": ["a", 1], "m": {"x": "yy"},
                  "raw": b"abcd"}
    scalars = 4 * (VALUE + 1 + VALUE)
    array = VALUE + 1 + VALUE + (VALUE + 1) + (VALUE + VALUE)
    mapping = VALUE + 1 + VALUE + (VALUE + 1 + 2)
    raw = VALUE + 3 + 4
    assert span_bytes(_record("t", attributes)) == SPAN + 1 + scalars + array + mapping + raw


def test_status_message_and_events_count() -> None:
    """The status message and each event's name and attributes count too."""
    record = _record("t", status_code=STATUS_ERROR, status_message="fail",
                     events=(("exception", {"exception.type": "E"}),))
    event = VALUE + 9 + VALUE + 14 + 1
    assert span_bytes(record) == SPAN + 1 + 4 + event


def test_a_kept_sdk_span_doubles_the_count_and_adds_its_links() -> None:
    """The SDK span kept for forwarding repeats the record's values and adds its links."""
    record = _record("t", {"k": "v"})
    alone = span_bytes(record)
    links = [SimpleNamespace(attributes={"a": "bc"}), SimpleNamespace(attributes=None)]
    payload = SimpleNamespace(links=links)
    assert span_bytes(record, payload) == 2 * alone + (SPAN + VALUE + 1 + 2) + SPAN
    assert span_bytes(record, SimpleNamespace(links=None)) == 2 * alone
