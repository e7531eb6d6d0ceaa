"""The fast paths of ``serve`` agree exactly with the reference decoders and constructors."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otel_loopguard.otlp._fast import json_spans, make_record, proto_spans, slot_copier
from otel_loopguard.otlp._reference import spans_from_json_request, spans_from_proto_request
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

_TEXT = st.text(max_size=12)
_KEYS = st.sampled_from(["gen_ai.operation.name", "gen_ai.tool.name", "k", "", "x.y"])


def _outcome(decode: Any, request: ExportTraceServiceRequest) -> str:
    """Return the repr of the records (types and attribute order count), or the error."""
    try:
        return repr(list(decode(request)))
    except ValueError as exc:
        return f"ValueError: {exc}"


def _fill_value(target: AnyValue, kind: str, raw: Any, depth: int) -> None:
    if kind == "unset":
        return
    if kind in ("array_value", "kvlist_value"):
        if depth > 2:
            return
        for index, (sub_kind, sub_raw) in enumerate(raw):
            if kind == "array_value":
                _fill_value(target.array_value.values.add(), sub_kind, sub_raw, depth + 1)
            else:
                kv = target.kvlist_value.values.add(key=f"k{index % 2}")
                _fill_value(kv.value, sub_kind, sub_raw, depth + 1)
        return
    setattr(target, kind, raw)


_SCALARS = st.one_of(
    st.tuples(st.just("string_value"), _TEXT),
    st.tuples(st.just("bool_value"), st.booleans()),
    st.tuples(st.just("int_value"), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just("double_value"), st.floats(allow_nan=True)),
    st.tuples(st.just("bytes_value"), st.binary(max_size=4)),
    st.tuples(st.just("unset"), st.none()),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.tuples(st.sampled_from(["array_value", "kvlist_value"]),
                            st.lists(inner, max_size=3)),
    max_leaves=6,
)
_ATTRIBUTES = st.lists(st.tuples(_KEYS, _VALUES), max_size=5)
_ID_SIZES = st.sampled_from([16, 8, 0, 3])


def _add_span(draw: st.DrawFn, scope_spans: Any) -> None:
    span = scope_spans.spans.add()
    valid = draw(st.integers(0, 9)) > 0
    span.trace_id = draw(st.binary(min_size=16, max_size=16)) if valid \
        else bytes(draw(_ID_SIZES))
    span.span_id = draw(st.binary(min_size=8, max_size=8)) if valid \
        else bytes(draw(st.sampled_from([8, 0, 2])))
    parent = draw(st.sampled_from(["none", "zero", "random", "bad"]))
    if parent == "zero":
        span.parent_span_id = bytes(8)
    elif parent == "random":
        span.parent_span_id = draw(st.binary(min_size=8, max_size=8))
    elif parent == "bad" and not valid:
        span.parent_span_id = b"\x01\x02"
    span.name = draw(_TEXT)
    span.start_time_unix_nano = draw(st.integers(0, 2**64 - 1))
    span.end_time_unix_nano = draw(st.integers(0, 2**64 - 1))
    _add_attributes(draw, span.attributes)
    if draw(st.booleans()):
        span.status.code = draw(st.sampled_from([0, 1, 2, 7]))
        span.status.message = draw(_TEXT)
    for _ in range(draw(st.integers(0, 2))):
        _add_attributes(draw, span.events.add(name=draw(_TEXT)).attributes)


def _add_attributes(draw: st.DrawFn, target: Any) -> None:
    for key, (kind, raw) in draw(_ATTRIBUTES):
        _fill_value(target.add(key=key).value, kind, raw, 0)


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add()
        _add_attributes(draw, resource_spans.resource.attributes)
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add()
            if draw(st.booleans()):
                scope_spans.scope.name = draw(_TEXT)
            for _ in range(draw(st.integers(0, 3))):
                _add_span(draw, scope_spans)
    return request


class TestProtoSpans:
    """proto_spans equals list(spans_from_proto_request(...)), errors included."""

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_requests())
    def test_same_as_reference(self, request: ExportTraceServiceRequest) -> None:
        """Records (with value types and attribute order) or the error message are the same."""
        assert _outcome(proto_spans, request) == _outcome(spans_from_proto_request, request)
        parsed = ExportTraceServiceRequest.FromString(request.SerializeToString())
        assert _outcome(proto_spans, parsed) == _outcome(spans_from_proto_request, request)

    def test_repeated_key_keeps_first_position_and_last_value(self) -> None:
        """A key given twice keeps its first position and its last value, like a dict."""
        request = ExportTraceServiceRequest()
        span = request.resource_spans.add().scope_spans.add().spans.add(
            trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        span.attributes.add(key="a").value.string_value = "1"
        span.attributes.add(key="b").value.int_value = 2
        span.attributes.add(key="a").value.string_value = ""
        (record,) = proto_spans(request)
        assert list(record.attributes.items()) == [("a", ""), ("b", 2)]
        assert repr(record) == repr(next(spans_from_proto_request(request)))

    def test_resource_is_shared_by_the_spans_of_a_resource(self) -> None:
        """One resource dict per ResourceSpans, as the reference decoder does."""
        request = ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        for index in range(2):
            scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=bytes([index + 1]) * 8)
        first, second = proto_spans(request)
        assert first.resource is second.resource

    def test_bad_span_raises_reference_message(self) -> None:
        """A malformed span raises the reference decoder's ValueError, path included."""
        request = ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8,
                              parent_span_id=b"\x03")
        with pytest.raises(ValueError, match=r"spans\[1\]\.parent_span_id: expected 8 bytes"):
            proto_spans(request)


