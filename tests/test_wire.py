"""The C decoder of OTLP protobuf trace requests gives exactly the Python path's records.

The Python path (protobuf's parser, then ``decode_proto_spans``) is the definition. For every
body the C decoder either answers None (the Python path then decodes it) or the very records
the Python path gives: same reprs (so the same value types and attribute order) and the same
sharing of resource dicts. It must answer for the well-formed requests exporters send, and never
crash or leak on any bytes. The decoder is built from its source here when the installed package
lacks it; the tests skip only when this machine cannot compile it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _compiled import memory_grown
from _otlp_files import proto_message, scripted_spans
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from test_tracefile import make_requests

import otel_loopguard.otlp._proto as proto_module
from otel_loopguard.otlp._proto import decode_proto_spans
from otel_loopguard.otlp._request import Decoded, RequestError, decode_protobuf
from otel_loopguard.otlp._spans import MAX_VALUE_DEPTH, DecodedSpans
from otel_loopguard.receiver._size import span_bytes, spans_bytes
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.testing import AgentScript
from otel_loopguard.types import SpanRecord

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "recorded"
_SETTINGS = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _python(body: bytes) -> DecodedSpans | None:
    """The Python path's spans of ``body``, None when protobuf refuses it."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError, RecursionError):
        return None
    return decode_proto_spans(request)


def _shape(spans: list[SpanRecord]) -> list[tuple[str, int]]:
    """Each record's repr, and which resource dict it holds (numbered by first use)."""
    numbers: dict[int, int] = {}
    return [(repr(span), numbers.setdefault(id(span.resource), len(numbers))) for span in spans]


def _agree(wire: ModuleType, body: bytes) -> bool:
    """Check the C decoder against the Python path on ``body``; True when C decoded it."""
    native = wire.decode_spans(body, SpanRecord)
    if native is None:
        return False
    expected = _python(body)
    assert expected is not None, "the C decoder accepted bytes protobuf refuses"
    assert expected.rejected == 0, expected.problem
    assert _shape(native) == _shape(expected.spans)
    assert wire.span_sizes(native) == [span_bytes(span) for span in native]
    return True


# --- corpora ---------------------------------------------------------------------------------
def _bench_bodies() -> list[bytes]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_serve
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return list(bench_serve.encode_batches(bench_serve.make_traces(12, seed=3)))


def _b64_ids(node: Any) -> Any:
    """OTLP/JSON's hex ids as the base64 protobuf's JSON mapping reads."""
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _b64_ids(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_b64_ids(v) for v in node]
    return node


