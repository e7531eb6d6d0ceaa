"""The C accelerator of text results computes exactly the Python definition, and the findings
are the same with it and without it.

The accelerator is built from its source here when the installed package lacks it (an editable
install, a pure-Python wheel); the tests skip only when this machine cannot compile it.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest
from _compiled import compiled
from corpus import replay
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_loopguard.signature._args as args_module
import otel_loopguard.signature._form as form_module
import otel_loopguard.signature._results as results_module
import otel_loopguard.signature._text as text_module
from otel_loopguard.signature._text import SCREEN_TEXT, canonical_text

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def accel(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled accelerator: the installed one, else one built from the source now."""
    return compiled("otel_loopguard/signature/_accel.c", tmp_path_factory)


_PIECES = (*"0123456789abcdefABCDEFxXzZTt:.,-+_ \n\t\r\x0b\x1c#gmsé",
    "ms", "sec", "Seconds", "minutes", " hours", "h", "hr", "2026-11-29T10:00:00.5+05:30",
    "2026-11-29 10:00", "0x7f3a", "0x", "deadbeef", "12:34:56", "1:02:03,4", "in 0.53s",
    "3f2a9c1b-7d4e-4b1a-9c3d-0123456789ab", "123456789012", "abcdef123456", "  ", "\n\n",
    "Cell In[", "Cell In", "ell In[", "]", "[", "ipython-input-", "python-input-", "cell in[")


_ARABIC_DATE = "\u0662\u0660\u0662\u0666-\u0661\u0661-\u0662\u0669"  # 2026-11-29
_UNICODE_PIECES = (*_PIECES, *"éµ\u03bc\u039c\u017f\u0131\u0130\u0663\u0660中_",
                   *"\xa0\u2028\u3000\U0001f600", "µs", "\u03bcs", "\u017fec", "m\u0130n",
                   _ARABIC_DATE + " 10:00", "é12 ms", "12 ms é", "\u0663 h")


def _random_texts(count: int, seed: int, pieces: tuple[str, ...] = _PIECES) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30)))


def test_random_texts_get_the_python_form(accel: ModuleType) -> None:
    differ = [text for text in _random_texts(60_000, 7)
              if accel.canonical_text(text) != canonical_text(text)]
    assert not differ, f"{len(differ)} texts differ, first: {differ[:3]!r}"


def test_text_past_ascii_gets_the_python_form(accel: ModuleType) -> None:
    """re's Unicode mode: other digits and letters, case-insensitive units, more whitespace."""
    differ = [text for text in _random_texts(60_000, 8, _UNICODE_PIECES)
              if accel.canonical_text(text) != canonical_text(text)]
    assert not differ, f"{len(differ)} texts differ, first: {differ[:3]!r}"
    assert accel.canonical_text("took 12 ms — done") == "took # — done"
    text = f"took 12 µs — 3 \u017fecs, 4 M\u0130NS, {_ARABIC_DATE}T10:00"
    assert accel.canonical_text(text) == canonical_text(text) == "took # — #, #, #"
    with pytest.raises(TypeError, match="takes a str"):
        accel.canonical_text(b"bytes")


def test_what_the_form_masks(accel: ModuleType) -> None:
    cases = {
        "ran 12 tests in 0.53s\n\nOK": "ran 12 tests in # OK",
        "at 2026-11-29T10:00:05.123Z job 3f2a9c1b7d4e started": "at # job # started",
        "<Context object at 0x7f3a5c1d2e90> 3 failed, 2 passed":
            "<Context object at #> 3 failed, 2 passed",
        "  job:3f2a9c1b7d4e  ": "job:3f2a9c1b7d4e",  # one word: the answer, not noise
        "line 12:34 col 5": "line 12:34 col 5",
        # an IPython traceback's execution counter; its line number stays
        "Traceback\nCell In[12], line 3\n  f()": "Traceback Cell In[#], line 3 f()",
        "File <ipython-input-7-3f2a9c1b7d4e>:5": "File <ipython-input-#-#>:5",
        "cell in[12], In [3]: Out[3]:": "cell in[12], In [3]: Out[3]:",
        "": "",
        # a web agent's reading of its screenshot ends the form; the line before it stays
        f"[Forums](https://a.org/) 21%\r\n  \n{SCREEN_TEXT}\n\nMenu 0x7f3a5c1d at 10:00:01":
            f"[Forums](https://a.org/) 21% {SCREEN_TEXT}",
        f"\n{SCREEN_TEXT}\nEspa\u00f1ol 12 ms": SCREEN_TEXT,
        f"Espa\u00f1ol 12 ms\n{SCREEN_TEXT} x": f"Espa\u00f1ol # {SCREEN_TEXT}",
        f"quoted: {SCREEN_TEXT} took 3 s": f"quoted: {SCREEN_TEXT} took #",
        f"{SCREEN_TEXT} first, no line before it": f"{SCREEN_TEXT} first, no line before it",
        f"cut\n{SCREEN_TEXT[:-1]}": f"cut {SCREEN_TEXT[:-1]}",
    }
    for text, form in cases.items():
        assert canonical_text(text) == form, text
        assert accel.canonical_text(text) == form, text