class TestConstruction:
    """make_record and slot_copier build the same objects as the dataclass machinery."""

    def test_make_record(self) -> None:
        """make_record(*fields) == SpanRecord(*fields), field by field."""
        fields = ("a" * 32, "b" * 16, None, "n", 1, 2, {"k": 1}, 2, "m", "s", {"r": 1},
                  (("e", {}),))
        made, built = make_record(*fields), SpanRecord(*fields)
        assert made == built and repr(made) == repr(built)
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.name = "x"  # type: ignore[misc]

    def test_slot_copier(self) -> None:
        """copy(obj, *values) == dataclasses.replace(obj, ...); other types fall back."""
        copy = slot_copier(ToolCall, "agent", "turn")
        call = ToolCall(tool="t", arguments={"a": 1}, result="r", has_result=True, span_id="s")
        copied = copy(call, "x", 3)
        assert repr(copied) == repr(dataclasses.replace(call, agent="x", turn=3))
        assert repr(copy(call, None, None)) == repr(call)
        assert copy(call, None, None) is not call
        with pytest.raises(dataclasses.FrozenInstanceError):
            copied.tool = "u"  # type: ignore[misc]

        @dataclasses.dataclass(frozen=True, slots=True)
        class Sub(ToolCall):
            extra: int = 0

        sub = Sub(tool="t", extra=5)
        assert copy(sub, "y", 1) == Sub(tool="t", extra=5, agent="y", turn=1)
        assert type(copy(sub, "y", 1)) is Sub
        copy_handoff = slot_copier(Handoff, "to_agent")
        assert copy_handoff(Handoff(from_agent="a", to_agent="b"), "c") == \
            Handoff(from_agent="a", to_agent="c")
        with pytest.raises(TypeError):
            slot_copier(Handoff, "nope")


# --- OTLP/JSON ---------------------------------------------------------------------------------
_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**70), st.floats(allow_nan=False), _TEXT,
    st.sampled_from(["0" * 16, "0" * 32, "AbCdEf0123456789", "0a" * 8 + "0b" * 8, "12",
                     "-3", "NaN", "STATUS_CODE_ERROR", "AQIDBAUGBwg=", " 0a" * 5 + "0"]),
)


