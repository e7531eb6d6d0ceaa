"""Which keys of a result are volatile (moments, per-request ids), and stripping them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import chain
from typing import Any, Final

from otel_loopguard.signature._bounds import _CONTAINERS, _MAX_DEPTH, _MAX_ITEMS

DEFAULT_VOLATILE_KEYS: Final = (
    "*_at",
    "*_time",
    "timestamp",
    "expires*",
    "request_id",
    "*request_id",
    "trace_id",
    "span_id",
    "nonce",
    "etag",
)
"""Result keys whose values are a moment or a per-request identity; ``date`` is handled apart."""

_TIME_OF_DAY_RE: Final = re.compile(r"\d[Tt ]\d{1,2}:\d\d", re.ASCII)
"""A time of day after a date, in any of the usual forms: ISO-8601 (``2025-03-17T10:00``), HTTP
and email (``Mon, 17 Mar 2025 10:00:05 GMT``), ``date``'s and ``asctime``'s (``Mon Mar 17
10:00:05 2025``). What makes a ``date`` value volatile; a plain date is data."""
_CAMEL_RE: Final = re.compile(r"(?<=[a-z0-9])([A-Z])")
_VOLATILE_TEXT_RE: Final = re.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO
    r"|\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b"  # a time of day (hh:mm alone may be a line:column)
    # a duration: 0.41s, 12 ms; Go's and Gradle's 1m2.5s, 1m 23s; Maven's 02:55 min
    r"|\b(?:\d+m\s?)?(?:\d{1,2}:\d\d|\d+)(?:[.,]\d+)?\s?"
    r"(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b"
    r"|\b0x[0-9a-f]{4,}\b"  # a memory address
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # a UUID
    r"|\b(?=[a-f]*\d)[0-9a-f]{12,}\b"  # a hex or decimal id of 12+ characters
    r"|(?-i:(?<=Cell In\[)\d+(?=\])|(?<=ipython-input-)\d+(?=-))"  # an IPython counter
    r"|(?-i:(?<=Process Group PGID: )\d+)",  # Gemini CLI's shell: the command's process group
    re.IGNORECASE)
"""Tokens of plain text that change between identical runs (see ``mask_volatile_text``)."""
_VOLATILE_ASCII_RE: Final = re.compile(
    r"(?:(?=\d)|\b(?=[a-fA-F][0-9a-fA-F]{7}))(?:"  # where a match may start: a digit, or 8 hex
    r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)?"
    r"|\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b"
    r"|\b(?:\d+[mM][ \t\n\r\f\v\x1c-\x1f]?)?(?:\d{1,2}:\d\d|\d+)(?:[.,]\d+)?"
    r"[ \t\n\r\f\v\x1c-\x1f]?(?:[mM][sS]|[uU][sS]|[nN][sS]|[sS]"
    r"|[sS][eE][cC][sS]?|[sS][eE][cC][oO][nN][dD][sS]?|[mM][iI][nN][sS]?"
    r"|[mM][iI][nN][uU][tT][eE][sS]?|[hH]|[hH][rR][sS]?|[hH][oO][uU][rR][sS]?)\b"
    r"|\b0[xX][0-9a-fA-F]{4,}\b"
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b(?=[a-fA-F]*\d)[0-9a-fA-F]{12,}\b"
    r"|(?<=Cell In\[)\d+(?=\])|(?<=ipython-input-)\d+(?=-)"
    r"|(?<=Process Group PGID: )\d+)",
    re.ASCII)
"""``_VOLATILE_TEXT_RE`` for ASCII text, matching the same tokens three times faster: cases
spelled out (no case folding per character), ``\\s`` as the characters it matches in ASCII
text, and a first test that fails fast where no token can start (most places in a text).
``tests/test_signature.py`` checks that the two agree."""


def mask_volatile_text(text: str) -> str:
    """Return plain-text ``text`` with the tokens that change between identical runs masked.

    Durations (``in 0.53s``, ``12 ms``, ``took 3.2 seconds``, ``1m2.5s``, ``02:55 min``), ISO
    date-times and times of day, memory addresses (``0x7f3a...``), UUIDs, hex or decimal ids of
    12 or more characters, an IPython traceback's execution counter (``Cell In[12]``,
    ``ipython-input-12-``) and the process group of Gemini CLI's shell tool (``Process Group
    PGID: 60302``) each become ``#``, as volatile keys are dropped from JSON results: a
    test suite rerun with nothing changed returns the same result though its timing line
    differs. Counts
    (``3 failed, 2 passed``), line numbers and other short numbers are data and stay, and so
    does a text of one word (``job:3f2a9c1b7d4e``, a digest): an id returned alone is the
    answer (a new ticket, a new job), not noise around it. One precompiled pattern, one pass;
    for results that are text, and the strings of several words in JSON results.
    """
    if len(text.split(None, 1)) < 2:
        return text
    if text.isascii():
        return _VOLATILE_ASCII_RE.sub("#", text)
    return _VOLATILE_TEXT_RE.sub("#", text)


class VolatileMatcher:
    """Decides which mapping keys of a result are volatile (moments, per-request ids).

    Thread-safe: the per-key cache is a plain dict whose races only repeat work.
    """

    __slots__ = ("_cache", "_regex", "_safe")

    def __init__(self, patterns: Iterable[str] = DEFAULT_VOLATILE_KEYS) -> None:
        """Compile glob ``patterns`` (``*`` wildcard, case-insensitive, camelCase folded)."""
        parts = [re.escape(p.lower()).replace(r"\*", ".*") for p in patterns]
        self._regex = re.compile("(?:" + "|".join(parts) + r")\Z") if parts else None
        self._cache: dict[str, int] = {}
        """Key → 0 (kept), 1 (volatile) or 2 (``date``: volatile when the value has a time)."""
        self._safe: set[str] = set()
        """Keys classified 0: a mapping made only of them is skipped in C (``_strip_dict``).

        Thread-safe like ``_cache``: ``set.add`` and ``issuperset`` each run under the GIL."""

    @property
    def cache(self) -> dict[str, int]:
        """Key → its class (0 kept, 1 volatile, 2 ``date``), for the C walk (``_native``)."""
        return self._cache

    def classify(self, key: str) -> int:
        """Return the class of ``key`` (see ``cache``), classifying and caching it if new."""
        hit = self._cache.get(key)
        return self._classify(key) if hit is None else hit

    def _classify(self, key: str) -> int:
        snake = _CAMEL_RE.sub(r"_\1", key).lower().replace("-", "_")
        if self._regex is not None and self._regex.match(snake):
            hit = 1
        else:
            hit = 2 if key.lower() == "date" else 0
        if len(self._cache) < 4096:
            self._cache[key] = hit
            if not hit:
                self._safe.add(key)
        return hit

    def is_volatile(self, key: str, value: Any) -> bool:
        """Return True when ``key`` (with ``value``) should be ignored when comparing results."""
        hit = self._cache.get(key)
        if hit is None:
            hit = self._classify(key)
        if hit == 2:
            return isinstance(value, str) and _TIME_OF_DAY_RE.search(value) is not None
        return hit == 1

    def strip(self, value: Any) -> bool:
        """Delete the volatile keys of every mapping inside parsed JSON ``value``, in place.

        ``value`` is what a JSON parser returned (dicts, lists and scalars). Returns False, and
        stops part-way, when ``value`` holds a container ``_MAX_DEPTH`` levels down or one of more
        than ``_MAX_ITEMS`` items: the general path, which cuts those (``normalize_value``), must
        sign it. The walk finds this out on the way, so the caller need not count brackets.
        """
        try:
            if type(value) is dict:
                self._strip_dict(value)
            elif type(value) is list:
                self._strip_list(value, 0)
        except _Unbounded:
            return False
        return True

    def _strip_dict(self, value: dict[str, Any]) -> None:
        if not self._plain(value):
            self._strip_items(value, 0)

    def _plain(self, value: dict[str, Any]) -> bool:
        """Return True for known plain keys and no nested mapping or list (a C-speed test)."""
        return (self._safe.issuperset(value)
                and _CONTAINERS.isdisjoint(map(type, value.values()))
                and len(value) <= _MAX_ITEMS)

    def _plain_records(self, value: list[Any]) -> bool:
        """Return True for a list of mappings that all pass ``_plain``, tested as one group.

        A listing of records (search hits, rows) is the common shape of a result: a few C-speed
        set operations over the whole list instead of a test per record.
        """
        if not value or set(map(type, value)) != _DICT_ONLY:
            return False
        return (self._safe.issuperset(set().union(*value))
                and _CONTAINERS.isdisjoint(set(map(type, chain.from_iterable(
                    map(dict.values, value)))))
                and max(map(len, value)) <= _MAX_ITEMS)

    def _strip_child(self, item: Any, depth: int) -> None:
        """Strip a mapping or list found in a container ``depth`` levels down.

        A plain mapping passes ``_plain`` and is left as it is, down to the depth where the
        bound is checked.
        """
        if type(item) is list:
            self._strip_list(item, depth + 1)
        elif depth >= _INLINE_DEPTH or not self._plain(item):
            self._strip_items(item, depth + 1)

    def _strip_items(self, value: dict[str, Any], depth: int) -> None:
        """``_strip_dict`` of a mapping ``depth`` levels down, past its first test."""
        if depth >= _MAX_DEPTH or len(value) > _MAX_ITEMS:
            raise _Unbounded
        cache, drop = self._cache, None
        for key, item in value.items():
            hit = cache.get(key)
            if hit is None:
                hit = self._classify(key)
            if hit and (hit == 1 or (type(item) is str
                                     and _TIME_OF_DAY_RE.search(item) is not None)):
                if drop is None:
                    drop = [key]
                else:
                    drop.append(key)
                continue
            if type(item) in _CONTAINERS:
                self._strip_child(item, depth)
        if drop is not None:
            for key in drop:
                del value[key]

    def _strip_list(self, value: list[Any], depth: int) -> None:
        if depth >= _MAX_DEPTH or len(value) > _MAX_ITEMS:
            raise _Unbounded
        if depth < _INLINE_DEPTH and self._plain_records(value):
            return
        for item in value:
            if type(item) in _CONTAINERS:
                self._strip_child(item, depth)


class _Unbounded(Exception):
    """Raised inside the volatile walk at a bound only the general path enforces."""


_DICT_ONLY: Final = frozenset({dict})
_INLINE_DEPTH: Final = _MAX_DEPTH - 1
"""Containers up to this depth may skip a plain mapping inside them (it is at most this + 1)."""
