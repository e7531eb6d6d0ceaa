"""The canonical form: bounded, JSON-ready values, their canonical JSON text, and its digest.

Tool arguments are signed with it in ``_args`` (``canonical_args``, ``call_signature``);
results, with their volatile keys stripped, in ``_results``.

Arguments and results both end in ``_canonical``: a JSON text read by orjson (``_fast_json``)
and any other value (``normalize_value``) reach the same text, so the two paths agree.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson
import xxhash

from otel_loopguard.signature._bounds import (
    _DEFAULT_MAX_VALUE_CHARS,
    _MAX_DEPTH,
    _MAX_ITEMS,
)
from otel_loopguard.signature._native import NATIVE
from otel_loopguard.signature._text import text_form

if TYPE_CHECKING:
    from otel_loopguard.signature._volatile import VolatileMatcher

_DATETIME_TOKEN: Final = "<datetime>"


def digest(text: str) -> str:
    """Return a 16-hex-digit digest of ``text`` (stable across processes).

    XXH3 (64 bits): not cryptographic, which is fine for telling signatures apart within a run,
    and about 10x faster than ``hashlib.blake2b`` on a 1 KB result.
    """
    return _xxh3_hex(text.encode("utf-8", "surrogatepass"))


_xxh3_hex: Final = xxhash.xxh3_64_hexdigest
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1
"""The integers orjson reads and writes; JSON integers beyond them are read as floats."""


def _hashed(text: str) -> str:
    return "\x00h:" + digest(text)


def _parse_json_text(text: str) -> Any:
    """Return the parsed value when ``text`` is a JSON object or array, else ``text``."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            return text
    return text