def _corpus_texts() -> Iterator[str]:
    for run in replay.iter_runs():
        for turn in run["turns"]:
            for call in turn["calls"]:
                result = call.get("result")
                if isinstance(result, str) and result.lstrip()[:1] not in ("{", "["):
                    yield result


@pytest.mark.slow
def test_every_text_result_of_the_corpus_gets_the_python_form(accel: ModuleType) -> None:
    """The C form and signature of each text result, and the facts analyze_result gives from
    them (a harness's "no output" is read after either), are the Python path's."""
    from otel_loopguard.signature import VolatileMatcher, analyze_result

    texts = differ = 0
    first = ""
    for text in _corpus_texts():
        texts += 1
        if accel.canonical_text(text) != canonical_text(text) or (
                _sign(accel, text) is not None
                and analyze_result(text, VolatileMatcher()) != _pure_python_result(text)):
            differ += 1
            first = first or text
    assert texts > 10_000
    assert not differ, f"{differ} of {texts} corpus texts differ, first: {first[:200]!r}"


@pytest.mark.slow
def test_findings_are_the_same_without_the_accelerator(
        accel: ModuleType, wire: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored findings on every corpus, with no C at all and with both modules (the
    signatures' and the OTLP/JSON span records of ``check``'s reader)."""
    from _golden_findings import GOLDEN, all_findings, dump

    import otel_loopguard.engine as engine_module
    import otel_loopguard.otlp._json as json_module
    from otel_loopguard.detectors._step import Step
    from otel_loopguard.types import Decision

    monkeypatch.setattr(text_module, "_SCAN", None)
    monkeypatch.setattr(form_module, "_CANON", None)
    monkeypatch.setattr(args_module, "_ARGS", None)
    monkeypatch.setattr(args_module, "_SIGN_CALL", None)
    monkeypatch.setattr(results_module, "_SIGN", None)
    monkeypatch.setattr(engine_module, "_NEW_STEP", Step)
    monkeypatch.setattr(engine_module, "_NEW_DECISION", Decision)
    monkeypatch.setattr(json_module, "_JSON_SPANS", None)
    stored = json.loads(GOLDEN.read_text())
    assert json.loads(dump(all_findings())) == stored
    monkeypatch.setattr(text_module, "_SCAN", accel.canonical_text)
    monkeypatch.setattr(form_module, "_CANON", accel.canonical_json)
    monkeypatch.setattr(args_module, "_ARGS", accel.canonical_args)
    monkeypatch.setattr(args_module, "_SIGN_CALL", accel.sign_call)
    monkeypatch.setattr(results_module, "_SIGN", accel.sign_result)
    monkeypatch.setattr(engine_module, "_NEW_STEP", partial(accel.new_slotted, Step))
    monkeypatch.setattr(engine_module, "_NEW_DECISION", partial(accel.new_slotted, Decision))
    monkeypatch.setattr(json_module, "_JSON_SPANS", wire.json_spans)
    assert json.loads(dump(all_findings())) == stored


def _pure_python_result(text: str, max_value_chars: int = 4096) -> object:
    """analyze_result of ``text`` with no part of the accelerator."""
    from otel_loopguard.signature import VolatileMatcher, analyze_result

    saved = results_module._SIGN, text_module._SCAN
    results_module._SIGN = text_module._SCAN = None  # type: ignore[misc]
    try:
        return analyze_result(text, VolatileMatcher(), max_value_chars=max_value_chars)
    finally:
        results_module._SIGN, text_module._SCAN = saved  # type: ignore[misc]


def test_text_results_signed_in_c_get_the_python_signature_and_facts(accel: ModuleType) -> None:
    """sign_result of plain text: the digest of its form, and its facts, as the Python path."""
    from otel_loopguard.signature import VolatileMatcher, analyze_result
    from otel_loopguard.signature._results import ResultInfo

    texts = [*_random_texts(20_000, 9), *_random_texts(5_000, 10, _UNICODE_PIECES),
             "Pending", "  running job 12 ", "In progress...", "waiting", "No results.",
             " none ", "nothing found!", "", "   ", "x" * 5000, "queued " * 700,
             "No files found", "no matches found.", "No matches found!!", "no files found x",
             '{"output": "No files found"}', '["No matches found"]',
             "No files matched the pattern.", "no files matched the patterns",
             '{"output": "No matching files found."}', "NO MATCHING FILES",
             # Codex CLI's first line, and texts that only look like it
             "Chunk ID: 3f2a9c\nWall time: 0.4 seconds\nOutput:\nok", "Chunk ID: 3f2a9c\r\nok",
             "Chunk ID: \nok", "Chunk ID: 3f2a9c", "Chunk ID: 3f_2a\nok", "Chunk ID: 3f 2a\nok",
             "Chunk ID: " + "a" * 64 + "\nok", "Chunk ID: " + "a" * 65 + "\nok",
             "chunk ID: 3f2a9c\nok", " Chunk ID: 3f2a9c\nok", 'Chunk ID: ab\n{"a": 1}',
             "Chunk ID: ab\n(No content)", "Chunk ID: ab\nNo results."]
    signed = 0
    for text in texts:
        info = _sign(accel, text)
        if info is not None and text.lstrip()[:1] not in ("{", "["):
            signed += 1
            assert isinstance(info, ResultInfo), text
            assert info == _pure_python_result(text), text
        assert analyze_result(text, VolatileMatcher()) == _pure_python_result(text), text
    assert signed > 15_000
    for text in ('{"a": "x y"}', "x " * 3000, "ok"):  # bounds past any length, as Python has
        for bound in (2**70, sys.maxsize):
            assert analyze_result(text, VolatileMatcher(), max_value_chars=bound) == \
                _pure_python_result(text, bound), text
    facts = {text: (info.in_progress, info.empty) for text in ("Pending", "In progress...",
             "No results.", "queued " * 700) if isinstance(info := _sign(accel, text), ResultInfo)}
    assert facts == {"Pending": (True, False), "In progress...": (True, False),
                     "No results.": (False, True), "queued " * 700: (False, False)}


def _python_canonical(text: str, result: bool) -> str | None:
    from otel_loopguard.signature import VolatileMatcher

    saved = form_module._CANON
    form_module._CANON = None  # type: ignore[misc]
    try:
        fast = form_module._fast_json(text, VolatileMatcher() if result else None, 4096)
    finally:
        form_module._CANON = saved  # type: ignore[misc]
    return fast[1] if isinstance(fast, tuple) else None


def _c_canonical(accel: ModuleType, text: str, result: bool) -> str | None:
    import orjson

    from otel_loopguard.signature import VolatileMatcher

    matcher = VolatileMatcher()
    parsed = orjson.loads(text)
    if result:
        form: str | None = accel.canonical_json(parsed, matcher.cache, matcher.classify, 4096,
                                                True)
        return form
    form = accel.canonical_json(parsed, None, None, 4096, False)
    return form


_STRINGS = ("a", "a b", " a  b ", "a\tb", "a\nb", "x \\n y", "é", "é\u00a0é", "\u2028",
            "2026-11-29T10:00:05Z", "2026-11-29 10:00", " 2026-11-29T10:00:05.5 +05:30 ",
            "2026-11-29T10:00:05.5+0530", "2026-11-29", "q\"uote", "back\\slash", "\x08",
            "ctl\x01", "", "Mon, 17 Mar 2025 10:00:05 GMT", "Mar 17 9:05:00 2025", "17 Mar 2025",
            "1 12:3", "5 123:45", "x T10:00", "7t1:2", "7T1:23")
_KEYS = ("id", "name", "created_at", "requestId", "etag", "date", "Date", "x y", " x", "é")


def _random_value(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth < 3 and roll < 0.25:
        return {rng.choice(_KEYS): _random_value(rng, depth + 1)
                for _ in range(rng.randrange(0, 5))}
    if depth < 3 and roll < 0.4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if roll < 0.75:
        return rng.choice(_STRINGS)
    return rng.choice((0, 1, -1, 1.0, -0.0, 0.0, 0.5, 1e16, 2**63, None, True, False))


def _variant(rng: random.Random, value: object) -> object:
    """``value`` with one thing changed that may or may not change its signature."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        if items and rng.random() < 0.7:
            key, item = rng.choice(items)
            return {**dict(items), key: _variant(rng, item)}
        return {**dict(items), rng.choice(_KEYS): rng.choice(_STRINGS)}
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        return [*value[:i], _variant(rng, value[i]), *value[i + 1:]]
    if isinstance(value, str) and rng.random() < 0.5:
        return rng.choice(("  ", "\n", " ", "\t")).join(value.split(" "))
    return rng.choice((*_STRINGS, 0, 1.0, None))


def test_random_json_has_the_python_equalities(accel: ModuleType) -> None:
    import orjson

    rng = random.Random(11)
    compared = 0
    for _ in range(20_000):
        value = _random_value(rng)
        other = _variant(rng, value)
        for result in (True, False):
            texts = [orjson.dumps(v).decode() for v in (value, other)]
            python = [_python_canonical(t, result) for t in texts]
            native = [_c_canonical(accel, t, result) for t in texts]
            if None in native or None in python:
                continue  # either path leaves it to the general path
            compared += 1
            assert (python[0] == python[1]) == (native[0] == native[1]), (texts, result)
    assert compared > 10_000


_ANY_CHAR = st.characters(exclude_categories=[])  # lone surrogates included
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(_ANY_CHAR, max_size=40)
    | st.binary(max_size=8) | st.tuples(st.integers()),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=5),
    max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(value=_JSONISH, result=st.booleans())
