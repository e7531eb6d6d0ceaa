"""Stopping an in-process ``serve`` with SIGTERM, only once its handler is in place.

``serve`` installs its SIGTERM handler after its receiver has started (and after a collection
of start-up's garbage); a SIGTERM sent before that takes the default action and ends the whole
test run. On a loaded machine that window can be longer than any fixed delay.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

__all__ = ["sigterm_when_handled"]


def sigterm_when_handled(first: Callable[[], object] | None = None, *,
                         original: Any = signal.SIG_DFL, timeout: float = 30.0) -> None:
    """Send this process SIGTERM once its handler is no longer ``original``.

    ``first`` runs just before, once the handler is in place (it is sent even if ``first``
    raises). After ``timeout`` seconds without a new handler, SIGINT is sent instead: the test
    fails with ``KeyboardInterrupt`` rather than ending the test run.
    """
    deadline = time.monotonic() + timeout
    while signal.getsignal(signal.SIGTERM) is original:
        if time.monotonic() > deadline:
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.01)
    try:
        if first is not None:
            first()
    finally:
        os.kill(os.getpid(), signal.SIGTERM)
