"""The bytes of a trace file: opened, counted, prefetched, and read as lines or sized reads.

``_Source`` counts (and caps) what is read and lets the content be sniffed before it is
consumed; ``_LineReader`` yields the non-blank lines of a stream, skipping blank runs in C;
``_read_up_to`` reads one protobuf frame.
"""

from __future__ import annotations

import contextlib
import io
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO, Protocol

from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay._compressed import TooLarge

_CHUNK_BYTES = 1 << 20
"""Read size, largest read of a protobuf frame, and progress-report granularity."""
_READ_ERRORS = (OSError, EOFError, zlib.error)


class _ReadError(Exception):
    """The underlying stream failed (I/O error, corrupt or truncated gzip)."""


class _ByteSource(Protocol):
    """Anything with a binary ``read``: files, stdin, ``GzipFile``, ``BytesIO``."""

    def read(self, size: int = -1, /) -> bytes | None: ...


class _Source(io.RawIOBase):
    """Raw stream over ``source`` that counts bytes read and can prefetch without consuming.

    Read failures of any kind (I/O, gzip, zlib, zstd) surface as ``_ReadError``; reading past
    ``limit`` bytes raises ``TooLarge``, after the bytes within it were handed on (so the lines
    that end before the limit are read).
    """

    def __init__(self, source: _ByteSource, limit: int | None = None) -> None:
        super().__init__()
        self._read_some: Callable[[int], bytes | None] = getattr(source, "read1", source.read)
        self._pending = b""
        self._limit = limit
        self._over = False
        """True once ``source`` gave more than ``limit`` bytes: the next read raises."""
        self.count = 0
        """Bytes read from ``source`` so far (at most ``limit``)."""

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
        if self._over:
            raise TooLarge(self._limit or 0)
        try:
            data = self._read_some(size) or b""
        except _READ_ERRORS as exc:
            raise _ReadError(str(exc) or type(exc).__name__) from exc
        if self._limit is not None and self.count + len(data) > self._limit:
            self._over = True
            data = data[:self._limit - self.count]  # the part within the limit, handed on
            if not data:
                raise TooLarge(self._limit)
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


class _LineCounter(Protocol):
    """The reader ``_LineReader.lines`` reports to: the line being read, the lines skipped."""

    _line: int

    def skipped_line(self, line: int) -> None: ...


class _LineReader:
    """The non-blank lines of a binary stream, each at most ``max_line`` bytes, in chunks.

    Blank runs are found with ``bytes.lstrip`` and newlines counted with ``bytes.count``, both
    in C, so a gigabyte of newlines is skipped at memory speed; a line that grows past
    ``max_line`` is dropped as it is read (reported once) and reading resumes after it.
    """

    def __init__(self, stream: BinaryIO, max_line: int) -> None:
        self._stream = stream
        self._read_some: Callable[[int], bytes] = getattr(stream, "read1", stream.read)
        """One read of the source at most: a read error comes after the lines before it."""
        self._max_line = max_line
        self._chunk = b""
        self._at = 0

    def lines(self, reader: _LineCounter) -> Iterator[tuple[int, bytes]]:
        """Yield ``(number, line)``; keep ``reader._line`` on the line being read."""
        while self._next_start(reader):
            number = reader._line
            line = self._take_line()
            reader._line += 1
            if line is None:
                reader.skipped_line(number)
            elif not line.isspace():
                yield number, line

    def rest(self, size: int) -> bytes:
        """Return up to ``size`` bytes after the last line returned (the rest of a document)."""
        head = self._chunk[self._at:self._at + size]
        self._at += len(head)
        return head + self._stream.read(size - len(head)) if size > len(head) else head

    def _next_start(self, reader: _LineCounter) -> bool:
        """Skip blank bytes, counting their newlines; return False at the end of the input."""
        while True:
            end = _blank_end(self._chunk, self._at)
            reader._line += self._chunk.count(b"\n", self._at, end)
            self._at = end
            if end < len(self._chunk):
                return True
            if not self._refill():
                return False

    def _refill(self) -> bool:
        self._chunk, self._at = self._read_some(_CHUNK_BYTES), 0
        return bool(self._chunk)

    def _take_line(self) -> bytes | None:
        """Return the line starting here (newline included), or None when it is too long."""
        parts: list[bytes] = []
        held = 0
        while True:
            newline = self._chunk.find(b"\n", self._at)
            stop = len(self._chunk) if newline < 0 else newline + 1
            held += stop - self._at
            if held <= self._max_line:
                parts.append(self._chunk[self._at:stop])
            else:
                parts.clear()  # too long: read on to its end, holding nothing
            self._at = stop
            if newline >= 0 or not self._refill():
                return b"".join(parts) if held <= self._max_line else None


def _blank_end(chunk: bytes, at: int) -> int:
    """Return where the blank bytes (ASCII whitespace) starting at ``at`` end in ``chunk``.

    ``lstrip`` of windows that double in size: a line start costs one small slice, a megabyte
    of blank bytes a few C scans.
    """
    size = 64
    while at < len(chunk):
        window = chunk[at:at + size]
        rest = window.lstrip()
        if rest:
            return at + len(window) - len(rest)
        at += len(window)
        size = min(2 * size, _CHUNK_BYTES)
    return len(chunk)


def _read_up_to(stream: BinaryIO, size: int) -> bytes:
    """Return ``size`` bytes, or fewer at end of input, reading at most 1 MiB at a time."""
    parts = []
    while size > 0 and (chunk := stream.read(min(size, _CHUNK_BYTES))):
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _skip_up_to(stream: BinaryIO, size: int) -> int:
    """Read past ``size`` bytes, or fewer at end of input, 1 MiB at a time; return how many."""
    skipped = 0
    while skipped < size and (chunk := stream.read(min(size - skipped, _CHUNK_BYTES))):
        skipped += len(chunk)
    return skipped
