"""What ``serve`` acknowledged and had not yet finished, kept in a file across a hard kill.

Two counters and a flag at fixed offsets of a 24-byte file, written with ``os.pwrite`` (no
fsync): a SIGKILL or an OOM kill keeps what was written, since the kernel's page cache
outlives the process (a power loss does not). ``accepted`` is written before each request is
acknowledged; ``settled`` (spans checked and, when forwarding, exported or counted as not
forwarded) after each step of the worker; ``clean`` at the end of a graceful shutdown. The
next start reads ``accepted - settled`` from a run that did not end cleanly: the spans that
run may have lost (at most the spans settled in its last worker step are counted too many).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Callable
from typing import Final

from otel_loopguard.exceptions import ConfigError

__all__ = ["Journal", "open_journal"]

logger = logging.getLogger(__name__)

_RECORD: Final = struct.Struct("<QQQ")
_ACCEPTED, _SETTLED, _CLEAN = 0, 8, 16


class Journal:
    """The state file; thread-safe (each counter is written under the journal's lock).

    Raises:
        OSError: when the file cannot be opened or created.
        ConfigError: when the file holds something else than a state file (it is left as is).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            accepted, settled, clean = _read_state(self._fd)
        except ConfigError:
            os.close(self._fd)
            raise
        self.lost_before = 0 if clean else max(0, accepted - settled)
        """Spans the previous run acknowledged and did not finish (it did not shut down)."""
        self._lock = threading.Lock()
        """Held only to change and write the counters."""
        self._accepted = self._settled = 0
        os.pwrite(self._fd, _RECORD.pack(0, 0, 0), 0)

    def accept(self, spans: int) -> None:
        """Record ``spans`` more acknowledged (call before the acknowledgement is sent)."""
        with self._lock:
            self._accepted += spans
            os.pwrite(self._fd, _ACCEPTED_FIELD.pack(self._accepted), _ACCEPTED)

    def settle(self, settled: int) -> None:
        """Record how many acknowledged spans are finished so far."""
        with self._lock:
            if settled != self._settled:
                self._settled = settled
                os.pwrite(self._fd, _ACCEPTED_FIELD.pack(settled), _SETTLED)

    def close(self) -> None:
        """Mark a graceful end (everything accepted finished or counted) and close."""
        with self._lock:
            os.pwrite(self._fd, _RECORD.pack(self._accepted, self._accepted, 1), 0)
            os.close(self._fd)


_ACCEPTED_FIELD: Final = struct.Struct("<Q")


def _read_state(fd: int) -> tuple[int, int, int]:
    """Return (accepted, settled, clean) of the state file open as ``fd``; a new one is clean.

    Only an empty file or one this class wrote (24 bytes, ``settled <= accepted``, the flag 0 or
    1) is taken: pointed at any other file by mistake, ``serve`` must not write over it.

    Raises:
        ConfigError: when the file holds anything else.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, 0, 1
    data = os.pread(fd, _RECORD.size, 0) if size == _RECORD.size else b""
    if len(data) == _RECORD.size:
        accepted, settled, clean = _RECORD.unpack(data)
        if clean in (0, 1) and settled <= accepted:
            return accepted, settled, clean
    raise ConfigError(f"not a state file of otel-loopguard serve ({size} bytes; it writes "
                      f"{_RECORD.size}, and starts from an empty or missing file); "
                      "left unchanged")


def open_journal(path: str, count_lost: Callable[[int], None]) -> Journal:
    """Open the state file at ``path``; count (``count_lost``) and log what a killed run lost.

    Raises:
        ConfigError: when the file cannot be opened or created.
    """
    try:
        journal = Journal(path)
    except OSError as exc:
        raise ConfigError(f"state_file: {exc.strerror or exc}: {path}") from None
    except ConfigError as exc:
        raise ConfigError(f"state_file: {path}: {exc}") from None
    lost = journal.lost_before
    if lost:
        count_lost(lost)
        logger.warning("otel-loopguard serve: the previous run did not shut down (killed?) "
                       "and lost up to %d acknowledged span(s) it had not checked or "
                       "forwarded (counted in loopguard_receiver_spans_total"
                       "{outcome=\"lost\"})", lost)
    return journal