def test_any_value_is_written_or_left_to_python(accel: ModuleType, value: object,
                                                result: bool) -> None:
    """Whatever it is handed (surrogates, odd types and keys, huge numbers), the walk returns
    text or None and never fails; the signature functions still sign it."""
    from otel_loopguard.signature import VolatileMatcher, analyze_result, tool_signature

    matcher = VolatileMatcher()
    form = accel.canonical_json(value, matcher.cache if result else None,
                                matcher.classify if result else None, 4096, result)
    assert form is None or isinstance(form, str)
    assert len(analyze_result(value, matcher).digest) == 16
    assert len(tool_signature("t", value)) == 16


@settings(max_examples=300, deadline=None)
@given(text=st.text(_ANY_CHAR))
def test_any_text_gets_the_python_form(accel: ModuleType, text: str) -> None:
    assert accel.canonical_text(text) == canonical_text(text)


def test_arguments_text_is_read_as_loads_then_the_walk(accel: ModuleType) -> None:
    """canonical_args in C: orjson.loads of a JSON object's text and the walk of it, or None
    (then the Python path signs it) for what is not an object's text or what loads rejects."""
    import orjson

    rng = random.Random(11)
    texts = [json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5,
                        indent=rng.choice((None, 2))) for _ in range(3000)]
    texts += ['{"a": 1', '{"a": NaN}', "[1]", "", " {}", '{"s": "<C at 0x7f3a5c1d>"}',
              '{"a": "' + "x" * 5000 + '"}', "{}", '{"k": "\u00e9 \u2028 x"}']
    objects = 0
    for text in texts:
        signed = accel.canonical_args(text, 4096, orjson.loads)
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            assert signed is None, text
            continue
        walked = accel.canonical_json(parsed, None, None, 4096, False) \
            if text[:1] == "{" and type(parsed) is dict else None
        assert signed == (None if walked is None else (parsed, walked)), text
        objects += walked is not None
    assert objects > 500
    assert accel.canonical_args('{"a": 1}', 0, orjson.loads) is None  # over 16 * max_chars

    def refuse(text: str) -> object:
        raise TypeError(text)

    with pytest.raises(TypeError):
        accel.canonical_args('{"a": 1}', 4096, refuse)


