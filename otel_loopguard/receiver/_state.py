"""The receiver's attributes that both of its bases use, declared once."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.receiver._counters import ReceiverCounters
from otel_loopguard.receiver._options import ReceiverOptions

__all__ = ["ReceiverState"]


class ReceiverState:
    """The attributes ``LoopGuardReceiver`` sets up that its intake and its worker both read.

    A base of ``RequestIntake`` and ``IntakeWorker``, so that mypy checks them; it holds nothing.
    """

    options: ReceiverOptions
    guard: InternalErrorGuard
    forwarder: Any
    _queue: queue.Queue[Any]
    _counters: ReceiverCounters
    _clock: Callable[[], int]
    _journal: Any