def normalize_value(  # noqa: PLR0911 - one return per value type reads best
    value: Any,
    *,
    volatile: VolatileMatcher | None = None,
    max_value_chars: int = _DEFAULT_MAX_VALUE_CHARS,
    _depth: int = 0,
) -> Any:
    """Return a canonical, bounded, JSON-ready form of ``value``.

    Args:
        value: anything; arguments or a result as the instrumentation captured it.
        volatile: when given, volatile keys are dropped and date-time strings masked (results).
        max_value_chars: strings longer than this are replaced by their hash.

    Returns:
        Nested dicts (sorted keys), lists, strings, numbers, bools or None. Never raises for
        ordinary Python values.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else _big_int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return _normalize_str(value, volatile, max_value_chars)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        if len(raw) > max_value_chars:
            return "\x00h:" + _xxh3_hex(raw)
        return _normalize_str(raw.decode("utf-8", "replace"), volatile, max_value_chars)
    if _depth >= _MAX_DEPTH and isinstance(value, Mapping | list | tuple | set | frozenset):
        return _deep(value)
    if isinstance(value, Mapping):
        return _normalize_mapping(value, volatile, max_value_chars, _depth)
    if isinstance(value, set | frozenset):
        return sorted((normalize_value(v, volatile=volatile, max_value_chars=max_value_chars,
                                       _depth=_depth + 1) for v in list(value)[:_MAX_ITEMS]),
                      key=repr)
    if isinstance(value, list | tuple):
        out = [normalize_value(v, volatile=volatile, max_value_chars=max_value_chars,
                               _depth=_depth + 1) for v in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            out.append(_rest(value[_MAX_ITEMS:], volatile, max_value_chars, _depth + 1))
        return out
    return _normalize_str(_safe_str(value), volatile, max_value_chars)


def _rest(items: Iterable[Any], volatile: VolatileMatcher | None, max_chars: int,
          depth: int) -> str:
    """Return a digest of the items past a container's first ``_MAX_ITEMS``, and their count.

    Each is normalised as it would be in place (volatile keys dropped, date-times masked) and
    hashed one at a time, so memory stays bounded while a change in a long list or mapping
    still changes the signature (a longer listing is not the same result). Past ``_MAX_REST``
    more items they are only counted, which bounds the time too.
    """
    hasher, count = xxhash.xxh3_64(), 0
    for item in items:
        count += 1
        if count > _MAX_REST:
            continue  # counted only: the work per call stays bounded too
        text = _canonical(normalize_value(item, volatile=volatile, max_value_chars=max_chars,
                                          _depth=depth), result=volatile is not None)
        hasher.update(text.encode("utf-8", "surrogatepass") + b"\x1e")
    return f"\x00rest:{count}:{hasher.hexdigest()}"


_MAX_REST: Final = 32 * _MAX_ITEMS
"""Items past the cut that ``_rest`` hashes (65,536); beyond them it only counts."""


def _deep(value: Any) -> str:
    r"""Return a container ``_MAX_DEPTH`` levels down as a digest of its JSON (bounded).

    orjson writes up to 254 levels; deeper still, or values it cannot write, stay ``\x00deep``.
    Volatile keys that deep are not dropped: such results are rare, and a change there must
    not pass for the same result.
    """
    try:
        return "\x00deep:" + _xxh3_hex(orjson.dumps(value, option=orjson.OPT_SORT_KEYS
                                                     | orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        return "\x00deep"


def _big_int(value: int) -> float | str:
    """Return what orjson reads from the JSON text of ``value``: a float, or ``inf``."""
    try:
        return float(value)
    except OverflowError:
        return "inf" if value > 0 else "-inf"


def _safe_str(value: Any) -> str:
    try:
        return f"<{type(value).__name__}>{value}"[:_DEFAULT_MAX_VALUE_CHARS]
    except Exception:
        return f"<{type(value).__name__}>"


def _normalize_str(text: str, volatile: VolatileMatcher | None, max_chars: int) -> Any:
    """Hash oversized strings; whitespace and date-times are folded later, on the JSON text."""
    del volatile
    return _hashed(text) if len(text) > max_chars else text


def _normalize_mapping(
    value: Mapping[Any, Any], volatile: VolatileMatcher | None, max_chars: int, depth: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for count, (key, item) in enumerate(value.items()):
        if count >= _MAX_ITEMS:
            out["\x00more"] = _rest(_rest_pairs(value, volatile), volatile, max_chars,
                                    depth + 1)
            break
        skey = key if isinstance(key, str) else _safe_str(key)
        if volatile is not None and volatile.is_volatile(skey, item):
            continue
        out[skey] = normalize_value(item, volatile=volatile, max_value_chars=max_chars,
                                    _depth=depth + 1)
    return dict(sorted(out.items()))


def _rest_pairs(value: Mapping[Any, Any],
                volatile: VolatileMatcher | None) -> Iterator[tuple[str, Any]]:
    """Yield the (key, item) pairs of ``value`` past its first ``_MAX_ITEMS``.

    As ``_normalize_mapping`` keeps them: keys as strings, volatile ones dropped.
    """
    for key, item in itertools.islice(value.items(), _MAX_ITEMS, None):
        skey = key if isinstance(key, str) else _safe_str(key)
        if volatile is None or not volatile.is_volatile(skey, item):
            yield skey, item


def _canonical(normalized: Any, *, result: bool = False) -> str:
    r"""Return the canonical JSON text: sorted keys, compact, whitespace inside strings folded.

    Compact JSON has whitespace only inside strings, so folding runs the text once: runs of
    whitespace (raw, or escaped as ``\\n``, ``\\t``...) become one space, and a space next to a
    string's opening or closing quote is dropped. For results, a string of several words is
    read as text (``_text_values``: its volatile tokens masked) and a string that is a whole
    ISO date-time is masked. The memory address of an object repr (``<… object at 0x7f…>``)
    is masked in arguments and results alike. Both the JSON-text fast path and the object
    path end here, so they agree.
    """
    if _CANON is not None:  # as the fast path writes it, when built: the two paths agree
        canonical = _CANON(normalized, None, None, sys.maxsize, result)
        if canonical is not None:
            return canonical
    if result:
        normalized = _text_values(normalized)
    try:
        text = orjson.dumps(normalized, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # lone surrogates, non-string keys, values orjson does not write
        text = json.dumps(normalized, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
    # A space next to a quote or a space shows as a double space once quotes are spaces: one
    # C-speed replace and one scan instead of three two-character scans (2 us vs 4 us per KB).
    if "\\" in text or "  " in text.replace('"', " ") or not text.isascii():
        text = _fold_whitespace(text)
    if " at 0x" in text:  # object reprs: the address differs on every call, the object not
        text = _ADDRESS_RE.sub(" at 0x", text)
    if result and _DATETIME_PREFIX_RE.search(text) is not None:
        text = _DATETIME_IN_JSON_RE.sub('"' + _DATETIME_TOKEN + '"', text)
    return text


def _text_values(value: Any) -> Any:
    """Return a result's value with each string of several words in its text form.

    A string of several words (a message, a log line, an answer an API wraps in a JSON
    envelope) is text, so its volatile tokens are masked as in a plain-text result
    (``text_form``): ``{"response": "... 'timestamp': 1713634632036}"`` returned again with
    another timestamp is the same answer. A string of one word (an id, a digest, a path) is
    data and stays as it is. Keys stay as they are.
    """
    if type(value) is str:
        return text_form(value) if len(value.split(None, 1)) > 1 else value
    if type(value) is dict:
        return {key: _text_values(item) for key, item in value.items()}
    if type(value) is list:
        return [_text_values(item) for item in value]
    return value


_ESCAPED_WS: Final = ("\\n", "\\r", "\\t", "\\f", "\\u000b", "\\u001c", "\\u001d",
                      "\\u001e", "\\u001f")
"""How json.dumps writes whitespace control characters inside strings."""
_OPENERS: Final = ('{" ', '[" ', '," ', ':" ')
_CLOSERS: Final = (' ",', ' "}', ' "]', ' ":')


def _fold_whitespace(text: str) -> str:
    """Fold whitespace inside the strings of compact JSON text, with C-speed replaces only.

    Compact JSON has whitespace only inside strings, and a quote that is not escaped is always
    next to one of ``{[,:`` or the ends, so these replaces touch string contents only.
    """
    if "\\" in text:
        for escaped in _ESCAPED_WS:
            if escaped in text:
                text = text.replace(escaped, " ")
    if not text.isascii():
        text = _ODD_WS_RE.sub(" ", text)
    while "  " in text:
        text = text.replace("  ", " ")
    return _trim_string_ends(text)


def _trim_string_ends(text: str) -> str:
    """Drop the space after a string's opening quote and before its closing one."""
    if '" ' in text:  # one scan rules out all four openers (most strings start without one)
        for opener in _OPENERS:
            if opener in text:
                text = text.replace(opener, opener[:2])
    if ' "' in text:
        for closer in _CLOSERS:
            if closer in text:
                text = text.replace(closer, closer[1:])
    if text.startswith('" '):
        text = '"' + text[2:]
    if text.endswith(' "'):
        text = text[:-2] + '"'
    return text


_ADDRESS_RE: Final = re.compile(r" at 0x[0-9a-fA-F]{4,16}(?=>)")
"""The memory address in a Python object repr (``<Context object at 0x7f3a5c1d2e90>``)."""
_DATETIME_PREFIX_RE: Final = re.compile(r"-\d\d-\d\d[T ]\d\d:\d\d", re.ASCII | re.IGNORECASE)
"""A part of every ``_DATETIME_IN_JSON_RE`` match that starts with a literal: the search skips
to each ``-`` (rarer than the quote the whole pattern starts with) and rules most texts out."""
_DATETIME_IN_JSON_RE: Final = re.compile(
    r'"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?"',
    re.ASCII | re.IGNORECASE)


def _fast_json(text: str, volatile: VolatileMatcher | None,
               max_chars: int) -> tuple[Any, str] | object:
    """Return (parsed, canonical JSON text) of a JSON object/array text, in (mostly) C code.

    orjson parses the text (volatile keys of results are then deleted in place) and writes it
    back compactly with sorted keys, so the only whitespace left is inside strings, which
    ``_canonical`` folds. Texts orjson rejects (``NaN``, integers beyond 64 bits, nesting
    deeper than it reads) and values that are oversized or too deep return ``_NOT_JSON``: the
    caller takes the slow path (``json.loads`` then ``normalize_value``), which ends in the same
    canonical form.
    """
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NOT_JSON
    if _CANON is not None:  # the same walk in C, when built: one pass, same equalities
        canonical = (_CANON(parsed, None, None, max_chars, False) if volatile is None else
                     _CANON(parsed, volatile.cache, volatile.classify, max_chars, True))
        if canonical is not None:
            return parsed, canonical
        parsed = orjson.loads(text)  # it stopped on something only this path signs
    if volatile is None:
        if (len(text) > min(max_chars, _LONG_LIST_CHARS)
                or text.count("[") + text.count("{") > _MAX_DEPTH
                ) and _has_long_string(parsed, max_chars, 0):
            return _NOT_JSON
    elif (len(text) > max_chars and _has_long_string(parsed, max_chars, 0)
            ) or not volatile.strip(parsed):  # the walk checks depth and list sizes itself
        return _NOT_JSON
    try:
        return parsed, _canonical(parsed, result=volatile is not None)
    except (ValueError, TypeError, RecursionError):
        return _NOT_JSON


_CANON: Final[Callable[[Any, dict[str, int] | None, Callable[[str], int] | None, int, bool],
                       str | None] | None] = NATIVE.canonical_json if NATIVE is not None else None
"""The C walk of ``_accel.c`` (``_native``): strips the volatile keys of a result in place and
writes the canonical text in the same pass; None where the value needs this module's path."""
_ODD_WS_RE: Final = re.compile(r"[^\S ]")
_NOT_JSON: Final = object()


_LONG_LIST_CHARS: Final = 2 * _MAX_ITEMS
"""A JSON text no longer than this holds no container of more than ``_MAX_ITEMS`` items."""


def _has_long_string(value: Any, max_chars: int, depth: int) -> bool:
    """Return whether ``normalize_value`` would cut ``value`` (hash, depth or item bound)."""
    if isinstance(value, str):
        return len(value) > max_chars
    if depth >= _MAX_DEPTH and isinstance(value, dict | list):
        return True  # ``normalize_value`` writes a container this deep as "\x00deep"
    if isinstance(value, dict):
        return len(value) > _MAX_ITEMS or any(
            _has_long_string(v, max_chars, depth + 1) for v in value.values())
    if isinstance(value, list):
        return len(value) > _MAX_ITEMS or any(
            _has_long_string(v, max_chars, depth + 1) for v in value)
    return False


def _json_text(value: Any, max_chars: int) -> str | None:
    if isinstance(value, str) and len(value) <= max_chars * 16:
        head = value.lstrip()[:1]
        if head in ("{", "["):
            return value
    return None