def _recorded_bodies() -> Iterator[tuple[str, bytes]]:
    """Every line of the recorded framework traces, as a protobuf request."""
    for path in sorted(RECORDED.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            request = ExportTraceServiceRequest()
            json_format.ParseDict(_b64_ids(json.loads(line)), request,
                                  ignore_unknown_fields=True)
            yield f"{path.name}:{number + 1}", request.SerializeToString()


def _looping(agent: AgentScript) -> None:
    agent.tool("fetch", {"id": 7}, error="boom")
    for _ in range(6):
        agent.turn()
        agent.tool("search", {"q": "x", "page": 2}, {"hits": [], "n": 0})


class TestCorpora:
    def test_bench_serve_requests(self, wire: ModuleType) -> None:
        """bench_serve's 512-span requests: all decoded in C, record for record."""
        bodies = _bench_bodies()
        assert bodies and all(_agree(wire, body) for body in bodies)

    def test_recorded_framework_traces(self, wire: ModuleType) -> None:
        """The recorded traces of 14 agent frameworks (events, errors, every value kind)."""
        bodies = list(_recorded_bodies())
        assert len(bodies) >= 14
        assert [name for name, body in bodies if not _agree(wire, body)] == []

    def test_sdk_exports(self, wire: ModuleType) -> None:
        """What the SDK's OTLP encoder writes: scripted loops and the tracefile tests' traces."""
        bodies = [proto_message(scripted_spans(({}, _looping), ({"prompt": "t"}, _looping))),
                  *(request.SerializeToString() for request in make_requests(3, attribute="é"))]
        assert all(_agree(wire, body) for body in bodies)

    def test_other_record_classes_are_called(self, wire: ModuleType) -> None:
        """SpanRecord's instances are filled directly; any other class is called with the
        fields (a __post_init__ runs)."""
        body = _bench_bodies()[0]
        records = wire.decode_spans(body, SpanRecord)
        fields = [field.name for field in dataclasses.fields(SpanRecord)]
        assert wire.decode_spans(body, lambda *values: values) == [
            tuple(getattr(record, name) for name in fields) for record in records]

        @dataclasses.dataclass(slots=True)
        class Shouting(SpanRecord):
            def __post_init__(self) -> None:
                self.name = self.name.upper()

        @dataclasses.dataclass(slots=True)
        class Renamed:  # SpanRecord's first 8 fields, then a name that moves every slot
            trace_id: Any
            span_id: Any
            parent_span_id: Any
            name: Any
            start_time_ns: Any
            end_time_ns: Any
            attributes: Any
            status_code: Any
            a_message: Any
            scope_name: Any
            resource: Any
            events: Any
            parent_is_remote: Any

        assert [record.name for record in wire.decode_spans(body, Shouting)] == [
            record.name.upper() for record in records]
        assert [record.a_message for record in wire.decode_spans(body, Renamed)] == [
            record.status_message for record in records]
        assert repr(wire.decode_spans(body, SpanRecord)) == repr(records)

    def test_empty_request(self, wire: ModuleType) -> None:
        assert wire.decode_spans(b"", SpanRecord) == []
        assert _agree(wire, ExportTraceServiceRequest(resource_spans=[{}]).SerializeToString())


# --- random requests ---------------------------------------------------------------------------
_TEXT = st.text(max_size=16)
_KEYS = st.one_of(st.sampled_from(["", "k", "gen_ai.tool.name", "é", "k2"]), st.text(max_size=4))
_SCALARS = st.one_of(
    st.tuples(st.just("string_value"), _TEXT),
    st.tuples(st.just("bool_value"), st.booleans()),
    st.tuples(st.just("int_value"), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just("double_value"), st.floats()),
    st.tuples(st.just("bytes_value"), st.binary(max_size=9)),
    st.tuples(st.just("unset"), st.none()),
)
_DEEP = st.tuples(st.sampled_from(["deep_array", "deep_kvlist"]),
                  st.sampled_from([3, 19, MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH, 40]))
"""A value nested around the limits (MAX_VALUE_DEPTH, protobuf's 100 messages); rare."""
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.tuples(st.sampled_from(["array_value", "kvlist_value"]),
                            st.lists(st.tuples(_KEYS, inner), max_size=4)),
    max_leaves=10,
)
_ATTRIBUTES = st.lists(st.tuples(_KEYS, _VALUES), max_size=6)


def _fill(target: AnyValue, kind: str, raw: Any) -> None:
    if kind == "unset":
        return
    if kind in ("array_value", "kvlist_value"):
        getattr(target, kind).SetInParent()  # an empty array or map is still one
        for key, (sub_kind, sub_raw) in raw:
            if kind == "array_value":
                _fill(target.array_value.values.add(), sub_kind, sub_raw)
            else:
                _fill(target.kvlist_value.values.add(key=key).value, sub_kind, sub_raw)
        return
    if kind.startswith("deep_"):
        for _ in range(raw):
            target = target.array_value.values.add() if kind == "deep_array" \
                else target.kvlist_value.values.add(key="d").value
        target.string_value = "bottom"
        return
    setattr(target, kind, raw)


def _attributes(draw: st.DrawFn, target: Any) -> None:
    for key, value in draw(_ATTRIBUTES):
        _fill(target.add(key=key).value, *(draw(_DEEP) if draw(st.integers(0, 80)) == 0
                                             else value))


