"""Streaming reader of OTLP trace files: JSON Lines, JSON documents and protobuf, plain or gzip.

The reader sniffs the content, not the file name:

* gzip is recognised by its magic bytes (``1f 8b``) and decompressed on the fly;
* text that starts with ``{`` or ``[`` is OTLP/JSON. It is read line by line as JSON Lines
  (the Collector ``file`` exporter format, one ``ExportTraceServiceRequest`` per line), unless
  the first line opens a document that does not end on it (pretty-printed JSON), in which case
  the whole document is read at once. A JSON array of requests is accepted wherever a request is;
* binary content that starts with the tag of ``resource_spans`` (``0x0a``) is one serialized
  ``ExportTraceServiceRequest``; any other binary content is the Collector's ``format: proto``
  framing, where each message is preceded by its length as a 4-byte big-endian integer.

Memory is bounded by the largest line, document or message, never by the file size.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib
import io
import json
import logging
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NamedTuple, Protocol

from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.otlp._json import decode_json_spans, loads_json
from otel_loopguard.otlp._proto import decode_proto_spans
from otel_loopguard.otlp._spans import DecodedSpans, FieldError

if TYPE_CHECKING:
    from otel_loopguard.types import SpanRecord

__all__ = ["iter_spans"]

_LOGGER = logging.getLogger(__name__)
_CHUNK_BYTES = 1 << 20
"""Read size, largest read of a protobuf frame, and progress-report granularity."""
_SNIFF_BYTES = 512
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_JSON_SPACE = b" \t\r\n"
_CONTROL_RE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_PROTO_REQUEST_TAG = b"\n"
"""First byte of any non-empty ``ExportTraceServiceRequest``: field 1, length-delimited."""
_FRAME_HEADER = struct.Struct(">I")
_MAX_FRAME_BYTES = 1 << 28
"""Larger length prefixes mean the content is not framed protobuf (text starts above 500 MB)."""
_UNRECOGNISED = "unrecognised content: neither OTLP/JSON nor OTLP protobuf"
_READ_ERRORS = (OSError, EOFError, zlib.error)
_PROTO_MISSING = (
    "reading OTLP protobuf needs opentelemetry-proto: pip install 'otel-loopguard[receiver]'"
)


def iter_spans(
    path: str,
    *,
    strict: bool = False,
    on_error: Callable[[TraceFileError], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[SpanRecord]:
    """Yield every span of an OTLP trace file, streaming; the file is read line by line.

    Each bad line (or JSON document, or protobuf message) becomes one ``TraceFileError`` naming
    its line, e.g. ``traces.jsonl:17: invalid JSON: Expecting ',' delimiter at column 40``; a bad
    line yields no spans and reading goes on with the next one. For framed protobuf files the
    ``line`` of an error is the 1-based message number; it is 0 when the whole file is at fault
    (an unreadable single protobuf message). Read errors such as truncated gzip end the reading.

    Args:
        path: the file, or ``"-"`` for standard input (binary, possibly gzip).
        strict: raise the first error instead of reporting it and continuing.
        on_error: called with each error when not ``strict``; when None, errors are logged as
            warnings on the ``otel_loopguard.replay.tracefile`` logger.
        progress: called with the number of (compressed) bytes consumed so far, about every
            1 MiB and once at the end, to drive a progress bar.

    Returns:
        A lazy iterator of span records, in file order; an empty file yields nothing.

    Raises:
        TraceFileError: at once, with line 0, when ``path`` does not exist ("no such file");
            while iterating, when the file cannot be opened, when protobuf support is missing,
            or on the first bad input with ``strict``.
    """
    if path != "-" and not os.path.exists(path):
        raise TraceFileError(path, 0, "no such file")
    reader = _TraceReader(path, strict=strict, on_error=on_error, progress=progress)
    return reader.spans()


class _ReadError(Exception):
    """The underlying stream failed (I/O error, corrupt or truncated gzip)."""


class _BadRecord(Exception):
    """One line, document or message is bad; ``line_offset`` counts from its first line."""

    def __init__(self, message: str, line_offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line_offset = line_offset


class _Record(NamedTuple):
    line: int
    data: bytes
    is_json: bool


class _ByteSource(Protocol):
    """Anything with a binary ``read``: files, stdin, ``GzipFile``, ``BytesIO``."""

    def read(self, size: int = -1, /) -> bytes | None: ...


class _Source(io.RawIOBase):
    """Raw stream over ``source`` that counts bytes read and can prefetch without consuming.

    Read failures of any kind (I/O, gzip, zlib) surface as ``_ReadError``.
    """

    def __init__(self, source: _ByteSource) -> None:
        super().__init__()
        self._read_some: Callable[[int], bytes | None] = getattr(source, "read1", source.read)
        self._pending = b""
        self.count = 0
        """Bytes read from ``source`` so far."""

    def readable(self) -> bool:
        """Return True: this stream is readable."""
        return True

    def prefetch(self, size: int) -> bytes:
        """Return up to ``size`` first unread bytes (fewer only at end of input), keeping them."""
        while len(self._pending) < size:
            chunk = self._read(size - len(self._pending))
            if not chunk:
                break
            self._pending += chunk
        return self._pending

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` with prefetched bytes first, then with one read of the source."""
        view = memoryview(buffer).cast("B")
        if self._pending:
            data, self._pending = self._pending[: len(view)], self._pending[len(view) :]
        else:
            data = self._read(len(view))
        view[: len(data)] = data
        return len(data)

    def _read(self, size: int) -> bytes:
        try:
            data = self._read_some(size) or b""
        except _READ_ERRORS as exc:
            raise _ReadError(str(exc) or type(exc).__name__) from exc
        self.count += len(data)
        return data


