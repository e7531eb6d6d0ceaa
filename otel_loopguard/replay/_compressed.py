"""Decompression of trace files, capped: gzip and zstandard, whole files or single messages.

The OpenTelemetry Collector's ``file`` exporter with ``compression: zstd`` writes either one
zstandard stream (with its native-compression feature gate) or, by default, each message
compressed on its own inside the length-prefixed framing; both are read here. Decompressed
bytes are counted against a cap so that a small file expanding to gigabytes stops early.
"""

from __future__ import annotations

import io
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any, Final

__all__ = ["DEFAULT_MAX_DECOMPRESSED_BYTES", "GZIP_MAGIC", "ZSTD_MAGIC", "ZSTD_MISSING",
           "BadMessage", "TooLarge", "compression_of", "decompress_message", "format_bytes",
           "open_decompressed"]

GZIP_MAGIC: Final = b"\x1f\x8b"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 1 << 30
"""1 GiB per file: far above a real trace file, far below what takes a machine down."""
ZSTD_MISSING: Final = "reading .zst needs the zstd extra: pip install 'zstandard>=0.22'"
_CHUNK_BYTES: Final = 1 << 20
_FEED_BYTES: Final = 1 << 10
_SMALL_FEED_BYTES: Final = 32
_STEP_BYTES: Final = 1 << 20


class TooLarge(Exception):
    """More than ``limit`` bytes came out of decompression."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decompressed size exceeds the limit of {format_bytes(limit)}")
        self.limit = limit


class BadMessage(Exception):
    """One compressed message does not decompress (corrupt or truncated)."""


def format_bytes(size: int) -> str:
    """Return ``size`` in the largest binary unit that divides it, e.g. ``1 GiB``, ``1536 KiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


def compression_of(head: bytes) -> str | None:
    """Return ``"gzip"`` or ``"zstd"`` from the magic bytes at the start of ``head``, else None."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def open_decompressed(kind: str, source: Any) -> Any:
    """Return a binary reader of the decompressed content of ``source`` (gzip or zstd).

    Read errors of the decompressor surface as ``OSError``.

    Raises:
        ImportError: for zstd when ``zstandard`` is not installed (message: ``ZSTD_MISSING``).
    """
    if kind == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=io.BufferedReader(source), mode="rb")
    return _ZstdStream(source.read, _zstandard())


def decompress_message(data: bytes, limit: int) -> bytes:
    """Return one message decompressed if it starts with gzip or zstd magic bytes, else as is.

    Raises:
        TooLarge: when it decompresses to more than ``limit`` bytes (decompression stops there).
        BadMessage: when it is corrupt or truncated.
        ImportError: for zstd when ``zstandard`` is not installed.
    """
    kind = compression_of(data)
    if kind is None:
        return data
    if kind == "gzip":
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error as exc:
            raise BadMessage(f"invalid gzip message: {exc}") from None
        if len(out) > limit:
            raise TooLarge(limit)
        if not inflater.eof:
            raise BadMessage("truncated gzip message")
        return out
    reader = _ZstdStream(io.BytesIO(data).read, _zstandard())
    parts, size = [], 0
    try:
        while chunk := reader.read(_CHUNK_BYTES):
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(limit)
    except OSError as exc:
        raise BadMessage(f"invalid zstd message: {exc}") from None
    return b"".join(parts)


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        raise ImportError(ZSTD_MISSING) from None
    return zstandard


class _ZstdStream:
    """Binary reader of the frames of a zstandard stream, one after the other.

    The compressed input is fed 32 bytes at a time, doubling up to 1 KiB while a step yields
    less than 1 MiB and back to 32 bytes when it yields more, so a step yields about 1 MiB
    and never more than 32 MiB (a zstandard block expands at most 32,768-fold); the output of
    a step is handed out as it came, never joined into one copy. A stream that ends inside a
    frame, or any corrupt data, raises ``OSError`` like gzip does.
    """

    def __init__(self, read: Callable[[int], bytes | None], zstandard: Any) -> None:
        self._read = read
        self._zstandard = zstandard
        self._frame: Any = None
        self._parts: deque[bytes] = deque()
        self._at = 0
        self._feed = _SMALL_FEED_BYTES

    def read(self, size: int = -1, /) -> bytes:
        """Return up to ``size`` decompressed bytes (all that one step gives when negative)."""
        while not self._parts:
            data = self._read(self._feed)
            if not data:
                if self._frame is not None:
                    raise OSError("truncated zstd data: the stream ends inside a frame")
                return b""
            self._parts.extend(part for part in self._decompress(data) if part)
            self._at = 0
        part = self._parts[0]
        end = len(part) if size < 0 else self._at + size
        out = part[self._at:end] if self._at or end < len(part) else part
        self._at += len(out)
        if self._at >= len(part):
            self._parts.popleft()
            self._at = 0
        return out

    def _decompress(self, data: bytes) -> list[bytes]:
        parts = []
        try:
            while data:
                if self._frame is None:
                    self._frame = self._zstandard.ZstdDecompressor().decompressobj()
                parts.append(self._frame.decompress(data))
                data = b""
                if self._frame.eof:  # the rest belongs to the next frame
                    data, self._frame = self._frame.unused_data, None
        except self._zstandard.ZstdError as exc:
            raise OSError(f"invalid zstd data: {exc}") from None
        expanded = sum(map(len, parts))
        self._feed = _SMALL_FEED_BYTES if expanded > _STEP_BYTES \
            else min(2 * self._feed, _FEED_BYTES)
        return parts
