"""OTLP/JSON bytes to Python values: ``json.loads``'s answer, computed by orjson when the same.

``check``'s trace reader and ``serve``'s HTTP receiver parse every request body here; the span
decoder (``otlp._json``) reads the result.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson

__all__ = ["loads_json"]

_LONG_DIGITS: Final = 19
_DIGIT_RUNS: Final = bytes(ord("0") if chr(c) in "0123456789" else ord('"') if chr(c) == '"'
                           else ord(" ") for c in range(256))
"""Maps digits to ``0``, a quote to itself, all else to a space (``bytes.translate``). A minus
is not a digit: a negative number's digits follow it, and tool output is full of ``-----``
rules, which must not send a document to the slower stdlib parser."""
_LONG_RUN: Final = b"0" * _LONG_DIGITS
_QUOTED_LONG_RUN: Final = b'"' + _LONG_RUN
"""19 digits after a quote: the start of a string, such as OTLP/JSON's times, not a number."""
_MAYBE_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]|\x00")
"""A surrogate escape, a UTF-8-encoded surrogate, or a NUL (UTF-16/32 text)."""


def loads_json(body: bytes, *, exact_numbers: bool = True) -> Any:
    r"""Return ``json.loads(body)``, computed by orjson whenever the result is the same.

    This is the one speed path of OTLP/JSON decoding: orjson parses export requests several
    times faster than the stdlib (``benchmarks/profile_serve.py``, ``decode_json``). orjson is
    strict RFC 8259 where the stdlib also takes NaN, Infinity, a BOM and UTF-16 (and words the
    errors): on any orjson error the stdlib decides. orjson also turns integers outside
    -2**63 .. 2**64-1 into floats where the stdlib keeps them exact, so a body that may hold a
    number of 19 digits or more goes to the stdlib: one that holds a run of 19 digits not
    right after a quote, or a run of 38 (rare: a quoted run that long takes the stdlib too). Two
    counts tell this; each skips 20 bytes at a time over the text between digits, where a search
    for a non-quote before 19 digits went byte by byte (73 MB of bench_check_parse's traces:
    39 ms against 84 ms, a third of ``json.loads``'s time).

    With ``exact_numbers=False`` that test is left out: an integer beyond 64 bits may come back
    as a float, the one ``float(n)`` gives (orjson rounds it correctly, as
    ``tests/test_otlp_fuzz.py`` checks; one beyond the double range it refuses). Every integer
    field of OTLP refuses such a number either way, with another message, and a
    ``doubleValue`` takes it as ``float(n)`` either way: decoding that finds nothing wrong gives
    the records the exact parse gives. ``check``'s trace reader parses again when it does.

    Lone UTF-16 surrogates (``"\\ud800"``), which the stdlib lets into strings and no protobuf
    or UTF-8 encoder can write, become U+FFFD.

    Raises:
        ValueError: when the body is not JSON; RecursionError when it nests too deeply.
    """
    runs = body.translate(_DIGIT_RUNS) if exact_numbers else b""
    if runs.count(_LONG_RUN) == runs.count(_QUOTED_LONG_RUN):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    doc = json.loads(body)
    return _replace_lone_surrogates(doc) if _MAYBE_SURROGATE.search(body) else doc


def _replace_lone_surrogates(doc: Any) -> Any:
    """Return ``doc`` with lone surrogates in its strings and keys replaced, in place."""
    if type(doc) is str:
        return _text(doc)
    stack = [doc]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            items = list(node.items())
            node.clear()
            for key, value in items:
                if type(value) in (dict, list):
                    stack.append(value)
                node[_text(key)] = _text(value) if type(value) is str else value
        elif type(node) is list:
            for index, value in enumerate(node):
                if type(value) is str:
                    node[index] = _text(value)
                elif type(value) in (dict, list):
                    stack.append(value)
    return doc


def _text(text: str) -> str:
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