def _json_strategy(odd: int) -> st.SearchStrategy[Any]:  # noqa: C901 - nested strategies
    """Return OTLP/JSON documents; one field in ``odd`` is odd (none when 0)."""

    def _mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        """Return ``valid``, or once in ``odd`` draws an odd JSON scalar (never when 0)."""
        if not odd:
            return valid
        return st.integers(0, odd - 1).flatmap(lambda n: valid if n else _JSON_SCALARS)


    _JSON_VALUE = st.one_of(
        st.none(),
        st.builds(lambda text: {"stringValue": text}, _TEXT),
        st.builds(lambda number: {"intValue": str(number)}, st.integers(0, 2**64)),
        st.builds(lambda number: {"intValue": number}, st.integers(-(2**63), 2**63)),
        st.builds(lambda number: {"doubleValue": number}, st.floats(allow_nan=False)),
        st.builds(lambda flag: {"boolValue": flag}, st.booleans()),
        _mostly(st.dictionaries(st.sampled_from(["stringValue", "boolValue", "intValue",
                                                 "doubleValue", "bytesValue", "arrayValue",
                                                 "kvlistValue", "string_value", "int_value",
                                                 "other"]),
                                _JSON_SCALARS, max_size=2)) if odd else st.none(),
    )
    _JSON_PAIR = _mostly(st.fixed_dictionaries({"key": _KEYS, "value": _JSON_VALUE},
                                               optional={"other": _JSON_SCALARS}))
    _JSON_ATTRIBUTES = _mostly(st.one_of(st.none(), st.lists(_JSON_PAIR, max_size=4)))
    _HEX32 = st.text("0123456789abcdefABCDEF", min_size=32, max_size=32)
    _HEX16 = st.text("0123456789abcdefABCDEF", min_size=16, max_size=16)
    _TIME = st.one_of(st.integers(0, 2**64).map(str), st.integers(0, 2**64))


    @st.composite
    def _json_spans(draw: st.DrawFn) -> Any:
        span: dict[str, Any] = {}
        snake = bool(odd) and draw(st.integers(0, 19)) == 0
        names = ("trace_id", "span_id", "parent_span_id", "start_time_unix_nano",
                 "end_time_unix_nano") if snake else (
            "traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano")
        span[names[0]] = draw(_mostly(_HEX32))
        span[names[1]] = draw(_mostly(_HEX16))
        if draw(st.booleans()):
            span[names[2]] = draw(_mostly(st.one_of(_HEX16, st.just("0" * 16), st.just(""))))
        for name in names[3:]:
            if draw(st.integers(0, 4)):
                span[name] = draw(_mostly(_TIME))
        if draw(st.booleans()):
            span["name"] = draw(_mostly(_TEXT))
        span["attributes"] = draw(_JSON_ATTRIBUTES)
        if draw(st.booleans()):
            span["status"] = draw(_mostly(st.fixed_dictionaries(
                {}, optional={"code": _mostly(st.integers(0, 3)), "message": _mostly(_TEXT)})))
        if draw(st.booleans()):
            span["events"] = draw(_mostly(st.lists(_mostly(st.fixed_dictionaries(
                {}, optional={"name": _mostly(_TEXT), "attributes": _JSON_ATTRIBUTES})),
                max_size=2)))
        return span


    @st.composite
    def _json_docs(draw: st.DrawFn) -> Any:
        resource_spans = []
        for _ in range(draw(st.integers(0, 2))):
            rs: dict[str, Any] = {}
            if draw(st.booleans()):
                rs["resource"] = draw(_mostly(st.fixed_dictionaries(
                    {"attributes": _JSON_ATTRIBUTES})))
            scopes = []
            for _ in range(draw(st.integers(0, 2))):
                ss: dict[str, Any] = {}
                scope_key = draw(st.sampled_from(["scope", "scope", "scope",
                                                  "instrumentationLibrary", None]))
                scope_key = scope_key if odd or scope_key is None else "scope"
                if scope_key:
                    ss[scope_key] = draw(_mostly(st.fixed_dictionaries(
                        {}, optional={"name": _mostly(_TEXT)})))
                ss["spans"] = draw(_mostly(st.lists(_mostly(_json_spans()), max_size=3)))
                scopes.append(draw(_mostly(st.just(ss))))
            key = draw(st.sampled_from(["scopeSpans"] * 8 + ["scope_spans",
                                                             "instrumentationLibrarySpans"]))
            key = key if odd else "scopeSpans"
            rs[key] = draw(_mostly(st.just(scopes)))
            resource_spans.append(draw(_mostly(st.just(rs))))
        top = draw(st.sampled_from(["resourceSpans"] * 9 + ["resource_spans"]))
        top = top if odd else "resourceSpans"
        return draw(_mostly(st.just({top: draw(_mostly(st.just(resource_spans)))})))

    return _json_docs()


