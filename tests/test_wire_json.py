"""The C decoder of OTLP/JSON spans gives exactly the records ``otlp._json._span`` builds.

``_span`` (Python) is the definition. For every span of a parsed OTLP/JSON request the C
function ``json_spans`` either leaves the span to ``_span`` (None in its place) or gives the very
record ``_span`` gives: same repr (so the same value types and attribute order). Whole requests
decode to the same spans, rejections and first problem with it and without it. It must answer
for every span exporters write (the recorded framework traces, the development corpus, the
benchmarks' traces), and never crash or leak on any input. Built from its source here when the
installed package lacks it; the tests skip only when this machine cannot compile it.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _compiled import memory_grown
from _otlp_files import json_line, scripted_spans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wire import _looping

import otel_loopguard.otlp._json as json_module
from otel_loopguard.otlp._json import decode_json_spans
from otel_loopguard.otlp._spans import DecodedSpans
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import SpanRecord

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "recorded"
_SETTINGS = settings(max_examples=300, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _decoded(doc: Any, native: Any) -> DecodedSpans:
    """``decode_json_spans(doc)`` with ``native`` as the C decoder (None: Python alone)."""
    saved = json_module._JSON_SPANS
    json_module._JSON_SPANS = native
    try:
        return decode_json_spans(doc)
    finally:
        json_module._JSON_SPANS = saved


def _holes(wire: ModuleType, doc: dict[str, Any]) -> int:
    """How many spans of ``doc`` (camelCase scopes) the C decoder leaves to Python."""
    holes = 0
    for resource_spans in doc.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            holes += wire.json_spans(scope_spans.get("spans", []), {}, "", SpanRecord)[1]
    return holes


def _agree(wire: ModuleType, doc: Any) -> int:
    """Check the request decodes alike with the C decoder and without; return its holes."""
    with_c, python = _decoded(doc, wire.json_spans), _decoded(doc, None)
    assert [repr(span) for span in with_c.spans] == [repr(span) for span in python.spans]
    assert (with_c.rejected, with_c.problem) == (python.rejected, python.problem)
    return _holes(wire, doc) if isinstance(doc, dict) else 0


# --- corpora ---------------------------------------------------------------------------------
def _recorded() -> Iterator[tuple[str, Any]]:
    for path in sorted(RECORDED.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            yield f"{path.name}:{number + 1}", json.loads(line)


class TestCorpora:
    def test_recorded_framework_traces(self, wire: ModuleType) -> None:
        """The recorded traces of 14 agent frameworks: every span decoded in C, alike."""
        docs = list(_recorded())
        assert len(docs) >= 14
        assert [name for name, doc in docs if _agree(wire, doc)] == []

    def test_development_corpus(self, wire: ModuleType) -> None:
        """Every run of the development corpus as OTLP/JSON (real agents' arguments, results
        and messages, every family): every span decoded in C, alike."""
        sys.path.insert(0, str(ROOT))
        try:
            from tests.corpus.replay import iter_runs, run_to_otlp
        finally:
            sys.path.remove(str(ROOT))
        spans = 0
        for index, run in enumerate(iter_runs()):
            doc = run_to_otlp(run, index)
            assert _agree(wire, doc) == 0, run.get("id")
            spans += len(doc["resourceSpans"][0]["scopeSpans"][0]["spans"])
        assert spans > 10_000

    def test_sdk_exports(self, wire: ModuleType) -> None:
        """What the SDK's OTLP encoder writes as JSON: scripted loops, with and without a
        template, and an error's exception event."""
        doc = json.loads(json_line(scripted_spans(({}, _looping), ({"prompt": "t"}, _looping))))
        assert _agree(wire, doc) == 0
        assert len(_decoded(doc, wire.json_spans).spans) > 20

    def test_benchmark_traces(self, wire: ModuleType, tmp_path: Path) -> None:
        """bench_check's scripted framework traces, as check reads them: alike, no holes."""
        sys.path.insert(0, str(ROOT / "benchmarks"))
        try:
            from bench_check import generate
        finally:
            sys.path.remove(str(ROOT / "benchmarks"))
        path = tmp_path / "scripted.jsonl"
        generate(str(path), 0.3)
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines
        assert [n for n, line in enumerate(lines) if _agree(wire, json.loads(line))] == []


