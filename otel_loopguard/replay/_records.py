"""A trace file's content as records: JSON lines or a document, one protobuf message, frames.

``_TraceReader`` inherits :class:`ContentRecords`: ``_records`` sniffs the (decompressed)
content and yields its records, each a JSON line, a whole JSON document or a protobuf message
(one, or each of the Collector's length-prefixed ``format: proto`` frames), for the reader to
decode.
"""

from __future__ import annotations

import io
import itertools
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


_LOOK_AHEAD_LINES = 16
"""Lines read after a first line that leaves a document open, to tell JSON Lines cut short."""


def _joined(lines: list[tuple[int, bytes]]) -> bytes:
    """Return numbered lines (each with its newline) as text again, blank lines put back.

    So the line numbers of a document's errors hold.
    """
    parts = [lines[0][1]]
    for (before, _), (number, line) in itertools.pairwise(lines):
        parts += (b"\n" * (number - before - 1), line)
    return b"".join(parts)


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
            head = self._wide_look(content)
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

    def _wide_look(self, content: _Source) -> bytes:
        """Return the first bytes of content whose first line is long and not recognised.

        Up to ``WIDE_SNIFF_BYTES``, then, while no later line is seen to start a JSON value,
        eight times more up to ``max_line`` (a longer damaged first line is skipped as a JSON
        line is), so the length of the damage does not decide whether the good lines after it
        are read.
        """
        size = WIDE_SNIFF_BYTES
        head = content.prefetch(size)
        while content_of(head) is Content.UNKNOWN and len(head) == size < self._max_line:
            size = min(8 * size, self._max_line + 1)
            head = content.prefetch(size)
        return head

    def _json_records(self, stream: BinaryIO) -> Iterator[_Record]:
        """Yield each non-blank line, or the whole document if the first line leaves it open.

        A first line that leaves a document open is JSON Lines cut short when one of the next
        ``_LOOK_AHEAD_LINES`` lines is a whole OTLP request (no line of a pretty-printed
        object is one): then every line is read on its own, the damaged ones reported one by
        one.
        """
        reader = _LineReader(stream, self._max_line)
        self._line = 1
        lines = reader.lines(self)
        first = next(lines, None)
        if first is None:
            return
        read = [first]
        if _opens_document(first[1]):
            lines_cut_short = False
            for later in lines:
                read.append(later)
                lines_cut_short = _is_request_line(first[1], later[1])
                if lines_cut_short or len(read) > _LOOK_AHEAD_LINES:
                    break
            if not lines_cut_short:
                head = _joined(read)
                document = self._whole(head + reader.rest(self._max_line + 1 - len(head)),
                                       "JSON document")
                if document is not None:
                    yield _Record(first[0], document, is_json=True)
                return
        for line_no, line in read:
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
