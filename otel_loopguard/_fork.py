"""What a forked child must not inherit: locks another thread held at the fork, threads."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable

__all__ = ["after_fork_in_child"]


def after_fork_in_child(method: Callable[[], object]) -> None:
    """Call the bound ``method`` in a child after ``os.fork``, while its object still lives.

    For state a forked child must not inherit: a lock another thread held at the fork, a
    thread that does not exist there. The hook holds the object by a weak reference only.
    """
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=call)