# --- random spans ----------------------------------------------------------------------------
_HEX16 = "0123456789abcdef"
_TRACE = "5b8efff798038103d269b633813fc60c"
_IDS = st.sampled_from([_HEX16, _HEX16.upper(), "0" * 16, "00f067aa0ba902b7", "AQIDBAUGBwg=",
                        "xyz", "", "0123456789abcdeg", "é" * 16, 7, None])
_TRACE_IDS = st.sampled_from([_TRACE, _TRACE.upper(), "0" * 32, "W47/95gDgQPSabYzgT/GDA==",
                              _TRACE[:-1], "", 5, None])
_TIMES = st.sampled_from(["1700000000000000000", "0", "9999999999999999999", "18446744073709551615",
                          "18446744073709551616", "", "-1", "1e9", "\u0661\u0662", 1700000000,
                          1.5, None])
_STRINGS = st.one_of(st.text(max_size=6), st.sampled_from(["é", "\x00", "x" * 40]))
_VALUES = st.one_of(
    st.fixed_dictionaries({"stringValue": _STRINGS}),
    st.fixed_dictionaries({"stringValue": st.one_of(st.integers(), st.none())}),
    st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), st.just("true"), st.just(1))}),
    st.fixed_dictionaries({"intValue": st.one_of(
        st.integers(-(2**64), 2**64), st.sampled_from(
            ["42", "-42", "-", "", "0042", "1_0", " 1", "9223372036854775808",
             "-9223372036854775808", "12345678901234567890", "\u0661", "1.0"]),
        st.booleans(), st.floats())}),
    st.fixed_dictionaries({"doubleValue": st.one_of(
        st.floats(), st.integers(-(2**1100), 2**1100),
        st.sampled_from(["NaN", "Infinity", "1.5", True]))}),
    st.fixed_dictionaries({"arrayValue": st.one_of(
        st.fixed_dictionaries({"values": st.lists(st.one_of(
            st.fixed_dictionaries({"stringValue": _STRINGS}),
            st.fixed_dictionaries({"intValue": st.just("3")}),
            st.just({"stringValue": "a", "x": 1})), max_size=3)}),
        st.just({}), st.just({"values": "x"}), st.just([]))}),
    st.sampled_from([{"kvlistValue": {"values": [{"key": "a", "value": {"stringValue": "b"}}]}},
                     {"bytesValue": "AQI="}, {"string_value": "snake"}, {"int_value": "3"},
                     {}, {"stringValue": "a", "intValue": "3"}, {"intValue": "3", "boolValue": 1},
                     {"unknown": 1}, None, "x"]),
)
_PAIRS = st.one_of(
    st.fixed_dictionaries({"key": st.sampled_from(["k", "gen_ai.tool.name", "é", ""]),
                           "value": _VALUES}),
    st.sampled_from([{"key": 3, "value": {"stringValue": "a"}}, {"value": {"stringValue": "a"}},
                     {"key": "k"}, {"key": "k", "value": {"stringValue": "a"}, "extra": 1},
                     "pair", None]),
)
_STATUS = st.one_of(
    st.just({}), st.none(),
    st.fixed_dictionaries({}, optional={
        "code": st.one_of(st.sampled_from([0, 1, 2, 7, -1, 2**31, True, "2", "STATUS_CODE_ERROR",
                                           "STATUS_CODE_OK", "ERROR", None]),
                          st.integers(-(2**40), 2**40)),
        "message": st.sampled_from(["boom", "", None, 3])}),
    st.sampled_from(["ok", [1]]),
)
_OPTIONAL = {
    "parentSpanId": _IDS, "parent_span_id": _IDS, "kind": st.sampled_from(
        [0, 1, 5, -3, 2**31, True, "SPAN_KIND_CLIENT", "CLIENT", "3", None]),
    "traceState": st.sampled_from(["a=b", "", None, 3]),
    "trace_state": st.sampled_from(["a", None]),
    "flags": st.sampled_from([0, 1, 0x100, 0x200, 0x301, 2**32 - 1, 2**32, -1, True, "1",
                              None]),
    "links": st.sampled_from([[], None, "x", [{"traceId": _TRACE, "spanId": _HEX16}]]),
    "events": st.sampled_from([[], None, [{"name": "e", "timeUnixNano": "1"}], "x"]),
    "status": _STATUS, "attributes": st.one_of(st.lists(_PAIRS, max_size=5),
                                               st.sampled_from([None, "x", {}])),
    "span_id": _IDS, "start_time_unix_nano": _TIMES,
}
_SPANS = st.fixed_dictionaries(
    {"traceId": _TRACE_IDS, "spanId": _IDS, "name": st.sampled_from(["chat", "", None, 3]),
     "startTimeUnixNano": _TIMES, "endTimeUnixNano": _TIMES},
    optional=_OPTIONAL)
