"""The canonical form of a plain-text result, and its optional accelerator.

A result that is text (a shell's output, a file read, a page) is compared as its canonical form:
the tokens that change between identical runs masked (``mask_volatile_text``), then whitespace
folded, as ``" ".join(text.split())`` does; a web agent's reading of its screenshot that ends the
text is left out first (``without_screen_text``). :func:`canonical_text` is the definition, in
Python.

The optional C accelerator (``_native``) computes the same form in one pass over the
characters: the pattern's alternatives start with a digit or a hex letter, and Python's ``re``
pays for every character to find those, where a table lookup is enough.
``tests/test_accel.py`` compares the two on random texts and on every text result of the
development corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from otel_loopguard.signature._native import NATIVE
from otel_loopguard.signature._volatile import mask_volatile_text

SCREEN_TEXT: Final = "Automatic OCR of the page screenshot has detected the following text:"
"""The line before a model's transcription of a screenshot: AutoGen's multimodal web surfer
(Magentic-One) ends each action's result with it, after the page's title, address, viewport
and metadata."""
_SCREEN_LINE: Final = "\n" + SCREEN_TEXT


def without_screen_text(text: str) -> str:
    """Return ``text`` without the transcription of a screenshot that ends it, if any.

    A model reads the screenshot each time: two views of the same screen come back transcribed
    differently (lines joined or split, headings reworded, menus listed or not), so the
    transcription is volatile text, as a duration is. What identifies the page stays: the
    action, the title and address, how much of the page is in view and where, the metadata.
    What follows the first line that starts with ``SCREEN_TEXT`` is dropped, the line itself
    kept (a result with a transcription is not the same as one without); the surfer's other
    mode, the first lines of the page's own text, is the page's content and stays.
    """
    at = text.find(_SCREEN_LINE)
    return text if at < 0 else text[:at + len(_SCREEN_LINE)]


_CHUNK_LINE: Final = re.compile(r"Chunk ID: [0-9A-Za-z]{1,64}\r?\n")
"""How Codex CLI's output of a command begins: ``Chunk ID: 3f2a9c``, a fresh id on every call,
then ``Wall time: 0.47 seconds``, the exit code, the output's size in tokens and the output."""


def without_chunk_id(text: str) -> str:
    """Return a result without the ``Chunk ID`` line that heads it (``_CHUNK_LINE``), if any.

    Codex's id of a command's output chunk is a new one every time (six hex digits, too short
    for the mask of ids), so without this each rerun of a command with the same output would be
    a new result. The rest of the header stays: its time is a duration, masked as any.
    """
    found = _CHUNK_LINE.match(text)
    return text if found is None else text[found.end():]


def canonical_text(text: str) -> str:
    """Return ``text`` without its screen text, its volatile tokens masked, whitespace folded."""
    return " ".join(mask_volatile_text(without_screen_text(text)).split())


_SCAN: Callable[[str], str] | None = NATIVE.canonical_text if NATIVE is not None else None
ACCELERATED: Final = NATIVE is not None
"""Whether the C accelerator of the signatures is in use in this process."""


def text_form(text: str) -> str:
    """Return :func:`canonical_text` of ``text``, from the accelerator when it is built."""
    return canonical_text(text) if _SCAN is None else _SCAN(text)
