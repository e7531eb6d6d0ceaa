"""Fewer cyclic garbage collections while ``check`` or ``serve`` streams spans through."""

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

    Every span the commands decode is a few container objects that live until its trace is
    assembled (``check``) or its reorder window passes (``serve``), so with Python's default
    thresholds a young collection runs every ~100 spans and a full one, walking every buffered
    span, every few thousand: in ``serve`` 3 to 5 us of CPU per tool span (``profile_serve
    --serve``), in ``check`` 6 to 10 % of its CPU on traces of real coding agents
    (``benchmarks/bench_check_parse.py``), for garbage that reference counting frees anyway.
    The objects already alive (modules; in ``serve`` gRPC and protobuf too) are frozen out of
    the collections (without a collection first: ``check`` would pay a few milliseconds of its
    start-up for it; ``serve`` collects before) and the thresholds raised; cycles are still
    collected. Both are put back
    on the way out (the commands also run inside tests).
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_THRESHOLDS)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*old)
