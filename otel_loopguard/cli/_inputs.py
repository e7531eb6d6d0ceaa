"""The inputs of ``check``: paths (directories read recursively), spans, where each run began."""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Final, TextIO

from otel_loopguard.cli._report import Where
from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay.tracefile import DEFAULT_MAX_LINE_BYTES, iter_span_batches

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport
    from otel_loopguard.types import SpanRecord

__all__ = ["Inputs", "expand"]

_PROGRESS_MIN_BYTES: Final = 8 << 20
"""A file this big gets a bar of its own."""
_PROGRESS_SECONDS: Final = 0.1
"""Shortest time between two redraws of the progress line."""
_MAX_REMEMBERED_TRACES: Final = 100_000
_KINDS: Final = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
                 stat.S_IFBLK: "a device"}


def expand(paths: Sequence[str],
           on_error: Callable[[TraceFileError], None] | None = None) -> list[str]:
    """Return the files to read: each path, a directory replaced by the files under it.

    A directory is read recursively, its files in sorted path order; hidden files and folders
    (names starting with ``.``) are skipped, and symbolic links to folders are not followed.
    What cannot be read is named once and left out: a path that does not exist, a symbolic
    link loop or a dangling link, a directory that cannot be listed, and, under a directory,
    anything but a regular file (FIFOs, sockets, devices: reading them could wait forever).
    A FIFO or device named on the command line is read (``<(zcat traces.gz)`` is a pipe).

    Args:
        paths: the command line's paths (``-`` for standard input).
        on_error: called with each path left out; when None, the first one raises.

    Raises:
        TraceFileError: for a path left out, when ``on_error`` is None.
    """
    def report(path: str, reason: str) -> None:
        error = TraceFileError(path, 0, reason)
        if on_error is None:
            raise error
        on_error(error)

    files: list[str] = []
    for path in paths:
        if path == "-":
            files.append(path)
            continue
        mode = _mode(path, report)
        if mode is None:
            continue
        if stat.S_ISDIR(mode):
            files += _walk(path, report)
        elif _readable(path, report):
            files.append(path)
    return files


def _walk(top: str, report: Callable[[str, str], None]) -> list[str]:
    """Return the regular files under ``top`` in sorted path order; report the others."""
    found = []

    def unlistable(error: OSError) -> None:
        report(error.filename or top, f"cannot list directory: {_reason(error)}")

    for root, dirs, names in os.walk(top, onerror=unlistable):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            mode = _mode(path, report)
            if mode is None:
                continue
            if stat.S_ISREG(mode):
                if _readable(path, report):
                    found.append(path)
            elif not stat.S_ISDIR(mode):  # a link to a folder: not followed
                report(path, f"not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'special')}); "
                             "skipped")
    return sorted(found, key=lambda p: os.path.relpath(p, top).split(os.sep))


def _mode(path: str, report: Callable[[str, str], None]) -> int | None:
    """Return the file type and mode of ``path`` (links followed), or report why not."""
    try:
        return os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            report(path, "dangling symbolic link")
        else:
            report(path, _reason(exc))
        return None


def _readable(path: str, report: Callable[[str, str], None]) -> bool:
    """Return True when this process may read ``path``; else report it."""
    if os.access(path, os.R_OK):
        return True
    report(path, "permission denied")
    return False


def _reason(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symbolic link loop"
    if error.errno == errno.ENOENT:
        return "no such file"
    return (error.strerror or str(error)).lower()


class Inputs:
    """Streams the spans of every file, counting them and noting where each trace began.

    Args:
        files: the files (``-`` for standard input), from :func:`expand`.
        strict: raise the first bad record instead of reporting it.
        on_error: called with each bad record when not strict.
        max_decompressed_bytes: the cap per compressed file.
        max_line_bytes: the cap per line, JSON document or protobuf message.
    """

    def __init__(self, files: Sequence[str], *, strict: bool,
                 on_error: Callable[[TraceFileError], None], max_decompressed_bytes: int,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.files = files
        self.strict = strict
        self.on_error = on_error
        self.max_decompressed_bytes = max_decompressed_bytes
        self.max_line_bytes = max_line_bytes
        self.spans_read = 0
        self._agents = AgentRecords()
        """The coding agents' sessions, shared by every file (a session may span several)."""
        self._where: OrderedDict[str, Where] = OrderedDict()
        """Trace id -> where its first span was read (the most recent traces only)."""
        self._progress = _Progress(files, sys.stderr)

    def clear_progress(self) -> None:
        """Erase the progress line before a line of the report or of stderr is written there."""
        self._progress.clear()

    def spans(self) -> Iterator[SpanRecord]:
        """Yield the spans of every file, in order.

        On a terminal, stderr shows the progress: across the files when there are several
        (``[12/340] name``), within a file of 8 MiB or more (a bar).
        """
        return chain.from_iterable(self._batches())

    def _batches(self) -> Iterator[list[SpanRecord]]:
        """Yield the spans of every file a record at a time, noting where each trace began."""
        progress = self._progress
        where = self._where
        for index, path in enumerate(self.files):
            try:
                for line, spans in iter_span_batches(
                        path, strict=self.strict, on_error=self.on_error,
                        progress=progress.file(index, path),
                        max_decompressed_bytes=self.max_decompressed_bytes,
                        max_line_bytes=self.max_line_bytes, agents=self._agents):
                    self.spans_read += len(spans)
                    for trace_id in {span.trace_id: None for span in spans}:  # in order, once
                        if trace_id not in where:
                            where[trace_id] = Where(path, line)
                            if len(where) > _MAX_REMEMBERED_TRACES:
                                where.popitem(last=False)
                    yield spans
            except TraceFileError as error:  # a file that cannot be opened (gone since the
                if self.strict:              # listing, a socket): named, the others still read
                    raise
                self.on_error(error)
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
        self._drawn = False
        """True while the line holds progress, which a line written after it would extend."""

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
            self._last, self.shown, self._drawn = now, True, True
            self.stream.write(f"\r\x1b[K{text}")
            self.stream.flush()

    def clear(self) -> None:
        """Erase the line drawn, if any: what is written next starts on a clean line."""
        if self._drawn:
            self._drawn = False
            self.stream.write("\r\x1b[K")
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
