"""Fewer cyclic garbage collections while ``serve`` streams spans through."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

__all__ = ["fewer_collections"]

_THRESHOLDS: Final = (20_000, 20, 10)
"""The collector's thresholds while spans stream through (Python's default: 700, 10, 10)."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run about 30 times less often inside the block.

    Every span ``serve`` decodes is a few container objects that live until its reorder window
    passes, so with Python's default thresholds a young collection runs every ~100 spans and a
    full one, walking every buffered span, every few thousand: 3 to 5 us of CPU per tool span
    (``profile_serve --serve``), for garbage that reference counting frees anyway. The objects
    already alive (modules, gRPC, protobuf; the caller collects first) are frozen out of the
    collections and the thresholds raised; cycles are still collected. Both are put back on
    the way out (``serve`` also runs inside tests). ``check`` does not use it: there it saves
    about 6 % of the CPU on traces of real coding agents and 3 % on framework traces
    (``benchmarks/bench_check_parse.py``), too little for a setting that changes the process.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_THRESHOLDS)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*old)