_USUAL = st.fixed_dictionaries(
    {"traceId": st.just(_TRACE), "spanId": st.just(_HEX16), "name": st.just("execute_tool t"),
     "startTimeUnixNano": st.just("1"), "endTimeUnixNano": st.just("2"),
     "attributes": st.lists(_PAIRS, max_size=4)},
    optional={"parentSpanId": _IDS, "status": _STATUS})
"""Mostly what exporters write, so that most examples reach the attribute values."""


def _request(spans: list[Any]) -> dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
        "scopeSpans": [{"scope": {"name": "sc"}, "spans": spans}]}]}


class TestRandom:
    @_SETTINGS
    @given(spans=st.lists(st.one_of(_SPANS, _USUAL, st.sampled_from([None, 3, "s", []])),
                          min_size=1, max_size=4))
    def test_any_span_decodes_alike(self, wire: ModuleType, spans: list[Any]) -> None:
        """Whatever a span holds, the request decodes to the same spans, rejections and first
        problem; a span the C decoder reads is the record ``_span`` builds."""
        doc = _request(spans)
        original = copy.deepcopy(doc)
        _agree(wire, doc)
        assert doc == original  # only read
        records, holes = wire.json_spans(spans, {}, "sc", SpanRecord)
        assert holes == sum(record is None for record in records)
        for span, record in zip(spans, records, strict=True):
            if record is not None:
                assert repr(record) == repr(json_module._span(span, {}, "sc"))

    def test_not_a_list(self, wire: ModuleType) -> None:
        """A scope's spans that are not a list are left whole to Python (which words it)."""
        assert wire.json_spans({"a": 1}, {}, "", SpanRecord) is None
        assert wire.json_spans((), {}, "", SpanRecord) is None
        with pytest.raises(TypeError, match="takes 4 arguments"):
            wire.json_spans([], {})

    def test_trace_ids_are_shared(self, wire: ModuleType) -> None:
        """The spans of one trace share their trace id's text (memory, as Python's memo does)."""
        span = {"traceId": _TRACE.upper(), "spanId": _HEX16, "name": "n",
                "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
        records, holes = wire.json_spans([span, dict(span)], {}, "", SpanRecord)
        assert holes == 0 and records[0].trace_id == _TRACE
        assert records[0].trace_id is records[1].trace_id

    def test_no_leak(self, wire: ModuleType) -> None:
        """Decoding (and leaving spans to Python) frees everything it does not return."""
        docs = [doc for _, doc in _recorded()]
        bad = [{"traceId": _TRACE, "spanId": _HEX16, "name": "n", "startTimeUnixNano": "1",
                "endTimeUnixNano": "2", "attributes": [
                    {"key": "a", "value": {"stringValue": "x"}},
                    {"key": "b", "value": {"intValue": "x"}}]}] * 50

        def run() -> None:
            for doc in docs:
                for resource_spans in doc["resourceSpans"]:
                    for scope_spans in resource_spans["scopeSpans"]:
                        wire.json_spans(scope_spans["spans"], {}, "", SpanRecord)
            wire.json_spans(bad, {}, "", SpanRecord)

        assert memory_grown(run) < 64 * 1024


class TestWiring:
    def test_check_reads_json_files_alike(self, wire: ModuleType, tmp_path: Path) -> None:
        """check's OTLP/JSON reader gives the same spans with the C decoder and without."""
        path = tmp_path / "traces.jsonl"
        path.write_text("".join(json.dumps(doc) + "\n" for _, doc in _recorded()),
                        encoding="utf-8")
        saved = json_module._JSON_SPANS
        try:
            json_module._JSON_SPANS = wire.json_spans
            native = [repr(span) for span in iter_spans(str(path))]
            json_module._JSON_SPANS = None
            python = [repr(span) for span in iter_spans(str(path))]
        finally:
            json_module._JSON_SPANS = saved
        assert native == python and len(native) > 100