_json_docs = _json_strategy(40)
_clean_json_docs = _json_strategy(0)


def _json_outcome(decode: Any, doc: Any) -> str:
    try:
        return repr(list(decode(doc)))
    except (ValueError, OverflowError) as exc:
        return f"{type(exc).__name__}: {exc}"


class TestJsonSpans:
    """json_spans equals list(spans_from_json_request(...)), errors included."""

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_json_docs)
    def test_same_as_reference(self, doc: Any) -> None:
        """Records (with value types and attribute order) or the error message are the same."""
        assert _json_outcome(json_spans, doc) == _json_outcome(spans_from_json_request, doc)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_clean_json_docs)
    def test_same_as_reference_well_formed(self, doc: Any) -> None:
        """Well-formed documents (the fast path's own ground) decode like the reference."""
        assert _json_outcome(json_spans, doc) == _json_outcome(spans_from_json_request, doc)

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_requests())
    def test_exporter_shaped_json(self, request: ExportTraceServiceRequest) -> None:
        """OTLP/JSON as exporters write it (hex ids) decodes like the reference, fast path."""
        doc = MessageToDict(request, use_integers_for_enums=True)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        assert _json_outcome(json_spans, doc) == _json_outcome(spans_from_json_request, doc)

    def test_zero_parent_is_root(self) -> None:
        """An all-zero parent span id means no parent, on the fast path too."""
        doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "AB" * 16, "spanId": "cd" * 8, "parentSpanId": "0" * 16}]}]}]}
        (record,) = json_spans(doc)
        assert record.parent_span_id is None and record.trace_id == "ab" * 16


# --- JSON parsing --------------------------------------------------------------------------------
_JSON_TREES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
              st.integers(), st.integers(-(2**66), 2**66), st.text(max_size=8),
              st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
              st.integers(0, 2**64).map(str)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=10,
)


class TestJsonLoads:
    """decode_json parses with orjson only where the stdlib would give the same result."""

    @settings(max_examples=300, deadline=None)
    @given(_JSON_TREES, st.sampled_from([", ", ","]))
    def test_same_as_stdlib(self, tree: Any, separator: str) -> None:
        """Values (exact integers included) and their types are the stdlib's."""
        from otel_loopguard.otlp._fast import loads_json as _loads

        body = json.dumps(tree, separators=(separator, ":")).encode()
        assert repr(_loads(body)) == repr(json.loads(body))

    @pytest.mark.parametrize("text", [
        b"NaN", b"[1e400]", b'"\\ud800"', b"\xef\xbb\xbf{}", b"-9223372036854775809",
        b"18446744073709551616", b" -18446744073709551616", b"[0.12345678901234567890123]",
        b'{"a": [18446744073709551616, 1]}', b'{"t": 1700000000000000000}'])
    def test_stdlib_decides_what_orjson_would_change(self, text: bytes) -> None:
        """Bodies orjson refuses or would round are decoded by the stdlib."""
        from otel_loopguard.otlp._fast import loads_json as _loads

        assert repr(_loads(text)) == repr(json.loads(text))

    def test_exact_integer_attribute(self) -> None:
        """An integer attribute past 64 bits stays an exact int, as with the stdlib."""
        from otel_loopguard.otlp._request import decode_json

        body = (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + b"ab" * 16
                + b'", "spanId": "' + b"cd" * 8 + b'", "attributes": [{"key": "n", "value": '
                b'{"intValue": -9223372036854775809}}]}]}]}]}')
        (record,) = decode_json(body).spans
        assert record.attributes == {"n": -9223372036854775809}
        assert type(record.attributes["n"]) is int
