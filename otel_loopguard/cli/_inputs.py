"""The inputs of ``check``: paths (directories read recursively), spans, where each run began."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard.cli._report import Where
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay.tracefile import DEFAULT_MAX_LINE_BYTES, iter_located_spans

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport
    from otel_loopguard.types import SpanRecord

__all__ = ["Inputs", "expand"]

_PROGRESS_MIN_BYTES: Final = 8 << 20
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
        self._where: OrderedDict[str, Where] = OrderedDict()
        """Trace id -> where its first span was read (the most recent traces only)."""

    def spans(self) -> Iterator[SpanRecord]:
        """Yield the spans of every file, in order."""
        for path in self.files:
            progress = _progress_bar(path)
            yield from self._spans_of(path, progress)
            if progress is not None:
                sys.stderr.write("\n")

    def _spans_of(self, path: str, progress: Any) -> Iterator[SpanRecord]:
        where = self._where
        for line, span in iter_located_spans(
                path, strict=self.strict, on_error=self.on_error, progress=progress,
                max_decompressed_bytes=self.max_decompressed_bytes,
                max_line_bytes=self.max_line_bytes):
            self.spans_read += 1
            if span.trace_id not in where:
                where[span.trace_id] = Where(path, line)
                if len(where) > _MAX_REMEMBERED_TRACES:
                    where.popitem(last=False)
            yield span

    def where(self, report: RunReport) -> Where | None:
        """Return where the run's first trace began, if still remembered."""
        for trace_id in report.trace_ids:
            found = self._where.get(trace_id)
            if found is not None:
                return found
        return None


def _progress_bar(path: str) -> Any:
    if path == "-" or not sys.stderr.isatty():
        return None
    try:
        total = os.path.getsize(path)
    except OSError:
        return None
    if total < _PROGRESS_MIN_BYTES:
        return None

    def show(done: int) -> None:
        share = min(1.0, done / total)
        bar = "#" * int(share * 30)
        sys.stderr.write(f"\r{os.path.basename(path)} [{bar:<30}] {share:4.0%}")
        sys.stderr.flush()

    return show
