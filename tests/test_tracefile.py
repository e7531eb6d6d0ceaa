"""Tests of the streaming trace-file reader."""

from __future__ import annotations

import base64
import copy
import gzip
import io
import json
import logging
import pickle
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.otlp._proto import decode_proto_spans
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import SpanRecord

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def make_requests(count: int, *, attribute: str = "") -> list[ExportTraceServiceRequest]:
    """Emit ``count`` two-span traces with the real SDK; return one export request per trace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tracefile.tests")
    requests = []
    for index in range(count):
        with tracer.start_as_current_span(f"invoke_agent {index}"):
            attributes = {"gen_ai.tool.name": "search", "index": index}
            if attribute:
                attributes["payload"] = attribute
            with tracer.start_as_current_span("execute_tool search", attributes=attributes):
                pass
        requests.append(encode_spans(exporter.get_finished_spans()))
        exporter.clear()
    provider.shutdown()
    return requests


def to_json(request: ExportTraceServiceRequest, *, hex_ids: bool = True) -> dict[str, Any]:
    """Return the request as OTLP/JSON (MessageToDict, ids converted to hex unless told not to)."""
    doc = MessageToDict(request)
    if hex_ids:
        for resource_spans in doc["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    for key in _ID_KEYS:
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return doc


def jsonl(requests: list[ExportTraceServiceRequest]) -> bytes:
    """Return the requests as the Collector file exporter's JSON Lines."""
    return b"".join(json.dumps(to_json(r)).encode() + b"\n" for r in requests)


def framed(messages: list[bytes]) -> bytes:
    """Return messages in the Collector's ``format: proto`` framing (4-byte big-endian length)."""
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def records(requests: list[ExportTraceServiceRequest]) -> list[SpanRecord]:
    """Return the records the requests stand for."""
    return [span for request in requests for span in decode_proto_spans(request).spans]


def read(path: Path | str, **kwargs: Any) -> tuple[list[SpanRecord], list[TraceFileError]]:
    """Read a file collecting spans and errors."""
    errors: list[TraceFileError] = []
    spans = list(iter_spans(str(path), on_error=errors.append, **kwargs))
    return spans, errors


@pytest.fixture(name="requests", scope="module")
def _requests() -> list[ExportTraceServiceRequest]:
    return make_requests(3)


@pytest.fixture(name="expected")
def _expected(requests: list[ExportTraceServiceRequest]) -> list[SpanRecord]:
    return records(requests)


@pytest.fixture(name="write")
def _write(tmp_path: Path) -> Any:
    def write(data: bytes, name: str = "traces.jsonl") -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path

    return write