def test_arguments_with_a_narration_key_are_left_to_python(accel: ModuleType) -> None:
    """sign_call leaves a dict of two keys or more holding a key of ``NARRATION_KEYS`` (and no
    other) to Python, which drops the narration: the C list is the Python one."""
    import orjson

    from otel_loopguard.signature._form import _xxh3_hex

    def sign(arguments: dict[str, object]) -> object:
        return accel.sign_call("t", json.dumps(arguments), 4096, orjson.loads, _xxh3_hex)

    for key in args_module.NARRATION_KEYS:
        assert sign({key: "why", "action": "click"}) is None, key
        assert sign({key: "why"}) is not None, key  # alone: nothing to drop
    for key in ("thinking", "steps", "Thought", "reason", "explain", "stepper", "thought_"):
        assert sign({key: "why", "action": "click"}) is not None, key


def test_deep_nesting_and_lone_surrogates_are_left_to_python(accel: ModuleType) -> None:
    assert accel.canonical_json({"a": "x \ud800"}, None, None, 4096, False) is None
    text = "x \ud800 took 12 ms"
    assert accel.canonical_text(text) == canonical_text(text) == "x \ud800 took #"
    deep: object = "x"
    for _ in range(5_000):
        deep = [deep]
    assert accel.canonical_json(deep, None, None, 4096, False) is None


