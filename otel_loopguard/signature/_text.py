"""The canonical form of a plain-text result, and its optional accelerator.

A result that is text (a shell's output, a file read, a page) is compared as its canonical form:
the tokens that change between identical runs masked (``mask_volatile_text``), then whitespace
folded, as ``" ".join(text.split())`` does. :func:`canonical_text` is the definition, in Python.

The optional C accelerator (``_native``) computes the same form in one pass over the
characters: the pattern's alternatives start with a digit or a hex letter, and Python's ``re``
pays for every character to find those, where a table lookup is enough.
``tests/test_accel.py`` compares the two on random texts and on every text result of the
development corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from otel_loopguard.signature._native import NATIVE
from otel_loopguard.signature._volatile import mask_volatile_text


def canonical_text(text: str) -> str:
    """Return ``text`` with its volatile tokens masked and its whitespace folded."""
    return " ".join(mask_volatile_text(text).split())


_SCAN: Callable[[str], str] | None = NATIVE.canonical_text if NATIVE is not None else None
ACCELERATED: Final = NATIVE is not None
"""Whether the C accelerator of the signatures is in use in this process."""


def text_form(text: str) -> str:
    """Return :func:`canonical_text` of ``text``, from the accelerator when it is built."""
    return canonical_text(text) if _SCAN is None else _SCAN(text)