def _span(draw: st.DrawFn, spans: Any) -> None:
    span = spans.add()
    good = draw(st.integers(0, 60)) > 0
    span.trace_id = draw(st.binary(min_size=16, max_size=16)) if good else bytes(
        draw(st.sampled_from([0, 15, 17])))
    span.span_id = draw(st.binary(min_size=8, max_size=8)) if good else bytes(
        draw(st.sampled_from([0, 7])))
    parent = draw(st.sampled_from(["none", "zero", "random", "bad"]))
    if parent in ("zero", "random"):
        span.parent_span_id = bytes(8) if parent == "zero" \
            else draw(st.binary(min_size=8, max_size=8))
    elif parent == "bad" and draw(st.integers(0, 9)) == 0:
        span.parent_span_id = b"\x01\x02"
    span.name = draw(_TEXT)
    span.kind = draw(st.integers(0, 5))
    span.flags = draw(st.sampled_from([0, 0x100, 0x200, 0x300, 0x301]))
    span.trace_state = draw(st.sampled_from(["", "a=b", "é=ü"]))
    span.start_time_unix_nano = draw(st.integers(0, 2**64 - 1))
    span.end_time_unix_nano = draw(st.integers(0, 2**64 - 1))
    _attributes(draw, span.attributes)
    span.dropped_attributes_count = draw(st.sampled_from([0, 3]))
    if draw(st.booleans()):
        span.status.code = draw(st.sampled_from([0, 1, 2, 7, -1]))
        span.status.message = draw(_TEXT)
    for _ in range(draw(st.integers(0, 3))):
        event = span.events.add(name=draw(_TEXT), time_unix_nano=draw(st.integers(0, 2**64 - 1)))
        _attributes(draw, event.attributes)
    for _ in range(draw(st.integers(0, 2))):
        good = draw(st.integers(0, 60)) > 0
        link = span.links.add(trace_id=bytes(16 if good else draw(st.sampled_from([0, 15]))),
                              span_id=bytes(8 if good else 9),
                              trace_state=draw(st.sampled_from(["", "a=b"])),
                              flags=draw(st.sampled_from([0, 0x100])))
        _attributes(draw, link.attributes)


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        resource_spans = request.resource_spans.add(schema_url=draw(st.sampled_from(["", "s"])))
        if draw(st.booleans()):
            _attributes(draw, resource_spans.resource.attributes)
        for _ in range(draw(st.integers(0, 3))):
            scope_spans = resource_spans.scope_spans.add()
            if draw(st.booleans()):
                scope_spans.scope.name = draw(_TEXT)
                scope_spans.scope.version = draw(_TEXT)
                _attributes(draw, scope_spans.scope.attributes)
            for _ in range(draw(st.integers(0, 3))):
                _span(draw, scope_spans.spans)
    return request


def _unusual(request: ExportTraceServiceRequest) -> bool:
    """True when a value nests 19 levels or more (the C decoder leaves those to Python)."""
    def depth(value: AnyValue) -> int:
        kind = value.WhichOneof("value")
        if kind == "array_value":
            return 1 + max((depth(v) for v in value.array_value.values), default=0)
        if kind == "kvlist_value":
            return 1 + max((depth(kv.value) for kv in value.kvlist_value.values), default=0)
        return 0

    def deep(pairs: Any) -> bool:
        return any(depth(kv.value) >= 19 for kv in pairs)

    return any(deep(rs.resource.attributes) or any(
        deep(ss.scope.attributes) or any(
            deep(span.attributes) or any(deep(e.attributes) for e in span.events)
            or any(deep(link.attributes) for link in span.links) for span in ss.spans)
        for ss in rs.scope_spans) for rs in request.resource_spans)


def _record(attributes: Any, **fields: Any) -> SpanRecord:
    return SpanRecord("a" * 32, "b" * 16, None, fields.pop("name", "span"), 1, 2, attributes,
                      **fields)


class _Text(str):
    __slots__ = ()


