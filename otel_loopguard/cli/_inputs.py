"""The inputs of ``check``: paths (directories read recursively), spans, where each run began."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard.cli._report import Where
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay.tracefile import iter_located_spans

if TYPE_CHECKING:
    from otel_loopguard.replay.checker import RunReport
    from otel_loopguard.types import SpanRecord

__all__ = ["Inputs", "expand"]

_PROGRESS_MIN_BYTES: Final = 8 << 20
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
        """Yield the spans of every file, in order."""
        where = self._where
        for path in self.files:
            progress = _progress_bar(path)
            for line, span in iter_located_spans(
                    path, strict=self.strict, on_error=self.on_error, progress=progress,
                    max_decompressed_bytes=self.max_decompressed_bytes):
                self.spans_read += 1
                if span.trace_id not in where:
                    where[span.trace_id] = Where(path, line)
                    if len(where) > _MAX_REMEMBERED_TRACES:
                        where.popitem(last=False)
                yield span
            if progress is not None:
                sys.stderr.write("\n")

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
