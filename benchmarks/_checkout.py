"""Put this checkout on ``sys.path`` where a benchmark means it: after PYTHONPATH, before the rest.

A benchmark measures the code of the checkout it sits in, unless ``PYTHONPATH`` names another
tree on purpose (a snapshot of an older commit, for a before and after). Appending the checkout
to ``sys.path`` is not enough: it then comes after site-packages, and an ``otel_loopguard``
installed there (a non-editable ``pip install .`` of some older commit) is measured instead,
silently. ``put_checkout_on_path`` inserts the checkout right after the ``PYTHONPATH`` entries;
``imported_from`` says which tree a measurement actually ran.
"""

from __future__ import annotations

import os
import sys

__all__ = ["imported_from", "put_checkout_on_path"]


def put_checkout_on_path(root: str) -> None:
    """Insert ``root`` into ``sys.path`` after the ``PYTHONPATH`` entries, before the rest."""
    given = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    position = 1  # sys.path[0] is the script's directory
    for index, entry in enumerate(sys.path):
        if entry and os.path.abspath(entry) in given:
            position = index + 1
    sys.path.insert(position, root)


def imported_from() -> str:
    """Return the directory of the ``otel_loopguard`` package this process imported."""
    module = sys.modules.get("otel_loopguard")
    if module is None:
        import otel_loopguard as module
    return os.path.dirname(module.__file__ or "")