@contextlib.contextmanager
def _open_binary(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` unbuffered for reading, or borrow binary stdin for ``"-"`` (never closed)."""
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise TraceFileError(path, 0, "no such file") from None
    except OSError as exc:
        raise TraceFileError(path, 0, exc.strerror or str(exc)) from None
    with file:
        yield file


class _TraceReader:
    """One pass over one trace file; holds the error policy and the progress state."""

    def __init__(
        self,
        path: str,
        *,
        strict: bool,
        on_error: Callable[[TraceFileError], None] | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        self._path = path
        self._strict = strict
        self._on_error = on_error
        self._progress = progress
        self._reported_bytes = 0
        self._line = 0
        """Line (or message) being read, for errors raised by the stream itself."""

    def spans(self) -> Iterator[SpanRecord]:
        """Yield the spans of the file, reporting bad records and read errors."""
        with _open_binary(self._path) as raw:
            source = _Source(raw)
            try:
                for record in self._records(source):
                    yield from self._decode(record)
                    self._tick(source.count)
            except _ReadError as exc:
                self._fail(self._line, f"cannot read: {exc}")
            if self._progress is not None:
                self._progress(source.count)

    def _fail(self, line: int, message: str) -> None:
        error = TraceFileError(self._path, line, message)
        if self._strict:
            raise error
        if self._on_error is not None:
            self._on_error(error)
        else:
            _LOGGER.warning("%s", error)

    def _tick(self, consumed: int) -> None:
        if self._progress is not None and consumed - self._reported_bytes >= _CHUNK_BYTES:
            self._reported_bytes = consumed
            self._progress(consumed)

    def _records(self, source: _Source) -> Iterator[_Record]:
        """Sniff the content (gzip, JSON, protobuf) and yield its records."""
        content = source
        if source.prefetch(len(_GZIP_MAGIC)) == _GZIP_MAGIC:
            content = _Source(gzip.GzipFile(fileobj=io.BufferedReader(source), mode="rb"))
        head = content.prefetch(_SNIFF_BYTES)
        if not head:
            return
        stream = io.BufferedReader(content, _CHUNK_BYTES)
        if _looks_like_json(head):
            yield from self._json_records(stream)
        elif head.startswith(_PROTO_REQUEST_TAG):
            yield _Record(0, stream.read(), is_json=False)
        else:
            yield from self._framed_records(stream)

    def _json_records(self, stream: BinaryIO) -> Iterator[_Record]:
        """Yield each non-blank line, or the whole document if the first line leaves it open."""
        lines = self._lines(stream)
        first = next(lines, None)
        if first is None:
            return
        line_no, line = first
        if _opens_document(line):
            yield _Record(line_no, line + stream.read(), is_json=True)
            return
        yield _Record(line_no, line, is_json=True)
        for line_no, line in lines:
            yield _Record(line_no, line, is_json=True)

    def _lines(self, stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
        """Yield ``(number, line)`` of each non-blank line, tracking the line being read."""
        self._line = 1
        while line := stream.readline():
            if not line.isspace():
                yield self._line, line
            self._line += 1

    def _framed_records(self, stream: BinaryIO) -> Iterator[_Record]:
        """Yield the messages of the Collector's length-prefixed ``format: proto`` framing."""
        self._line = 1
        while header := stream.read(_FRAME_HEADER.size):
            if len(header) < _FRAME_HEADER.size:
                self._fail(self._line, "truncated length prefix")
                return
            (size,) = _FRAME_HEADER.unpack(header)
            if size > _MAX_FRAME_BYTES:
                self._fail(self._line, _UNRECOGNISED)
                return
            data = _read_up_to(stream, size)
            if len(data) < size:
                self._fail(self._line, f"truncated message: expected {size} bytes, got {len(data)}")
                return
            yield _Record(self._line, data, is_json=data.startswith(b"{"))
            self._line += 1

    def _decode(self, record: _Record) -> list[SpanRecord]:
        """Return the good spans of one record, reporting what is bad in it.

        A record whose spans are partly malformed keeps its good spans (as ``serve`` accepts
        such a request with partial success) and reports the others.
        """
        try:
            spans, problem = (_decode_json(record.data) if record.is_json
                              else _decode_proto(record.data))
        except _BadRecord as exc:
            self._fail(record.line + exc.line_offset, exc.message)
            return []
        except ImportError:
            raise TraceFileError(self._path, 0, _PROTO_MISSING) from None
        if problem:
            self._fail(record.line, problem)
        return spans


def _looks_like_json(head: bytes) -> bool:
    """Return True when the first bytes are JSON text rather than protobuf."""
    text = head.removeprefix(_UTF8_BOM).lstrip(_JSON_SPACE)
    if not text:
        return True
    return text[:1] in (b"{", b"[") and _CONTROL_RE.search(text) is None


def _opens_document(line: bytes) -> bool:
    """Return True when ``line`` is the start of a JSON document that continues on later lines."""
    try:
        text = line.removeprefix(_UTF8_BOM).decode()
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text.rstrip())
    except (ValueError, RecursionError):
        return False
    return False


def _read_up_to(stream: BinaryIO, size: int) -> bytes:
    """Return ``size`` bytes, or fewer at end of input, reading at most 1 MiB at a time."""
    parts = []
    while size > 0 and (chunk := stream.read(min(size, _CHUNK_BYTES))):
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _parse_json(data: bytes) -> Any:
    """Return the decoded JSON; on failure raise ``_BadRecord`` with the stdlib's message."""
    with contextlib.suppress(ValueError, RecursionError):
        return loads_json(data)  # orjson when it reads what json.loads would; the message below
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        message = f"invalid JSON: {exc.msg} at column {exc.colno}"
        raise _BadRecord(message, exc.lineno - 1) from None
    except RecursionError:
        raise _BadRecord("invalid JSON: nested too deeply") from None
    except ValueError as exc:
        raise _BadRecord(f"invalid JSON: {exc}") from None


def _decode_json(data: bytes) -> tuple[list[SpanRecord], str]:
    """Return the good spans of one OTLP/JSON request (or JSON array of them).

    Also returns the problem with the others ("" when every span is good).
    """
    doc = _parse_json(data)
    if not isinstance(doc, list):
        return _spans_of_json_request(doc)
    spans, problems = [], []
    for index, request in enumerate(doc):
        try:
            good, problem = _spans_of_json_request(request)
        except _BadRecord as exc:
            raise _BadRecord(f"element {index}: {exc.message}") from None
        spans.extend(good)
        if problem:
            problems.append(f"element {index}: {problem}")
    return spans, "; ".join(problems)


def _spans_of_json_request(request: Any) -> tuple[list[SpanRecord], str]:
    try:
        decoded = decode_json_spans(request)
    except FieldError as exc:
        raise _BadRecord(str(exc)) from None
    return _partial(decoded)


def _partial(decoded: DecodedSpans) -> tuple[list[SpanRecord], str]:
    """Keep the good spans of a partly malformed record (as serve's partial success does)."""
    spans, rejected = decoded.spans, decoded.rejected
    if not rejected:
        return spans, ""
    if not spans:
        raise _BadRecord(f"all {rejected} spans rejected: {decoded.problem}")
    return spans, (f"rejected {rejected} malformed span(s), kept {len(spans)}; first: "
                   f"{decoded.problem}")


def _decode_proto(data: bytes) -> tuple[list[SpanRecord], str]:
    """Return the spans of one serialized ``ExportTraceServiceRequest``.

    Raises:
        ImportError: when opentelemetry-proto is not installed.
        _BadRecord: when the message does not parse or holds malformed ids.
    """
    # Lazy: protobuf comes with the optional "receiver" extra; JSON files never need it.
    decode_error: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(data)
    except (decode_error, ValueError, RecursionError) as exc:
        raise _BadRecord(f"invalid protobuf: {exc}") from None
    return _partial(decode_proto_spans(request))
