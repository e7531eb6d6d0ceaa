"""The inputs of ``check``: paths (directories read recursively), spans, where each run began."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, TextIO

from otel_loopguard.cli._report import Where
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay.tracefile import iter_located_spans

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport
    from otel_loopguard.types import SpanRecord

__all__ = ["Inputs", "expand"]

_PROGRESS_MIN_BYTES: Final = 8 << 20
"""A file this big gets a bar of its own."""
_PROGRESS_SECONDS: Final = 0.1
"""Shortest time between two redraws of the progress line."""
_MAX_REMEMBERED_TRACES: Final = 100_000


def expand(paths: Sequence[str]) -> list[str]:
    """Return the files to read: each path, a directory replaced by the files under it.

    A directory is read recursively, its files in sorted path order; hidden files and folders
    (names starting with ``.``) are skipped.

    Raises:
        TraceFileError: for a path that does not exist.
    """
    files: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            if path != "-" and not os.path.exists(path):
                raise TraceFileError(path, 0, "no such file")
            files.append(path)
            continue
        found = []
        for root, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [os.path.join(root, n) for n in names if not n.startswith(".")]
        files += sorted(found, key=lambda p: os.path.relpath(p, path).split(os.sep))
    return files


class Inputs:
    """Streams the spans of every file, counting them and noting where each trace began.

    Args:
        files: the files (``-`` for standard input), from :func:`expand`.
        strict: raise the first bad record instead of reporting it.
        on_error: called with each bad record when not strict.
        max_decompressed_bytes: the cap per compressed file.
    """

    def __init__(self, files: Sequence[str], *, strict: bool,
                 on_error: Callable[[TraceFileError], None], max_decompressed_bytes: int) -> None:
        self.files = files
        self.strict = strict
        self.on_error = on_error
        self.max_decompressed_bytes = max_decompressed_bytes
        self.spans_read = 0
        self._where: OrderedDict[str, Where] = OrderedDict()
        """Trace id -> where its first span was read (the most recent traces only)."""

    def spans(self) -> Iterator[SpanRecord]:
        """Yield the spans of every file, in order.

        On a terminal, stderr shows the progress: across the files when there are several
        (``[12/340] name``), within a file of 8 MiB or more (a bar).
        """
        where = self._where
        progress = _Progress(self.files, sys.stderr)
        for index, path in enumerate(self.files):
            for line, span in iter_located_spans(
                    path, strict=self.strict, on_error=self.on_error,
                    progress=progress.file(index, path),
                    max_decompressed_bytes=self.max_decompressed_bytes):
                self.spans_read += 1
                if span.trace_id not in where:
                    where[span.trace_id] = Where(path, line)
                    if len(where) > _MAX_REMEMBERED_TRACES:
                        where.popitem(last=False)
                yield span
        progress.done(self.spans_read)

    def where(self, report: RunReport) -> Where | None:
        """Return where the run's first trace began, if still remembered."""
        for trace_id in report.trace_ids:
            found = self._where.get(trace_id)
            if found is not None:
                return found
        return None


class _Progress:
    """Progress on stderr, on a terminal only: the file reached, and a bar within a big file.

    The line is redrawn in place (a carriage return) at most every ``_PROGRESS_SECONDS``; the
    last one (``N files, M spans read``) stays once every file is read.
    """

    def __init__(self, files: Sequence[str], stream: TextIO) -> None:
        isatty = getattr(stream, "isatty", None)
        self.on = bool(isatty and isatty()) and any(f != "-" for f in files)
        self.stream, self.total, self.shown = stream, len(files), False
        self._prefix, self._last = "", 0.0

    def file(self, index: int, path: str) -> Callable[[int], None] | None:
        """Show that file ``index`` begins; return its bar's callback when it is big."""
        if not self.on or path == "-":
            return None
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        big = size >= _PROGRESS_MIN_BYTES
        if self.total > 1:
            self._prefix = f"[{index + 1}/{self.total}] "
            self._write(f"{self._prefix}{_short(path)}", force=index == 0)
        return functools.partial(self._bar, path, size) if big else None

    def _bar(self, path: str, size: int, done: int) -> None:
        share = min(1.0, done / size)
        self._write(f"{self._prefix}{_short(path)} [{'#' * int(share * 30):<30}] {share:4.0%}")

    def _write(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= _PROGRESS_SECONDS:
            self._last, self.shown = now, True
            self.stream.write(f"\r\x1b[K{text}")
            self.stream.flush()

    def done(self, spans: int) -> None:
        """Leave the last line: how many files and spans were read."""
        if self.shown:
            files = f"{self.total} files" if self.total > 1 else "1 file"
            self.stream.write(f"\r\x1b[K{files}, {spans:,} spans read\n")
            self.stream.flush()


def _short(path: str) -> str:
    """Return ``path`` fit for one line of progress (its end, when long)."""
    return path if len(path) <= 60 else "..." + path[-57:]
