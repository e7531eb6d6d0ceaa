"""A trace file's content as records: JSON lines or a document, one protobuf message, frames.

``_TraceReader`` inherits :class:`ContentRecords`: ``_records`` sniffs the (decompressed)
content and yields its records, each a JSON line, a whole JSON document or a protobuf message
(one, or each of the Collector's length-prefixed ``format: proto`` frames), for the reader to
decode.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from otel_loopguard.replay._compressed import (
    BadMessage,
    TooLarge,
    compression_of,
    decompress_message,
    format_bytes,
    open_decompressed,
)
from otel_loopguard.replay._decode import _is_request_line, _opens_document
from otel_loopguard.replay._sniff import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    SNIFF_BYTES,
    WIDE_SNIFF_BYTES,
    Content,
    content_of,
    has_json_lines,
    needs_wide_look,
    unrecognised,
)
from otel_loopguard.replay._source import (
    _CHUNK_BYTES,
    _LineReader,
    _read_up_to,
    _skip_up_to,
    _Source,
)

__all__ = ["ContentRecords"]


class _Record(NamedTuple):
    line: int
    data: bytes
    is_json: bool
    located: bool = False
    """True for a JSON line: its spans can be told by ``line``."""
    maybe_lines: bool = False
    """Protobuf that may be JSON Lines after a damaged line: read so if it does not parse."""


class ContentRecords:
    """``_TraceReader``'s records of a file's content (a base: it shares the reader's state)."""

    _max_line: int
    _limit: int
    _expanded: int
    _line: int

    if TYPE_CHECKING:  # the reader's
        def _fail(self, line: int, message: str) -> None: ...

    def _records(self, source: _Source) -> Iterator[_Record]:
        """Sniff the content (gzip, zstd, JSON, protobuf) and yield its records."""
        content = source
        kind = compression_of(source.prefetch(4))
        if kind is not None:
            content = _Source(open_decompressed(kind, source), self._limit)
        head = content.prefetch(SNIFF_BYTES)
        if not head:
            return
        if needs_wide_look(head):
            head = content.prefetch(WIDE_SNIFF_BYTES)
        stream = io.BufferedReader(content, _CHUNK_BYTES)
        found = content_of(head)
        if found is Content.JSON:
            yield from self._json_records(stream)
        elif found is Content.PROTO_REQUEST:
            data = self._whole(stream.read(self._max_line + 1), "protobuf message")
            if data is not None:
                yield _Record(0, data, is_json=False, maybe_lines=has_json_lines(head))
        elif found is Content.PROTO_FRAMED:
            yield from self._framed_records(stream)
        else:
            self._fail(0, unrecognised(head))

    def _json_records(self, stream: BinaryIO) -> Iterator[_Record]:
        """Yield each non-blank line, or the whole document if the first line leaves it open."""
        reader = _LineReader(stream, self._max_line)
        self._line = 1
        lines = reader.lines(self)
        first = next(lines, None)
        if first is None:
            return
        line_no, line = first
        if _opens_document(line):
            second = next(lines, None)
            if second is None or not _is_request_line(line, second[1]):
                head = line if second is None else (
                    line + b"\n" * (second[0] - line_no - 1) + second[1])  # errors' lines hold
                document = self._whole(head + reader.rest(self._max_line + 1 - len(head)),
                                       "JSON document")
                if document is not None:
                    yield _Record(line_no, document, is_json=True)
                return
            # JSON Lines whose first line was cut short (it ends where a value goes on)
            yield _Record(line_no, line, is_json=True, located=True)
            line_no, line = second
        yield _Record(line_no, line, is_json=True, located=True)
        for line_no, line in lines:
            yield _Record(line_no, line, is_json=True, located=True)

    def _whole(self, data: bytes, what: str) -> bytes | None:
        """Return ``data`` when within ``max_line``; else report it (line 0) and return None."""
        if len(data) <= self._max_line:
            return data
        self._fail(0, f"{what} larger than the {format_bytes(self._max_line)} limit "
                      "(--max-line-bytes); not read")
        return None

    def skipped_line(self, line: int) -> None:
        """Report a line longer than ``max_line`` (skipped as it was read)."""
        self._fail(line, f"line longer than the {format_bytes(self._max_line)} limit "
                         "(--max-line-bytes); skipped")

    def _framed_records(self, stream: BinaryIO) -> Iterator[_Record]:
        """Yield the messages of the Collector's length-prefixed ``format: proto`` framing."""
        self._line = 1
        while header := stream.read(FRAME_HEADER.size):
            if len(header) < FRAME_HEADER.size:
                self._fail(self._line, "truncated length prefix")
                return
            (size,) = FRAME_HEADER.unpack(header)
            if size == 0 or size > MAX_FRAME_BYTES:  # zero bytes: a file preallocated, not written
                self._fail(self._line, f"{unrecognised(header)} from here on")
                return
            if size > self._max_line:  # skipped as it is read, never held
                got = _skip_up_to(stream, size)
                if got == size:
                    self._fail(self._line, f"message larger than the "
                                           f"{format_bytes(self._max_line)} limit "
                                           "(--max-line-bytes); skipped")
                    self._line += 1
                    continue
                data = b""
            else:
                data = _read_up_to(stream, size)
                got = len(data)
            if got < size:
                self._fail(self._line, f"truncated message: expected {size} bytes, got {got}")
                return
            record = self._framed_record(data)
            if record is not None:
                yield record
            self._line += 1

    def _framed_record(self, data: bytes) -> _Record | None:
        """Return one framed message as a record, decompressed when the exporter compressed it.

        A message that does not decompress is reported and None returned.
        """
        try:
            plain = decompress_message(data, min(self._limit - self._expanded,
                                                 self._max_line))
        except TooLarge as exc:
            if exc.limit < self._max_line:
                raise  # the file's cap, not the message's
            self._fail(self._line, f"message decompresses to more than the "
                                   f"{format_bytes(self._max_line)} limit (--max-line-bytes)")
            return None
        except BadMessage as exc:
            self._fail(self._line, str(exc))
            return None
        if plain is not data:
            self._expanded += len(plain)
        return _Record(self._line, plain, is_json=plain.lstrip()[:1] in (b"{", b"["))
