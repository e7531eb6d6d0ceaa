"""Tool results: their signature, and the facts the detectors read (error, in progress, empty)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from otel_loopguard.signature._bounds import _DEFAULT_MAX_VALUE_CHARS
from otel_loopguard.signature._form import (
    _NOT_JSON,
    _canonical,
    _fast_json,
    _json_text,
    _parse_json_text,
    _xxh3_hex,
    digest,
    normalize_value,
)
from otel_loopguard.signature._native import NATIVE
from otel_loopguard.signature._text import text_form, without_chunk_id
from otel_loopguard.signature._volatile import VolatileMatcher

_IN_PROGRESS: Final = frozenset({"pending", "queued", "running", "in_progress", "in progress",
                                 "processing", "started", "waiting"})
_IN_PROGRESS_WORDS: Final = tuple(sorted(_IN_PROGRESS))
"""The same words, as ``str.startswith`` takes them: one call tests them all."""
_EMPTY_TEXTS: Final = frozenset({
    "", "none", "null", "no results", "no result", "no results found", "nothing found",
    "not found", "0 results", "no matches", "no match", "no data", "empty", "[]", "{}",
    "no files found", "no matches found", "no files matched", "no files matched the pattern",
    "no matching files", "no matching files found",
})

_NO_OUTPUT: Final = re.compile(
    r"\s*(?:Your command ran successfully and did not produce any output\."
    r"(?:\s*\((?:Open file|Current directory): [^\n]*\))*\s*(?:bash-\$)?"
    r"|<returncode>-?\d+</returncode>\s*<output>\s*</output>"
    r"|(?:\x1b\[\?2004[lh])*(?:\s*\[(?:The command completed with exit code -?\d+\."
    r"|Command finished with exit code -?\d+|Current working directory: [^\n\]]*"
    r"|Python interpreter: [^\n\]]*)\])+"
    r"|\((?:No content|no output)\)"
    r"|exitcode: -?\d+ \(execution (?:succeeded|failed)\)\s*Code output:)\s*\Z")
"""What a harness shows the model in place of a command's empty output, the whole result:
SWE-agent 0.x's sentence with its state lines (``(Open file: ...)``, ``(Current directory:
...)``, ``bash-$``), mini-swe-agent's envelope with an empty ``<output>``, OpenHands' status
lines alone (exit code, working directory, interpreter), Claude Code's ``(No content)``,
AutoGen's code executor with no ``Code output``. Empty, as ``""`` is: different searches that
all find nothing are not the same result returned again."""
_SAYS_NO_OUTPUT: Final = _NO_OUTPUT.match
_MAX_FORM_CHARS: Final = 1 << 20
"""Longer plain-text results are signed by their raw text, not their canonical form (whose
masking costs 10 to 40 ns per character, and up to four copies of the text, in span.end())."""
_JSON_HEADS: Final = ("{", "[")
_NO_OUTPUT_MAX: Final = 512
"""Longer results are not one of ``_NO_OUTPUT`` (its longest: a path in SWE-agent's lines).
Read from the raw text on either path (C or Python), whatever ``max_value_chars`` is."""


@dataclass(slots=True)
class ResultInfo:
    """What the detectors need to know about one result, computed once per call.

    Read-only by convention (a run's recent results share theirs), not frozen: it is built for
    every result, as the value objects of ``otel_loopguard.types`` are.
    """

    digest: str
    """Signature of the result with volatile fields stripped."""
    error: str | None = None
    """Error text of a structured error result (``error``, ``status>=400``, ``ok: false``)."""
    in_progress: bool = False
    """True when the result reports a job still pending, queued or running."""
    empty: bool = False
    """True when the result carries nothing (empty, ``null``, ``"no results"``...)."""


def analyze_result(  # noqa: PLR0911 - one exit per way a result is read, cheapest first
    result: Any,
    volatile: VolatileMatcher,
    *,
    max_value_chars: int = _DEFAULT_MAX_VALUE_CHARS,
) -> ResultInfo:
    """Return the signature and structured facts of a tool result; never raises."""
    try:
        if type(result) is str:  # most results
            size = len(result)
            if size > _MAX_FORM_CHARS and result[:64].lstrip()[:1] not in _JSON_HEADS:
                # a text this long is no short status and rarely repeats but for its
                # timestamps: its raw digest, not its canonical form, keeps span.end()'s cost
                # and memory small
                return ResultInfo(digest=digest("\x00long:" + digest(result)))
            if _SIGN is not None:  # read whole in C
                signed = _SIGN(result, volatile, max_value_chars, ResultInfo, _xxh3_hex)
                if signed is not None:
                    if not isinstance(signed, ResultInfo):
                        return _signed_info(result, signed, volatile)
                    return _emptied(signed) if size < _NO_OUTPUT_MAX and not signed.empty \
                        and _SAYS_NO_OUTPUT(result) is not None else signed
        text = _json_text(result, max_value_chars)
        fast = _fast_json(text, volatile, max_value_chars) if text is not None else _NOT_JSON
        if isinstance(fast, tuple):
            return _result_info(*fast)
        parsed = result
        if isinstance(result, str) and len(result) <= max_value_chars * 16:
            parsed = _parse_json_text(result)
        elif isinstance(result, bytes | bytearray) and len(result) <= max_value_chars * 16:
            parsed = _parse_json_text(bytes(result).decode("utf-8", "replace"))
        if isinstance(parsed, str):  # plain text: mask what changes between identical runs
            # (Codex CLI's command output: its first line left out, as the C reading does)
            info = _text_info(without_chunk_id(parsed), max_value_chars)
            return _emptied(info) if len(parsed) < _NO_OUTPUT_MAX and not info.empty \
                and _SAYS_NO_OUTPUT(parsed) is not None else info
        normalized = normalize_value(parsed, volatile=volatile, max_value_chars=max_value_chars)
        sig = digest(_canonical(normalized, result=True))
    except (ValueError, TypeError, RecursionError) as exc:
        return ResultInfo(digest=digest("\x00unsignable:" + type(exc).__name__))
    return ResultInfo(
        digest=sig,
        error=_structured_error(normalized),
        in_progress=_in_progress(normalized),
        empty=_is_empty(normalized),
    )


_SIGN: Final[Callable[[str, VolatileMatcher, int, type[ResultInfo], Callable[[bytes], str]],
                      ResultInfo | tuple[str, bool, tuple[tuple[str, int, int], ...]] | None]
              | None] = NATIVE.sign_result if NATIVE is not None else None
"""The C reading of a str result (``_accel.c``): a JSON object or array (its canonical text as
``_fast_json`` gives it) or plain ASCII text (``_text_info``'s form), hashed and made into its
ResultInfo in one call; for a JSON object with members that the error and in-progress facts
read, (digest, empty, where those members are) instead; None where the result needs the Python
path."""


def _signed_info(text: str, signed: tuple[str, bool, tuple[tuple[str, int, int], ...]],
                 volatile: VolatileMatcher) -> ResultInfo:
    """Return the ResultInfo of a JSON object the C reading signed: only its fact members parsed.

    The error and in-progress facts read only the members named in ``_ERROR_KEYS``,
    ``_STATE_KEYS`` and their messages, so a mapping of those alone (their values stripped of
    volatile keys, as the whole result's are) gives the same facts as the whole result.
    """
    sig, empty, members = signed
    values: dict[str, Any] = {}
    for key, start, end in members:
        value = orjson.loads(text[start:end])
        if type(value) is dict or type(value) is list:
            volatile.strip(value)
        values[key] = value
    return ResultInfo(digest=sig, error=_structured_error(values),
                      in_progress=_in_progress(values), empty=empty)


def _text_info(text: str, max_value_chars: int) -> ResultInfo:
    """Return the signature and facts of a plain-text result, from its canonical form.

    The form (``text_form``) is hashed whatever its length; the facts (in progress, empty) are
    read from texts up to ``max_value_chars`` only, as a longer text is not a short status.
    """
    form = text_form(text)
    if len(form) > max_value_chars:
        return ResultInfo(digest=digest("\x00text:" + form))
    return ResultInfo(digest=digest("\x00text:" + form), in_progress=_in_progress(form),
                      empty=_is_empty(form))


def _emptied(info: ResultInfo) -> ResultInfo:
    """Return a copy of ``info`` that is empty (the result is a harness's "no output")."""
    return ResultInfo(digest=info.digest, error=info.error, in_progress=info.in_progress,
                      empty=True)


def _result_info(parsed: Any, canonical: str) -> ResultInfo:
    return ResultInfo(digest=digest(canonical), error=_structured_error(parsed),
                      in_progress=_in_progress(parsed), empty=_is_empty(parsed))


_ERROR_KEYS: Final = frozenset({"error", "status", "status_code", "statusCode", "code", "ok",
                                "success"})


def _structured_error(value: Any) -> str | None:
    if not isinstance(value, dict) or _ERROR_KEYS.isdisjoint(value):
        return None
    err = value.get("error")
    if err not in (None, False, "", {}, []):
        return _canonical(err) if not isinstance(err, str) else err
    for key in ("status", "status_code", "statusCode", "code"):
        code = _as_int(value.get(key))
        if code is not None and 400 <= code <= 599:
            message = value.get("message") or value.get("detail") or ""
            return f"{code} {message}".strip()
    status = value.get("status")
    if isinstance(status, str) and status.lower() == "error":  # Google ADK's error convention
        return str(value.get("error_message") or value.get("message") or value.get("detail")
                   or status)
    if value.get("ok") is False or value.get("success") is False:
        return str(value.get("message") or value.get("detail") or "ok: false")
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) == 3:
        return int(value)
    return None


_STATE_KEYS: Final = frozenset({"status", "state", "phase"})


def _in_progress(value: Any) -> bool:
    if isinstance(value, dict):
        if _STATE_KEYS.isdisjoint(value):
            return False
        for key in ("status", "state", "phase"):
            state = value.get(key)
            if isinstance(state, str) and state.lower() in _IN_PROGRESS:
                return True
        return False
    if isinstance(value, str):
        head = value[:40].lower().lstrip()
        return head.startswith(_IN_PROGRESS_WORDS)
    return False


def _is_empty(value: Any, depth: int = 0) -> bool:
    """Return True for a result that carries nothing: null, "no results", [], {"items": []}.

    Inside a mapping, a zero counts as empty too (``{"total": 0, "items": []}``).
    """
    if value is None:
        return True
    if isinstance(value, str):
        return len(value) < 40 and value.strip(" .!").lower() in _EMPTY_TEXTS
    if not isinstance(value, dict | list):
        return False
    if depth >= 2:
        return not value
    if isinstance(value, dict):
        return _all_empty(value.values(), True, depth)
    return _all_empty(value, False, depth)


def _all_empty(values: Iterable[Any], in_mapping: bool, depth: int) -> bool:
    """Return True when every one of ``values`` is empty (``in_mapping``: zeros count as empty).

    Strings and numbers are tested inline; the loop returns at the first value that carries
    something.
    """
    for item in values:
        if item is None:
            continue
        kind = type(item)
        if kind is str:
            if len(item) >= 40 or item.strip(" .!").lower() not in _EMPTY_TEXTS:
                return False
        elif kind is bool:
            return False
        elif kind is int or kind is float or isinstance(item, int | float):
            if not in_mapping or item != 0:
                return False
        elif not _is_empty(item, depth + 1):
            return False
    return True