class TestJsonFormats:
    """iter_spans on OTLP/JSON: JSON Lines, documents and arrays."""

    def test_jsonl(self, write: Any, requests: list[Any], expected: list[SpanRecord]) -> None:
        """Each JSON Lines request yields its spans, in file order."""
        assert read(write(jsonl(requests))) == (expected, [])

    def test_blank_lines_and_crlf(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """Blank lines and CRLF line endings are skipped harmlessly."""
        data = b"\r\n" + jsonl(requests).replace(b"\n", b"\r\n\r\n")
        assert read(write(data)) == (expected, [])

    def test_single_pretty_document(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """A pretty-printed request spanning many lines is read as one document."""
        data = json.dumps(to_json(requests[0]), indent=2).encode()
        assert read(write(data, "trace.json")) == (expected[:2], [])

    @pytest.mark.parametrize("indent", [None, 2], ids=["one-line", "pretty"])
    def test_array_of_requests(
        self, write: Any, requests: list[Any], expected: list[SpanRecord], indent: int | None
    ) -> None:
        """A JSON array of requests yields the spans of every element."""
        data = json.dumps([to_json(r) for r in requests], indent=indent).encode()
        assert read(write(data, "traces.json")) == (expected, [])

    @pytest.mark.parametrize("between", [b"\n", b"", b"\n\n  \n"], ids=["newline", "none", "blank"])
    def test_pretty_documents_back_to_back(
        self, write: Any, requests: list[Any], expected: list[SpanRecord], between: bytes
    ) -> None:
        """Requests pretty-printed one after another (``jq . traces.jsonl``) are each read."""
        data = between.join(json.dumps(to_json(r), indent=2).encode() for r in requests)
        assert read(write(data + b"\n", "traces.json")) == (expected, [])

    def test_many_documents_back_to_back_keep_their_lines(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """2,000 documents back to back: each is read, and a bad one last is named on its line.

        (Its lines are counted on from the document before, in one pass over the text; the
        work is measured in benchmarks/results/HISTORY.md, not here.)
        """
        empty = json.dumps({"resourceSpans": []}, indent=2).encode() + b"\n"
        request = json.dumps(to_json(requests[0]), indent=2).encode() + b"\n"
        path = write(empty * 2_000 + request + b'{"b": 1}\n', "traces.json")
        spans, errors = read(path)
        assert spans == expected[:2]
        line = 2_000 * empty.count(b"\n") + request.count(b"\n") + 1  # where it starts
        assert [(e.line, e.reason) for e in errors] == [
            (line, "not an OTLP trace request: no resourceSpans (keys: 'b')")]

    def test_bad_text_after_pretty_documents_loses_only_itself(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """A document cut short after whole ones is reported on its line; the others are read.

        A document that is not a request is reported on the line where it starts.
        """
        first = json.dumps(to_json(requests[0]), indent=2)
        second = json.dumps(to_json(requests[1]), indent=2)
        data = f'{first}\n{{"b": 1}}\n{second}\n{{"resourceSpans": [\n  {{"x"\n'.encode()
        spans, errors = read(write(data, "traces.json"))
        assert spans == expected[:4]
        lines = first.count("\n") + 1
        assert [(e.line, e.reason) for e in errors] == [
            (lines + 1, "not an OTLP trace request: no resourceSpans (keys: 'b')"),
            (lines + second.count("\n") + 4,
             "invalid JSON: Expecting ':' delimiter at column 7")]

    def test_base64_ids(self, write: Any, requests: list[Any], expected: list[SpanRecord]) -> None:
        """Ids written in base64 (protobuf json_format style) read like hex ids."""
        data = b"".join(json.dumps(to_json(r, hex_ids=False)).encode() + b"\n" for r in requests)
        assert read(write(data)) == (expected, [])

    def test_utf8_bom(self, write: Any, requests: list[Any], expected: list[SpanRecord]) -> None:
        """A leading UTF-8 byte order mark is ignored."""
        assert read(write(b"\xef\xbb\xbf" + jsonl(requests))) == (expected, [])

    def test_five_megabyte_attribute(self, write: Any) -> None:
        """A line holding a 5 MB attribute value is read whole and reports progress."""
        payload = "x" * (5 * 1024 * 1024)
        requests = make_requests(2, attribute=payload)
        path = write(jsonl(requests))
        seen: list[int] = []
        spans, errors = read(path, progress=seen.append)
        assert (spans, errors) == (records(requests), [])
        payloads = [s.attributes["payload"] for s in spans if "payload" in s.attributes]
        assert payloads == [payload, payload]
        assert seen == sorted(seen)
        assert len(seen) >= 3
        assert seen[-1] == path.stat().st_size

    def test_empty_and_blank_files(self, write: Any) -> None:
        """An empty or whitespace-only file yields nothing and reports nothing."""
        assert read(write(b"")) == ([], [])
        assert read(write(b"\n  \n")) == ([], [])


class TestCompressionAndStdin:
    """iter_spans on gzip files and standard input."""

    @pytest.mark.parametrize("name", ["traces.jsonl.gz", "traces.jsonl"], ids=["ext", "magic"])
    def test_gzip(
        self, write: Any, requests: list[Any], expected: list[SpanRecord], name: str
    ) -> None:
        """Gzip is recognised by its magic bytes, whatever the extension."""
        assert read(write(gzip.compress(jsonl(requests)), name)) == (expected, [])

    @pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
    def test_stdin(
        self,
        monkeypatch: pytest.MonkeyPatch,
        requests: list[Any],
        expected: list[SpanRecord],
        compress: bool,
    ) -> None:
        """``-`` reads binary standard input, plain or gzip."""
        data = jsonl(requests)
        stdin = io.TextIOWrapper(io.BytesIO(gzip.compress(data) if compress else data))
        monkeypatch.setattr(sys, "stdin", stdin)
        assert read("-") == (expected, [])

    def test_truncated_gzip(self, write: Any, requests: list[Any]) -> None:
        """A truncated gzip file reports a read error after the lines it could decompress."""
        data = gzip.compress(jsonl(requests * 20))
        spans, errors = read(write(data[: len(data) // 2], "traces.gz"))
        assert len(errors) == 1
        assert "cannot read" in errors[0].reason
        assert errors[0].line > 1
        assert len(spans) == 2 * (errors[0].line - 1)

    def test_truncated_gzip_strict(self, write: Any, requests: list[Any]) -> None:
        """With strict, a truncated gzip file raises TraceFileError."""
        data = gzip.compress(jsonl(requests))
        with pytest.raises(TraceFileError, match="cannot read"):
            list(iter_spans(str(write(data[:-10], "t.gz")), strict=True))


class TestProtobuf:
    """iter_spans on OTLP protobuf files."""

    def test_single_message(self, write: Any, requests: list[Any]) -> None:
        """A file holding one serialized ExportTraceServiceRequest yields its spans."""
        path = write(requests[1].SerializeToString(), "trace.pb")
        assert read(path) == (records(requests[1:2]), [])

    def test_length_prefixed(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """The Collector file exporter's length-prefixed framing yields every message."""
        data = framed([r.SerializeToString() for r in requests])
        assert read(write(data, "traces.pb")) == (expected, [])

    def test_length_prefixed_gzip(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """Framed protobuf may itself be gzip-compressed."""
        data = gzip.compress(framed([r.SerializeToString() for r in requests]))
        assert read(write(data, "traces.pb.gz")) == (expected, [])

    def test_length_prefixed_json_frames(
        self, write: Any, requests: list[Any], expected: list[SpanRecord]
    ) -> None:
        """Frames holding JSON (the exporter's json format with compression) are read too."""
        data = framed([json.dumps(to_json(r)).encode() for r in requests])
        assert read(write(data, "traces.bin")) == (expected, [])

    def test_truncated_frame(self, write: Any, requests: list[Any]) -> None:
        """A truncated last frame is reported with its message number after the good ones."""
        data = framed([r.SerializeToString() for r in requests])
        spans, errors = read(write(data[:-5], "traces.pb"))
        assert spans == records(requests[:2])
        assert [(e.line, e.reason[:17]) for e in errors] == [(3, "truncated message")]

    def test_bad_frame_in_the_middle(self, write: Any, requests: list[Any]) -> None:
        """A frame that does not parse is reported and the following frames are still read."""
        messages = [r.SerializeToString() for r in requests]
        data = framed([messages[0], b"\xff\xff\xff", messages[2]])
        spans, errors = read(write(data, "traces.pb"))
        assert spans == records([requests[0], requests[2]])
        assert [(e.line, e.reason[:16]) for e in errors] == [(2, "invalid protobuf")]


class TestBadInput:
    """iter_spans error reporting."""

    def test_bad_line_in_the_middle(self, write: Any, requests: list[Any]) -> None:
        """A bad line is reported with its number; the lines around it are still read."""
        lines = jsonl(requests).splitlines(keepends=True)
        data = b"".join([lines[0], b"\n", b'{"resourceSpans": [}\n', lines[1], lines[2]])
        spans, errors = read(write(data))
        assert spans == records(requests)
        assert [str(e) for e in errors] == [
            f"{errors[0].path}:3: invalid JSON: Expecting value at column 20"
        ]

    def test_a_string_left_open_is_said_once(self, write: Any, requests: list[Any]) -> None:
        """The parser's "starting at" leads into the column, without a second "at"."""
        lines = jsonl(requests).splitlines(keepends=True)
        spans, errors = read(write(b"".join([lines[0], b'{"resourceSpans": "abc\n'])))
        assert spans == records(requests[:1])
        assert [str(e) for e in errors] == [
            f"{errors[0].path}:2: invalid JSON: Unterminated string starting at column 19"]

    def test_bad_trace_id_names_the_field(self, write: Any, requests: list[Any]) -> None:
        """A malformed field is reported with the line number and the field path; the
        line's good spans are kept (as serve's partial success keeps them)."""
        doc = to_json(requests[1])
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"] = "zz"
        data = b"\n".join(json.dumps(d).encode() for d in [to_json(requests[0]), doc])
        spans, errors = read(write(data))
        second = records(requests[1:2])
        assert spans == records(requests[:1]) + second[:1] + second[2:]
        assert errors[0].line == 2
        assert errors[0].reason == (
            f"rejected 1 malformed span(s), kept {len(second) - 1}; first: "
            "resourceSpans[0].scopeSpans[0].spans[1].traceId: expected 32 hex digits, got 'zz'"
        )

    @pytest.mark.parametrize(("field", "value", "problem"), [
        ("kind", "18446744073709551616", "kind: expected SPAN_KIND_* or a 32-bit integer, got "
                                         "18446744073709551616"),
        ("flags", "-9223372036854775809", "flags: expected an unsigned 32-bit integer, got "
                                          "-9223372036854775809"),
        ("attributes", '[{"key": "n", "value": {"intValue": 99999999999999999999}}]',
         "attributes[0].value.intValue: expected a signed 64-bit integer, got "
         "99999999999999999999")])
    def test_an_integer_beyond_64_bits_is_named_exactly(self, write: Any, requests: list[Any],
                                                        field: str, value: str,
                                                        problem: str) -> None:
        """A line is first read without the test for long integers (orjson makes them floats):
        a span such a number spoils is still reported with the number as written."""
        doc = to_json(requests[0])
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0][field] = "@"
        spans, errors = read(write(json.dumps(doc).replace('"@"', value).encode()))
        assert len(spans) == len(records(requests[:1])) - 1
        assert errors[0].reason.endswith(
            f"first: resourceSpans[0].scopeSpans[0].spans[0].{problem}")

    def test_a_double_written_as_a_long_integer_is_its_float(self, write: Any,
                                                            requests: list[Any]) -> None:
        """``doubleValue`` takes any number: a 20-digit integer is ``float()`` of it."""
        doc = to_json(requests[0])
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = "@"
        pair = '[{"key": "big", "value": {"doubleValue": 123456789012345678901234567}}]'
        spans, errors = read(write(json.dumps(doc).replace('"@"', pair).encode()))
        assert not errors
        assert spans[0].attributes["big"] == float(123456789012345678901234567)

    def test_bad_element_of_array(self, write: Any) -> None:
        """A bad element of a JSON array is reported with its index."""
        _, errors = read(write(b'[{"resourceSpans": []}, 5]\n'))
        assert [e.reason for e in errors] == ["element 1: expected an object, got int"]

    def test_a_bad_element_of_an_array_loses_only_itself(self, write: Any,
                                                         requests: list[Any]) -> None:
        """A JSON array of requests with one element that is no trace request (a logs-less
        ``{"foo": 1}``): the requests before and after it are read, the element reported."""
        doc = [to_json(requests[0]), {"foo": 1}, to_json(requests[1])]
        spans, errors = read(write(json.dumps(doc, indent=2).encode(), "traces.json"))
        assert len(spans) == len(records(requests[:2]))
        assert [e.reason for e in errors] == [
            "element 1: not an OTLP trace request: no resourceSpans (keys: 'foo')"]

    def test_an_array_of_no_requests_is_one_error_that_counts_the_rest(
            self, write: Any) -> None:
        """JSON that is not OTLP at all (an array of numbers) is one short error."""
        spans, errors = read(write(json.dumps(list(range(1000))).encode() + b"\n"))
        assert not spans
        assert [e.reason for e in errors] == [
            "element 0: expected an object, got int; element 1: expected an object, got int; "
            "element 2: expected an object, got int; and 997 more bad elements"]

    def test_error_line_in_pretty_document(self, write: Any, requests: list[Any]) -> None:
        """An error inside a multi-line document names the line where it occurs."""
        text = json.dumps(to_json(requests[0]), indent=2).splitlines()
        text[4] += " oops"
        _, errors = read(write("\n".join(text).encode(), "trace.json"))
        assert [e.line for e in errors] == [5]

    def test_strict_raises_first_error(self, write: Any, requests: list[Any]) -> None:
        """With strict, the first bad line raises after the spans before it were yielded."""
        data = jsonl(requests[:1]) + b"nope\n" + b"{\n"
        iterator = iter_spans(str(write(data)), strict=True)
        assert len([next(iterator), next(iterator)]) == 2
        with pytest.raises(TraceFileError) as caught:
            next(iterator)
        assert (caught.value.line, caught.value.reason[:12]) == (2, "invalid JSON")

    def test_errors_logged_without_callback(
        self, write: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Without on_error, errors are logged as warnings and reading continues."""
        with caplog.at_level(logging.WARNING, logger="otel_loopguard.replay.tracefile"):
            assert list(iter_spans(str(write(b'{"a": x}\n{}\n')))) == []
        messages = [r.getMessage() for r in caplog.records]
        assert [m.split(":", 1)[1][:16] for m in messages] == ["1: invalid JSON:"]

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file raises TraceFileError with line 0 at call time."""
        path = str(tmp_path / "absent.jsonl")
        with pytest.raises(TraceFileError) as caught:
            iter_spans(path)
        assert (caught.value.path, caught.value.line, caught.value.reason) == (
            path,
            0,
            "no such file",
        )

    def test_directory(self, tmp_path: Path) -> None:
        """A path that cannot be opened raises TraceFileError with line 0."""
        with pytest.raises(TraceFileError) as caught:
            list(iter_spans(str(tmp_path)))
        assert caught.value.line == 0

    @pytest.mark.parametrize(
        "data",
        [b"hello world\n", b"\x00\x00\x00\x05abc", b"\n\x05garbage"],
        ids=["text", "short-frame", "bad-message"],
    )
    def test_garbage(self, write: Any, data: bytes) -> None:
        """Garbage yields no spans and exactly one error."""
        spans, errors = read(write(data, "garbage"))
        assert spans == []
        assert len(errors) == 1

    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        prefix=st.sampled_from([b"", b"\x1f\x8b", b"\n", b"{", b"[", b"\x00\x00\x00"]),
        data=st.binary(max_size=300),
        strict=st.booleans(),
    )
    def test_random_bytes_raise_only_trace_file_error(
        self, tmp_path: Path, prefix: bytes, data: bytes, strict: bool
    ) -> None:
        """Arbitrary bytes never raise anything other than TraceFileError."""
        path = tmp_path / "random.bin"
        path.write_bytes(prefix + data)
        try:
            for span in iter_spans(str(path), strict=strict, on_error=lambda e: None):
                assert isinstance(span, SpanRecord)
        except TraceFileError:
            assert strict


class TestReadableSpans:
    """The reader agrees with the live path."""

    def test_records_equal_sdk_records(self, write: Any) -> None:
        """Spans read back from a file equal span_record_from_readable of the same SDK spans."""
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("s", attributes={"a": [1, 2]}):
            pass
        provider.shutdown()
        sdk_spans = exporter.get_finished_spans()
        spans, _ = read(write(jsonl([encode_spans(sdk_spans)])))
        assert spans == [span_record_from_readable(s) for s in sdk_spans]


def test_a_trace_file_error_survives_pickling_and_copying() -> None:
    """Raised in a worker process (a pool checking files in parallel), it reaches the caller
    whole: ``args`` holds only the message, which it used to be rebuilt from (a TypeError)."""
    error = TraceFileError("traces.jsonl", 12, "line 12 is not JSON")
    for copied in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert (copied.path, copied.line, copied.reason, str(copied)) == (
            "traces.jsonl", 12, "line 12 is not JSON", str(error))
