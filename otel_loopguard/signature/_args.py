"""A tool call's signature: its arguments' canonical form and text, and their digest.

The text of a JSON object (most arguments) is parsed, written canonically and hashed in one C
call where the accelerator is built (``_SIGN_CALL``, ``_ARGS``); anything else takes the
canonical form of ``_form`` (``_fast_json``, ``normalize_value``, ``_canonical``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from otel_loopguard.signature._bounds import _DEFAULT_MAX_VALUE_CHARS
from otel_loopguard.signature._form import (
    _canonical,
    _fast_json,
    _json_text,
    _parse_json_text,
    _xxh3_hex,
    digest,
    normalize_value,
)
from otel_loopguard.signature._native import NATIVE

__all__ = ["call_signature", "canonical_args", "normalize_args", "tool_signature"]


def canonical_args(arguments: Any, *, max_value_chars: int = _DEFAULT_MAX_VALUE_CHARS,
                   ) -> tuple[Any, str]:
    """Return (canonical arguments, their canonical JSON text), fast for JSON strings.

    A plain ``dict`` of JSON values takes the same path as its JSON text, written by orjson
    (values orjson writes natively, such as UUIDs and enum members, sign as their JSON form).
    """
    if _ARGS is not None and type(arguments) is str:  # most: a JSON object's text, read in C
        signed = _ARGS(arguments, max_value_chars, _LOADS)
        if signed is not None:
            return signed
    return _args_in_python(arguments, max_value_chars)


def _args_in_python(arguments: Any, max_value_chars: int) -> tuple[Any, str]:
    """``canonical_args`` of arguments that its C reading (``_ARGS``) leaves to Python."""
    text = _json_text(arguments, max_value_chars)
    if text is None and type(arguments) is dict:
        text = _dict_json(arguments, max_value_chars)
    if text is not None:
        fast = _fast_json(text, None, max_value_chars)
        if isinstance(fast, tuple):
            return fast
    normalized = normalize_args(arguments, max_value_chars=max_value_chars)
    return normalized, _canonical(normalized)


_ARGS: Final[Callable[[str, int, Callable[[str], Any]], tuple[dict[str, Any], str] | None]
              | None] = NATIVE.canonical_args if NATIVE is not None else None
"""The first branch of ``canonical_args`` in C (``_accel.c``): for the text of a JSON object,
``orjson.loads`` of it and ``_CANON`` of that, in one call; None where the rest of
``canonical_args`` must sign it (not an object's text, one orjson rejects, or one ``_CANON``
leaves to Python)."""
_LOADS: Final = orjson.loads


_WRITE_STRICT: Final = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME
                        | orjson.OPT_PASSTHROUGH_DATACLASS)
"""orjson options that make it refuse what ``normalize_value`` writes its own way."""


def _dict_json(arguments: dict[Any, Any], max_chars: int) -> str | None:
    """Return the JSON text of a mapping of JSON values, or None (take the general path).

    ``null`` may stand for NaN or infinity (orjson writes them so; ``normalize_value`` keeps
    them apart), so a text with one takes the general path too.
    """
    try:
        raw = orjson.dumps(arguments, option=_WRITE_STRICT)
    except TypeError:  # orjson.JSONEncodeError included: sets, bytes, big ints, odd keys...
        return None
    if len(raw) > max_chars * 16 or b"null" in raw:
        return None
    return raw.decode()


def normalize_args(arguments: Any, *, max_value_chars: int = _DEFAULT_MAX_VALUE_CHARS) -> Any:
    """Return the canonical structure of tool arguments (a JSON string is parsed first).

    Keys are sorted and oversized strings hashed; whitespace inside strings is folded when the
    structure is written as canonical JSON text (``canonical_args``).
    """
    if isinstance(arguments, str) and len(arguments) <= max_value_chars * 16:
        arguments = _parse_json_text(arguments)
    return normalize_value(arguments, max_value_chars=max_value_chars)


def tool_signature(tool: str, arguments: Any, *,
                   max_value_chars: int = _DEFAULT_MAX_VALUE_CHARS) -> str:
    """Return the signature of a call: a digest of the tool name and canonical arguments."""
    return call_signature(tool, arguments, max_value_chars)[1]


def call_signature(tool: str, arguments: Any, max_value_chars: int) -> tuple[Any, str]:
    r"""Return (canonical arguments, the call's signature); never raises for arguments.

    The signature is the digest of the tool's name, a NUL and ``canonical_args``'s text
    (``"\x00unsignable:<error>"`` for arguments it cannot sign); the canonical arguments are
    None for those. The text of a JSON object is parsed, written and hashed in one C call when
    the accelerator is built (``_SIGN_CALL``). Narration (``without_narration``) is no part of
    either.
    """
    try:
        if _SIGN_CALL is not None and type(tool) is str:
            signed = _SIGN_CALL(tool, arguments, max_value_chars, _LOADS, _xxh3_hex)
            if signed is not None:  # no narration key: its C reading leaves those to Python
                return signed
            args, canonical = _args_in_python(arguments, max_value_chars)  # as _ARGS's None
        else:
            args, canonical = canonical_args(arguments, max_value_chars=max_value_chars)
    except (ValueError, TypeError, RecursionError) as exc:  # pathological values still sign
        args, canonical = None, "\x00unsignable:" + type(exc).__name__
    signed = args, digest(tool + "\x00" + canonical)
    if type(args) is dict and len(args) > 1 and not NARRATION_KEYS.isdisjoint(args):
        return _narrated(tool, signed, max_value_chars)
    return signed


NARRATION_KEYS: Final = frozenset({"thought", "thoughts", "reasoning", "rationale",
                                   "explanation", "justification", "step"})
"""Argument keys in which a model narrates why it acts (Agent TARS's and UI-TARS's
``{"thought": .., "step": .., "action": "click(..)"}``): reworded on every call, they made the
same click again look like another call (``without_narration``)."""


def without_narration(args: dict[str, Any]) -> dict[str, Any]:
    """Return ``args`` without the text of its ``NARRATION_KEYS``, when another key acts.

    Acting: another key holds text (the action, a query, a path). Narration is kept where
    nothing else says what the call does: a ``think`` tool's only ``thought``, or the sequential
    thinking tool's ``thought`` beside its numbers. ``args`` itself when nothing is dropped.
    """
    acting = {key: value for key, value in args.items()
              if key not in NARRATION_KEYS or type(value) is not str}
    if len(acting) == len(args) or not any(type(value) is str for value in acting.values()):
        return args
    return acting


def _narrated(tool: str, signed: tuple[dict[str, Any], str], max_value_chars: int,
              ) -> tuple[dict[str, Any], str]:
    """``call_signature`` of arguments holding a narration key: signed ``without_narration``."""
    acting = without_narration(signed[0])
    if acting is signed[0]:
        return signed
    try:
        canonical = canonical_args(acting, max_value_chars=max_value_chars)[1]
    except (ValueError, TypeError, RecursionError):  # signed once already: keep that
        return signed
    return acting, digest(tool + "\x00" + canonical)


_SIGN_CALL: Final[Callable[[str, Any, int, Callable[[str], Any], Callable[[bytes], str]],
                           tuple[dict[str, Any], str] | None]
                  | None] = NATIVE.sign_call if NATIVE is not None else None
"""``call_signature`` of the text of a JSON object in C (``_accel.c``): ``_ARGS`` and the digest
in one call; None where ``canonical_args`` must sign it, and for a dict of two keys or more
holding one of ``NARRATION_KEYS``."""
