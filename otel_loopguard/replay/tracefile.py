"""Streaming reader of OTLP trace files: JSON Lines, JSON or protobuf; plain, gzip or zstd.

The reader sniffs the content, not the file name:

* gzip (``1f 8b``) and zstandard (``28 b5 2f fd``) are recognised by their magic bytes and
  decompressed on the fly, at most ``max_decompressed_bytes`` (1 GiB) per file;
* text that starts with ``{`` or ``[`` is OTLP/JSON. It is read line by line as JSON Lines
  (the Collector ``file`` exporter format, one ``ExportTraceServiceRequest`` per line), unless
  the first line opens a document that does not end on it (pretty-printed JSON), in which case
  the whole document is read at once (unless the next line is a whole request: then the
  first line is a JSON line cut short; documents written back to back, as ``jq .`` writes
  them, are each read). A JSON array of requests is accepted wherever a request is.
  Text whose first line is damaged (binary bytes) but whose later lines are JSON is read as JSON
  Lines too, so that only the damaged lines are lost;
* binary content that starts with the tag of ``resource_spans`` (``0x0a``) is one serialized
  ``ExportTraceServiceRequest`` (read as JSON Lines instead when it does not parse but its
  later lines do: a newline, then a damaged line; as an ``ExportLogsServiceRequest``, which
  starts alike, when none of its spans has ids and it reads as good log records);
* binary content that starts with a plausible length prefix is the Collector's
  ``format: proto`` framing: each message (protobuf, or JSON when the exporter compresses, each
  message then compressed on its own) preceded by its length as a 4-byte big-endian integer.
  Anything else is reported as unrecognised.

Memory is bounded by ``max_line_bytes`` (64 MiB), the largest line, document or message held:
a longer one is reported and skipped as it is read, never held whole. Runs of blank lines
are skipped at C speed, so a file of them (gzip makes a gigabyte of newlines out of a
megabyte) costs no more than reading it.

The bytes are read by ``replay._source`` (a counted source, then lines or sized reads) and
cut into records by ``replay._records``; each record is parsed and decoded by
``replay._decode``.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator
from itertools import chain
from typing import TYPE_CHECKING

from otel_loopguard._safe_text import escape_unsafe
from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES, TooLarge
from otel_loopguard.replay._decode import (
    _BadRecord,
    _decode_json,
    _decode_proto,
    split_documents,
)
from otel_loopguard.replay._records import ContentRecords, _Record
from otel_loopguard.replay._source import _CHUNK_BYTES, _open_binary, _ReadError, _Source

if TYPE_CHECKING:
    from otel_loopguard.types import SpanRecord

__all__ = ["DEFAULT_MAX_DECOMPRESSED_BYTES", "DEFAULT_MAX_LINE_BYTES", "iter_located_spans",
           "iter_span_batches", "iter_spans"]

_LOGGER = logging.getLogger(__name__)
DEFAULT_MAX_LINE_BYTES = 64 << 20
"""The largest line, JSON document or protobuf message held (64 MiB)."""
_PROTO_MISSING = (
    "reading OTLP protobuf needs opentelemetry-proto, a dependency of otel-loopguard: "
    "pip install opentelemetry-proto"
)


def iter_spans(
    path: str,
    *,
    strict: bool = False,
    on_error: Callable[[TraceFileError], None] | None = None,
    progress: Callable[[int], None] | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[SpanRecord]:
    """Yield every span of an OTLP trace file, streaming; the file is read line by line.

    Each bad line (or JSON document, or protobuf message) becomes one ``TraceFileError`` naming
    its line, e.g. ``traces.jsonl:17: invalid JSON: Expecting ',' delimiter at column 40``; a bad
    line yields no spans and reading goes on with the next one. For framed protobuf files the
    ``line`` of an error is the 1-based message number; it is 0 when the whole file is at fault
    (an unreadable single protobuf message, unrecognised content, a file too large once
    decompressed). Read errors such as truncated gzip end the reading of the file.

    Args:
        path: the file, or ``"-"`` for standard input (binary, possibly gzip).
        strict: raise the first error instead of reporting it and continuing.
        on_error: called with each error when not ``strict``; when None, errors are logged as
            warnings on the ``otel_loopguard.replay.tracefile`` logger.
        progress: called with the number of (compressed) bytes consumed so far, about every
            1 MiB and once at the end, to drive a progress bar.
        max_decompressed_bytes: a compressed file (or message) that expands to more than this
            is reported as too large (line 0) and reading it stops there, after the lines
            within it; default 1 GiB.
        max_line_bytes: a longer line or framed message is reported and skipped (reading goes
            on with the next one), a longer JSON document or single protobuf message is
            reported and reading the file stops; never held whole. Default 64 MiB.

    Returns:
        A lazy iterator of span records, in file order; an empty file yields nothing.

    Raises:
        TraceFileError: at once, with line 0, when ``path`` does not exist ("no such file");
            while iterating, when the file cannot be opened, when protobuf or zstd support is
            missing, or on the first bad input with ``strict``.
    """
    batches = iter_span_batches(path, strict=strict, on_error=on_error, progress=progress,
                                max_decompressed_bytes=max_decompressed_bytes,
                                max_line_bytes=max_line_bytes)
    return chain.from_iterable(spans for _, spans in batches)


def iter_located_spans(
    path: str,
    *,
    strict: bool = False,
    on_error: Callable[[TraceFileError], None] | None = None,
    progress: Callable[[int], None] | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, SpanRecord]]:
    """Yield ``(line, span)`` for every span of a trace file, as :func:`iter_spans` does.

    ``line`` is the 1-based line of the JSON line that held the span, or 0 when the span came
    from a JSON document read whole or from protobuf.
    """
    batches = iter_span_batches(path, strict=strict, on_error=on_error, progress=progress,
                                max_decompressed_bytes=max_decompressed_bytes,
                                max_line_bytes=max_line_bytes)
    return ((line, span) for line, spans in batches for span in spans)


def iter_span_batches(
    path: str,
    *,
    strict: bool = False,
    on_error: Callable[[TraceFileError], None] | None = None,
    progress: Callable[[int], None] | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    agents: AgentRecords | None = None,
) -> Iterator[tuple[int, list[SpanRecord]]]:
    """Yield ``(line, spans)`` for each record of a trace file that holds good spans.

    The spans of :func:`iter_located_spans`, a record (a JSON line, a JSON document, a
    protobuf message) at a time: ``check`` hands them on without a generator step per span.
    ``agents`` holds the coding agents' sessions (the latest model of each, for templates);
    pass the same one for every file of a check, as ``serve`` keeps one for every request,
    so a session whose events a rotation spread over several files keeps its template.
    Default: one of this file's own.
    """
    if path != "-" and not os.path.exists(path):
        raise TraceFileError(path, 0, "no such file")
    reader = _TraceReader(path, strict=strict, on_error=on_error, progress=progress,
                          limit=max_decompressed_bytes, max_line=max_line_bytes, agents=agents)
    return reader.batches()


class _TraceReader(ContentRecords):
    """One pass over one trace file; holds the error policy and the progress state."""

    def __init__(
        self,
        path: str,
        *,
        strict: bool,
        on_error: Callable[[TraceFileError], None] | None,
        progress: Callable[[int], None] | None,
        limit: int,
        max_line: int = DEFAULT_MAX_LINE_BYTES,
        agents: AgentRecords | None = None,
    ) -> None:
        self._path = path
        self._max_line = max_line
        self._strict = strict
        self._on_error = on_error
        self._progress = progress
        self._limit = limit
        self._expanded = 0
        """Bytes that compressed messages of framed input expanded to so far."""
        self._reported_bytes = 0
        self._deferred: list[tuple[int, str]] | None = None
        """Errors held back while a guess is tried (see ``_json_lines_in``)."""
        self._line = 0
        """Line (or message) being read, for errors raised by the stream itself."""
        self._agents = AgentRecords() if agents is None else agents
        """The coding agents' sessions (log events and tool spans), of this file or the check."""

    def batches(self) -> Iterator[tuple[int, list[SpanRecord]]]:
        """Yield ``(line, spans)`` per record of the file, reporting bad records and errors."""
        with _open_binary(self._path) as raw:
            source = _Source(raw)
            try:
                for record in self._records(source):
                    spans = self._decode(record)
                    if spans:
                        yield record.line if record.located else 0, spans
                    self._tick(source.count)
            except _ReadError as exc:
                self._fail(self._line, f"cannot read: {exc}")
            except TooLarge:  # the limit is per file, whatever part of it was left
                self._fail(0, f"too large: {TooLarge(self._limit)}")
            except ImportError as exc:  # zstd support is missing: this file is not read
                self._fail(0, str(exc))
            if self._progress is not None:
                self._progress(source.count)

    def _fail(self, line: int, message: str) -> None:
        if self._deferred is not None:
            self._deferred.append((line, message))
            return
        error = TraceFileError(self._path, line, message)
        if self._strict:
            raise error
        if self._on_error is not None:
            self._on_error(error)
        else:
            _LOGGER.warning("%s", escape_unsafe(str(error)))

    def _tick(self, consumed: int) -> None:
        if self._progress is not None and consumed - self._reported_bytes >= _CHUNK_BYTES:
            self._reported_bytes = consumed
            self._progress(consumed)

    def _decode(self, record: _Record) -> list[SpanRecord]:
        """Return the good spans of one record, reporting what is bad in it.

        A record whose spans are partly malformed keeps its good spans (as ``serve`` accepts
        such a request with partial success) and reports the others.
        """
        try:
            spans, problem = (_decode_json if record.is_json else _decode_proto)(
                record.data, self._agents)
        except _BadRecord as exc:
            if record.maybe_lines:
                return self._json_lines_in(record.data, exc.message)
            if exc.extra_data:
                return self._documents_in(record)
            self._fail(record.line + exc.line_offset, exc.message)
            return []
        except ImportError:
            if record.maybe_lines:
                return self._json_lines_in(record.data, _PROTO_MISSING)
            raise TraceFileError(self._path, 0, _PROTO_MISSING) from None
        except Exception as exc:  # a decoder failing on odd input loses this record, not the file
            self._fail(record.line, f"cannot decode: {type(exc).__name__}: {exc}")
            return []
        if problem:
            self._fail(record.line, problem)
        return spans

    def _documents_in(self, record: _Record) -> list[SpanRecord]:
        """Return the spans of JSON documents written back to back (``jq .`` output).

        Each document is decoded, and its errors reported, as a record of its own that starts
        on its own line; text after the last whole document is reported where it starts.
        """
        documents, error = split_documents(record.data)
        spans: list[SpanRecord] = []
        for offset, data in documents:
            spans += self._decode(_Record(record.line + offset, data, is_json=True,
                                          located=record.located))
        if error is not None:
            self._fail(record.line + error.line_offset, error.message)
        return spans

    def _json_lines_in(self, data: bytes, proto_error: str) -> list[SpanRecord]:
        """Return the spans of ``data`` read as JSON Lines (a newline, then a damaged line).

        When no line holds a span, ``data`` was protobuf after all: ``proto_error`` is reported
        instead of one error per "line".
        """
        self._deferred = []
        try:
            spans = [span for record in self._json_records(io.BufferedReader(io.BytesIO(data)))
                     for span in self._decode(record)]
        finally:
            deferred, self._deferred = self._deferred, None
        if not spans:
            deferred = [(0, proto_error)]
        for line, message in deferred:
            self._fail(line, message)
        return spans
