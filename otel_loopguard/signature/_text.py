"""The canonical form of a plain-text result, and its optional accelerator.

A result that is text (a shell's output, a file read, a page) is compared as its canonical form:
the tokens that change between identical runs masked (``mask_volatile_text``), then whitespace
folded, as ``" ".join(text.split())`` does. :func:`canonical_text` is the definition, in Python.

``_textscan`` is a C module that computes the same form for ASCII text in one pass over its
characters, about 40 times faster than the regular expression (``benchmarks/bench_text.py``):
the pattern's alternatives start with a digit or a hex letter, and Python's ``re`` pays for every
character to find those, where a table lookup is enough. It is built when the package is
installed with a C compiler at hand (``hatch_build.py``), and is optional: without it, or with
``OTEL_LOOPGUARD_PURE_PYTHON=1`` in the environment, the Python definition runs, and the findings
are the same (``tests/test_textscan.py`` compares the two on random texts and on every text
result of the development corpus).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

from otel_loopguard.signature._volatile import mask_volatile_text


def canonical_text(text: str) -> str:
    """Return ``text`` with its volatile tokens masked and its whitespace folded."""
    return " ".join(mask_volatile_text(text).split())


def _load_accelerator() -> Callable[[str], str | None] | None:
    """Return the C ``canonical_text`` (None for non-ASCII text), or None when not built."""
    if os.environ.get("OTEL_LOOPGUARD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from otel_loopguard.signature import _textscan  # type: ignore[attr-defined]
    except ImportError:
        return None
    scan: Callable[[str], str | None] = _textscan.canonical_text
    return scan


_SCAN: Final = _load_accelerator()
ACCELERATED: Final = _SCAN is not None
"""Whether the C accelerator is in use in this process."""


def text_form(text: str) -> str:
    """Return :func:`canonical_text` of ``text``, from the accelerator when it is built."""
    if _SCAN is not None:
        form = _SCAN(text)
        if form is not None:
            return form
    return canonical_text(text)