class TestSpanSizes:
    """``span_sizes`` (C) counts what ``span_bytes`` (Python, the definition) counts."""

    def test_every_value_kind(self, wire: ModuleType) -> None:
        nested: dict[str, Any] = {}
        inner = nested
        for _ in range(70):  # past _size's depth limit
            inner["n"] = inner = {}
        records = [
            _record({"k": {"x": [1, 2.5, None, True, "\u00e9", b"ab", (1, [2])]}, "\u00fc": "x",
                     "deep": nested, "empty": {}}, name="n\u00e9",
                    status_message="failed \u00e9",
                    events=(("exception", {"exception.message": "boom"}), ("e", {}))),
            _record({}, name=""),
        ]
        assert wire.span_sizes(records) == [span_bytes(record) for record in records]
        assert spans_bytes(records, None) == [span_bytes(record) for record in records]

    @pytest.mark.parametrize("attributes", [
        {"x": _Text("a")}, {"x": bytearray(b"ab")}, {"x": {"y": frozenset()}},
        {"x": [range(2)]}], ids=["str-subclass", "bytearray", "set", "range"])
    def test_other_values_left_to_python(self, wire: ModuleType, attributes: Any) -> None:
        """Values no decoder builds: C leaves the batch, ``spans_bytes`` counts it in Python."""
        records = [_record({"a": 1}), _record(attributes)]
        assert wire.span_sizes(records) is None
        assert spans_bytes(records, None) == [span_bytes(record) for record in records]

    def test_payloads_counted_in_python(self) -> None:
        """With the SDK spans kept (forwarding), each size is the record's twice and links."""
        records = [_record({"a": "b"})]
        link = dataclasses.make_dataclass("Link", ["attributes"])({"k": "v"})
        payload = dataclasses.make_dataclass("Payload", ["links"])([link])
        assert spans_bytes(records, [payload]) == [span_bytes(records[0], payload)]
        assert span_bytes(records[0], payload) > 2 * span_bytes(records[0])


class TestRandomRequests:
    @_SETTINGS
    @given(_requests())
    def test_same_records_or_left_to_python(self, wire: ModuleType,
                                             request: ExportTraceServiceRequest) -> None:
        """Every value kind, nesting, unicode, empty and repeated keys, zero parents, events,
        links, several resources and scopes: C gives Python's records, and answers for every
        request whose spans are all good (unless a value nests deeply)."""
        body = request.SerializeToString()
        decoded = _agree(wire, body)
        expected = _python(body)  # None past protobuf's nesting limit (deep maps)
        if expected is not None and not expected.rejected and not _unusual(request):
            assert decoded, "a well-formed request left to the Python path"

    @settings(_SETTINGS, max_examples=60)
    @given(_requests(), st.randoms(use_true_random=False))
    def test_fields_in_any_order(self, wire: ModuleType, request: ExportTraceServiceRequest,
                                 rng: random.Random) -> None:
        """Protobuf allows fields in any order (a resource after its spans, a span's name after
        its attributes): the same records either way."""
        body = request.SerializeToString()
        shuffled = _reorder(body, "request", rng)
        assert (_python(shuffled) is None) == (_python(body) is None)
        assert _agree(wire, shuffled) == _agree(wire, body)


# The submessages of each message, by field number: what _reorder recurses into.
_SCHEMA: dict[str, dict[int, str]] = {
    "request": {1: "resource_spans"},
    "resource_spans": {1: "resource", 2: "scope_spans"},
    "resource": {1: "kv"},
    "scope_spans": {1: "scope", 2: "span"},
    "scope": {3: "kv"},
    "span": {9: "kv", 11: "event", 13: "link", 15: "status"},
    "event": {3: "kv"}, "link": {4: "kv"}, "status": {},
    "kv": {2: "any"}, "any": {5: "list", 6: "kvlist"}, "list": {1: "any"}, "kvlist": {1: "kv"},
}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(body: bytes) -> list[tuple[int, int, bytes]]:
    """Split a well-formed message into (number, wire type, raw value) fields."""
    out, at = [], 0
    while at < len(body):
        tag, at = _read_varint(body, at)
        number, kind = tag >> 3, tag & 7
        if kind == 0:
            _, end = _read_varint(body, at)
        elif kind == 2:
            size, at = _read_varint(body, at)
            end = at + size
        else:
            end = at + (8 if kind == 1 else 4)
        out.append((number, kind, body[at:end]))
        at = end
    return out