# --- JSON results read straight from their text (sign_result) --------------------------------
_FACT_KEYS = ("error", "status", "status_code", "statusCode", "code", "ok", "success",
              "message", "detail", "error_message", "state", "phase")
_RESULT_KEYS = (*_KEYS, *_FACT_KEYS, "timestamp", "items", "total", "data")
_RESULT_STRINGS = (*_STRINGS, "No results.", " none ", "[]", "pending", "Running", "error",
                   "404", "not found!", "x" * 41, "Ünïcödé", "\u00e9")


def _random_result(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth < 4 and (depth == 0 or roll < 0.3):
        if depth and roll < 0.1:
            return [_random_result(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
        return {rng.choice(_RESULT_KEYS): _random_result(rng, depth + 1)
                for _ in range(rng.randrange(0, 6))}
    if roll < 0.45:
        return [_random_result(rng, depth + 1) for _ in range(rng.randrange(0, 3))] \
            if depth < 4 else []
    if roll < 0.8:
        return rng.choice(_RESULT_STRINGS)
    return rng.choice((0, 1, -1, 1.0, -0.0, 0.0, 0.5, 1e16, 401, 503, "500", 2**63, None,
                       True, False, 1.5e-320))


def _result_text(rng: random.Random, value: object) -> str:
    """``value`` as JSON text: compact or indented, escaped or not, keys in any order."""
    if rng.random() < 0.5:
        return json.dumps(value, ensure_ascii=rng.random() < 0.5,
                          indent=rng.choice((None, 2, "\t")), sort_keys=rng.random() < 0.3)
    return json.dumps(value, separators=(",", ":"))


def _python_result(text: str) -> object:
    """analyze_result as it is without the C reading of JSON results (the walk still on)."""
    from otel_loopguard.signature import VolatileMatcher, analyze_result

    saved = results_module._SIGN
    results_module._SIGN = None  # type: ignore[misc]
    try:
        return analyze_result(text, VolatileMatcher())
    finally:
        results_module._SIGN = saved  # type: ignore[misc]


def _sign(accel: ModuleType, text: str) -> object:
    """sign_result of ``text`` with a new matcher, as analyze_result calls it."""
    from otel_loopguard.signature import VolatileMatcher
    from otel_loopguard.signature._form import _xxh3_hex
    from otel_loopguard.signature._results import ResultInfo

    return accel.sign_result(text, VolatileMatcher(), 4096, ResultInfo, _xxh3_hex)


def _assert_signed_as_walked(accel: ModuleType, text: str) -> bool:
    """Assert that a text sign_result reads gets the digest of the walk's form and the same
    facts; return whether it read it."""
    import orjson

    from otel_loopguard.signature import VolatileMatcher, analyze_result
    from otel_loopguard.signature._form import _xxh3_hex
    from otel_loopguard.signature._results import ResultInfo

    signed = _sign(accel, text)
    if signed is None:
        return False
    if text.lstrip()[:1] not in ("{", "["):  # plain text: see test_text_results_signed_in_c
        assert signed == _python_result(text), text
        return False
    other = VolatileMatcher()
    walked = accel.canonical_json(orjson.loads(text), other.cache, other.classify, 4096, True)
    sig = signed.digest if isinstance(signed, ResultInfo) else signed[0]  # type: ignore[index]
    assert sig == _xxh3_hex(walked.encode()), text
    assert analyze_result(text, VolatileMatcher()) == _python_result(text), text
    return True


def test_json_results_read_from_their_text_get_the_walks_form_and_facts(
        accel: ModuleType) -> None:
    rng = random.Random(5)
    read = 0
    for _ in range(20_000):
        read += _assert_signed_as_walked(accel, _result_text(rng, _random_result(rng)))
    assert read > 15_000


def test_json_results_that_orjson_reads_otherwise_are_left_to_python(accel: ModuleType) -> None:
    for text in ('{"a":1,"a":2}', '{"a": 12345678901234567890}', '{"a": 1e400}', '{"a": NaN}',
                 '{"a": 1} x', '{"a": 1,}', '{"a": "\\x"}', '{"a": "\\ud800"}',
                 '{"a": "\\udc00x"}', '{"a": "b\x01"}', '{"a\\n": 1}', '[01]', '[1.]',
                 '{"<obj at 0x7fff1234>": 1}', '{"a": "' + "x" * 5000 + '"}',
                 "[" * 40 + "]" * 40, '{"a": "\u20ac"}', "\x0c[1]", '{"a" 1}', "[tru]"):
        assert _sign(accel, text) is None, text
        assert _python_result(text) is not None


def test_strings_read_8_bytes_at_a_time_get_the_walks_form(accel: ModuleType) -> None:
    """Spaces, quotes, escapes, control and wide characters at every offset of a string, and
    an object repr's address anywhere (a key too), as the walk of parsed values reads them."""
    pieces = ("  ", " ", "\\\"", "\\n", "\\u00e9", "\u00e9", "\t", "x", "at 0x")
    for piece in pieces:
        for offset in range(20):
            for tail in range(0, 12, 3):
                for lead in ("", " "):
                    body = lead + "a" * offset + piece + "b" * tail
                    _assert_signed_as_walked(accel, '{"k": "' + body + '", "n": [0.5, -0.0]}')
    for text in ('{"<a at 0x1234>": 1}', '["x", "a at 0x12"]'):
        assert _sign(accel, text) is None, text
        assert _python_result(text) is not None
    # in a result's string of several words the address is a volatile token of its text form,
    # masked before the walk looks for one: read in C
    for text in ('{"s": "<obj at 0x7fff1234>"}', '{"a": {"b": ["ok", "<C at 0x7f3a5c1d>"]}}'):
        assert _assert_signed_as_walked(accel, text), text


def test_the_facts_of_json_results_read_from_their_text(accel: ModuleType) -> None:
    from otel_loopguard.signature import VolatileMatcher, analyze_result

    cases = {'{"status": "Running", "id": 3}': (None, True, False),
             '{"error": {"code": 401, "message": "no", "timestamp": "2026-01-01T00:00:00Z"}}':
                 ('{"code":401,"message":"no"}', False, False),
             '{"status_code": "404", "detail": "gone"}': ("404 gone", False, False),
             '{"ok": false, "message": "boom"}': ("boom", False, False),
             '{"items": [], "total": 0, "timestamp": "2026-01-01T00:00:00Z"}':
                 (None, False, True),
             '[null, " No results. "]': (None, False, True),
             '{"a": {"b": {"c": []}}}': (None, False, False),
             '{"a": {"b": {"request_id": "x"}}}': (None, False, True)}
    for text, (error, in_progress, empty) in cases.items():
        info = analyze_result(text, VolatileMatcher())
        assert (info.error, info.in_progress, info.empty) == (error, in_progress, empty), text
        assert _assert_signed_as_walked(accel, text), text


@settings(max_examples=500, deadline=None)
@given(text=st.text(st.sampled_from('{}[]",:01-.eE tnrufalsx\\\n\u00e9'), max_size=40))
def test_any_text_is_read_as_the_walk_reads_it_or_left_to_python(accel: ModuleType,
                                                                  text: str) -> None:
    _assert_signed_as_walked(accel, text)


@pytest.mark.slow
def test_every_json_result_of_the_corpus_is_read_as_the_walk_reads_it(
        accel: ModuleType) -> None:
    read = texts = 0
    for run in replay.iter_runs():
        for turn in run["turns"]:
            for call in turn["calls"]:
                result = call.get("result")
                if isinstance(result, str) and result.lstrip()[:1] in ("{", "["):
                    texts += 1
                    read += _assert_signed_as_walked(accel, result)
    assert read > texts // 2 > 1_000, (read, texts)


def test_numbers_read_from_the_text_are_the_numbers_orjson_reads(accel: ModuleType) -> None:
    """Floats parse to the same 64 bits (both round correctly), integers to the same value."""
    rng = random.Random(3)
    literals = ["0", "-0", "-0.0", "1e-400", "2.2250738585072011e-308", "4.9e-324",
                "1.7976931348623157e308", "999999999999999999", "-999999999999999999"]
    for _ in range(5_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 25)))
        literals.append(f"{rng.choice(('', '-'))}{int(digits)}.{digits}"
                        f"{rng.choice(('', f'e{rng.randrange(-330, 310)}'))}")
        literals.append(repr(rng.uniform(-1e6, 1e6)))
    import orjson

    for literal in literals:
        text = f'{{"v": {literal}, "w": [{literal}]}}'
        if not _assert_signed_as_walked(accel, text):  # only what orjson cannot read either
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(text)


_SHARED_HEADS = ("created_at", "created_ax", "created_atlas", "created_a", "created_",
                 "abcdefghX", "abcdefghY", "abcdefgh", "abcdefgh\x00", "abcdefgh\x00\x00", "a",
                 "a\x00", "", "request_id", "request_id_old", "x" * 17, "x" * 16 + "y",
                 "timestamp", "timestampZ", "\xe9t\xe9")
"""Keys that the C reading tells apart past their first 8 bytes (sorting, classes)."""
_SHARED_HEADS_CHECK = """
import importlib.util, json, random, sys
import orjson
spec = importlib.util.spec_from_file_location("otel_loopguard.signature._accel", sys.argv[1])
accel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(accel)
from otel_loopguard.signature import VolatileMatcher
from otel_loopguard.signature._form import _xxh3_hex
from otel_loopguard.signature._results import ResultInfo
keys = json.loads(sys.argv[2])
matcher, walker, rng, read = VolatileMatcher(), VolatileMatcher(), random.Random(7), 0
for _ in range(3000):
    value = {rng.choice(keys): rng.choice((1, "x y", [0.5], {rng.choice(keys): None}))
             for _ in range(rng.randrange(1, 8))}
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False) \
        if rng.random() < 0.5 else json.dumps(value, ensure_ascii=False)
    signed = accel.sign_result(text, matcher, 4096, ResultInfo, _xxh3_hex)
    walked = accel.canonical_json(orjson.loads(text), walker.cache, walker.classify, 4096, True)
    assert walked is not None, text
    if signed is None:  # an escape in a key (NUL): left to Python
        assert "u0000" in text, text
        continue
    digest = signed.digest if isinstance(signed, ResultInfo) else signed[0]
    assert digest == _xxh3_hex(walked.encode()), text
    read += 1
print(read)
"""


def test_keys_that_share_their_first_8_bytes_are_read_as_the_walk_reads_them(
        accel: ModuleType) -> None:
    """Sorted and classified (volatile or kept) by all their bytes, in a fresh process whose
    matcher is the first, so the C reading's memo of key classes answers most of them."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SHARED_HEADS_CHECK, str(accel.__file__),
                           json.dumps(_SHARED_HEADS)], capture_output=True, text=True,
                          check=False, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 1000


def test_result_info_types_other_than_a_slotted_four_field_class_are_called(
        accel: ModuleType) -> None:
    """sign_result fills ResultInfo's slots directly; any other info type is called with the
    four fields, so its own __init__ or __post_init__ runs."""
    from dataclasses import dataclass

    from otel_loopguard.signature import VolatileMatcher
    from otel_loopguard.signature._form import _xxh3_hex
    from otel_loopguard.signature._results import ResultInfo

    class Called:
        def __init__(self, *fields: object) -> None:
            self.fields = fields

    @dataclass(slots=True)
    class Checked:
        digest: str
        error: str | None
        in_progress: bool
        empty: bool

        def __post_init__(self) -> None:
            self.digest = "checked:" + self.digest

    matcher = VolatileMatcher()
    for text in ("pending  job", '{"items": [], "n": 0.5}'):
        made = accel.sign_result(text, matcher, 4096, ResultInfo, _xxh3_hex)
        assert type(made) is ResultInfo
        called = accel.sign_result(text, matcher, 4096, Called, _xxh3_hex)
        assert called.fields == (made.digest, None, made.in_progress, made.empty)
        checked = accel.sign_result(text, matcher, 4096, Checked, _xxh3_hex)
        assert type(checked) is Checked and checked.digest == "checked:" + made.digest
        assert (checked.error, checked.in_progress, checked.empty) == \
            (None, made.in_progress, made.empty)
        assert accel.sign_result(text, matcher, 4096, ResultInfo, _xxh3_hex) == made