def _read_varint(body: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = body[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _reorder(body: bytes, message: str, rng: random.Random) -> bytes:
    """Return ``body`` with the fields of every message shuffled, repeated fields in order."""
    fields = _fields(body)
    by_number: dict[int, list[bytes]] = {}
    for number, _, raw in fields:
        by_number.setdefault(number, []).append(raw)
    rng.shuffle(fields)
    out = bytearray()
    for number, kind, _ in fields:  # shuffled numbers, each number's values in their order
        raw = by_number[number].pop(0)
        sub = _SCHEMA[message].get(number)
        if sub is not None:
            raw = _reorder(raw, sub, rng)
        out += _varint(number << 3 | kind)
        out += _varint(len(raw)) + raw if kind == 2 else raw
    return bytes(out)


# --- any bytes ---------------------------------------------------------------------------------
class TestAnyBytes:
    @_SETTINGS
    @given(_requests(), st.data())
    def test_mutated_requests(self, wire: ModuleType, request: ExportTraceServiceRequest,
                              data: st.DataObject) -> None:
        """Cut, overwritten, inserted or deleted bytes: Python's records, or None."""
        body = bytearray(request.SerializeToString())
        for _ in range(data.draw(st.integers(1, 3))):
            if not body:
                break
            at = data.draw(st.integers(0, len(body) - 1))
            change = data.draw(st.sampled_from(["cut", "set", "insert", "delete"]))
            if change == "cut":
                del body[at:]
            elif change == "set":
                body[at] = data.draw(st.integers(0, 255))
            elif change == "insert":
                body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
            else:
                del body[at]
        _agree(wire, bytes(body))

    @_SETTINGS
    @given(st.binary(max_size=200))
    def test_random_bytes(self, wire: ModuleType, body: bytes) -> None:
        _agree(wire, body)

    @pytest.mark.parametrize("body", [
        b"\x0a\x05\x12\x03\x12\x01\x80",  # a span of one byte, a tag with no value
        b"\x0a\x04\x12\x02\x12\x7f",  # a length past the end
        b"\x0a\x02\x0b\x0c",  # a group in a ResourceSpans
        b"\x0a\x03\x12\x01\xff",  # a span of invalid tag bytes
        b"\x0a\x0b" + b"\x80" * 11,  # a tag longer than 5 bytes
        b"\x0a\x10\x12\x0e\x12\x0c\x30" + b"\x80" * 10 + b"\x01",  # a kind of 11 bytes
    ], ids=["tag", "length", "group", "tag-bytes", "long-tag", "long-varint"])
    def test_malformed_left_to_python(self, wire: ModuleType, body: bytes) -> None:
        assert wire.decode_spans(body, SpanRecord) is None

    def test_invalid_utf8_is_refused_as_before(self, wire: ModuleType) -> None:
        """Invalid UTF-8 in any string field, even one records do not keep: C leaves it, and
        protobuf refuses the request as it did (HTTP 400)."""
        good = ExportTraceServiceRequest()
        span = good.resource_spans.add(schema_url="ab").scope_spans.add().spans.add(
            trace_id=bytes(range(16)), span_id=bytes(range(8)), name="ab", trace_state="ab")
        span.attributes.add(key="ab").value.string_value = "ab"
        span.links.add(trace_id=bytes(16), span_id=bytes(8), trace_state="ab")
        body = good.SerializeToString()
        assert _agree(wire, body)
        for at in range(body.count(b"ab")):
            parts = body.split(b"ab")
            bad = b"ab".join(parts[:at + 1]) + b"\xed\xa0" + b"ab".join(parts[at + 1:])
            assert _python(bad) is None
            assert wire.decode_spans(bad, SpanRecord) is None
            with pytest.raises(RequestError, match="not a valid OTLP protobuf"):
                decode_protobuf(bad)

    def test_no_leak(self, wire: ModuleType) -> None:
        """Decoding, and giving up half-way, free everything they made."""
        bodies = [*_bench_bodies()[:1], *(body for _, body in _recorded_bodies())]
        cut = [body[: len(body) * 2 // 3] for body in bodies]

        def run() -> None:
            for body in bodies + cut:
                wire.decode_spans(body, SpanRecord)

        assert memory_grown(run) < 64 * 1024


# --- wiring ------------------------------------------------------------------------------------
class TestWiring:
    def test_receiver_and_check_use_it(self, wire: ModuleType, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
        """serve's decode_protobuf and check's protobuf files give the same spans with the C
        decoder and without it; a partly malformed request still gets Python's partial
        success."""
        body = _bench_bodies()[0]
        bad = ExportTraceServiceRequest.FromString(body)
        bad.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01"
        bad_body = bad.SerializeToString()
        path = tmp_path / "traces.binpb"
        path.write_bytes(body)

        def results() -> tuple[Decoded, Decoded, list[SpanRecord]]:
            return decode_protobuf(body), decode_protobuf(bad_body), list(iter_spans(str(path)))

        monkeypatch.setattr(proto_module, "WIRE", None)
        python = results()
        monkeypatch.setattr(proto_module, "WIRE", wire)
        native = results()
        assert repr(native) == repr(python)
        assert native[1].rejected == 1
        assert "spans[1].span_id: expected 8 bytes, got 1" in native[1].error_message

    @pytest.mark.parametrize("protocol", ["grpc", "http"])
    def test_serve_decodes_in_c(self, wire: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                protocol: str) -> None:
        """The SDK's OTLP/gRPC and OTLP/HTTP exporters to a real receiver: every request is
        decoded in C (the gRPC handler hands on the raw message), and the findings are
        check's."""
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )
        from test_receiver import Served, export
        from test_receiver_stream import as_json

        from otel_loopguard.config import LoopGuardConfig
        from otel_loopguard.otlp._sdk import span_record_from_readable
        from otel_loopguard.replay.checker import Checker

        decoded: list[bool] = []

        class Counting:
            @staticmethod
            def decode_spans(body: bytes, record: type[SpanRecord]) -> list[SpanRecord] | None:
                spans: list[SpanRecord] | None = wire.decode_spans(body, record)
                decoded.append(spans is not None)
                return spans

        monkeypatch.setattr(proto_module, "WIRE", Counting)
        spans = tuple(scripted_spans(({}, _looping), ({"prompt": "t"}, _looping)))
        served = Served()
        with served.receiver:
            receiver = served.receiver
            export(GrpcExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True)
                   if protocol == "grpc"
                   else HttpExporter(endpoint=f"{receiver.http_url}/v1/traces"), spans)
            results = served.results()
        assert decoded and all(decoded)
        assert served.value("loopguard_receiver_spans_total", outcome="accepted") == len(spans)
        assert results == as_json(list(Checker(LoopGuardConfig()).run(
            span_record_from_readable(span) for span in spans)))
        assert any(report["findings"] for report in results)

    def test_forwarding_keeps_the_python_path(self, wire: ModuleType,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """payloads=True (serve forwarding) needs the SDK spans protobuf's objects give."""
        monkeypatch.setattr(proto_module, "WIRE", wire)
        decoded = decode_protobuf(_bench_bodies()[0], payloads=True)
        assert decoded.payloads is not None and len(decoded.payloads) == len(decoded.spans)

    @pytest.mark.parametrize(("name", "value"), [
        ("LOOPGUARD_PURE_PYTHON", "1"), ("OTEL_LOOPGUARD_PURE_PYTHON", "1"),
        ("LOOPGUARD_PURE_PYTHON", "0"), ("LOOPGUARD_PURE_PYTHON", "")])
    def test_pure_python_switch(self, name: str, value: str) -> None:
        """LOOPGUARD_PURE_PYTHON=1 (or its older spelling) turns the decoder off, its JSON span
        records too, as it does the signatures'; 0 or empty leaves them on."""
        code = ("import importlib.util, otel_loopguard.otlp._proto as p, "
                "otel_loopguard.otlp._json as j, otel_loopguard.signature._native as s;"
                "print(p.WIRE is None, j._JSON_SPANS is None, s.NATIVE is None, "
                "importlib.util.find_spec('otel_loopguard.otlp._wire') is not None)")
        import otel_loopguard

        # the package this process imports (the installed one in CI, the tree in development)
        home = Path(otel_loopguard.__file__).resolve().parent.parent
        env = {key: text for key, text in os.environ.items()
               if key not in ("LOOPGUARD_PURE_PYTHON", "OTEL_LOOPGUARD_PURE_PYTHON")}
        env.update({name: value, "PYTHONPATH": os.pathsep.join(
            [str(home), os.environ.get("PYTHONPATH", "")])})
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        wire_off, json_off, signatures_off, built = done.stdout.split()
        if value not in ("", "0"):
            assert (wire_off, json_off, signatures_off) == ("True", "True", "True")
        elif built == "False":
            pytest.skip("the decoder is not built in the package the child imports")
        else:
            assert (wire_off, json_off) == ("False", "False")
