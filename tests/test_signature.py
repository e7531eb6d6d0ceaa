"""Signatures of arguments and results: canonical forms, volatile fields, bounded and total."""

from __future__ import annotations

import collections
import datetime
import json
import math
from typing import Any

import pytest
from _calls import by, call, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard import LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.signature import (
    DEFAULT_VOLATILE_KEYS,
    VolatileMatcher,
    analyze_result,
    canonical_args,
    normalize_args,
    tool_signature,
)
from otel_loopguard.signature._form import _canonical

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_KEYS = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(
    allow_nan=False, allow_infinity=False) | _TEXT
JSONISH = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    _KEYS, inner, max_size=4), max_leaves=20)
"""Values a JSON document can hold."""


def _nested(depth: int) -> list[Any]:
    value: list[Any] = [1]
    for _ in range(depth):
        value = [value]
    return value


_ODD_VALUES = st.sampled_from([
    math.nan, math.inf, -0.0, 2**70, -(2**64), b"bytes", (1, "two"), {3}, frozenset(),
    datetime.date(2026, 1, 2), datetime.datetime(2026, 1, 2, 3, 4), "x" * 5000, None,
    collections.OrderedDict(b=1, a=2), {1: "int key"}, _nested(40),
])
"""Values JSON text cannot hold, or that ``normalize_value`` writes its own way."""


class _BadStr:
    """An object whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        return "_BadStr()"


class _BadStrAndRepr(_BadStr):
    """An object whose ``__str__`` and ``__repr__`` both raise."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


ANYTHING = st.recursive(
    _SCALARS | st.binary(max_size=64) | st.just(float("nan")) | st.just(float("-inf"))
    | st.builds(_BadStr) | st.builds(lambda: "x" * 70_000)
    | st.builds(_nested, st.just(10_000)) | st.builds(lambda: "[" * 5_000 + "]" * 5_000),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(
        _KEYS, inner, max_size=4) | st.frozensets(st.integers() | _TEXT, max_size=3),
    max_leaves=12)
"""Anything an instrumentation may hand over, including the pathological."""


def _spaced(text: str, pad: str) -> str:
    return pad + pad.join(text.split(" ")) + pad


def _respace(value: Any, pad: str) -> Any:
    if isinstance(value, str):
        return _spaced(value, pad)
    if isinstance(value, list):
        return [_respace(v, pad) for v in value]
    if isinstance(value, dict):
        return {k: _respace(v, pad) for k, v in value.items()}
    return value


@pytest.fixture(name="volatile")
def _volatile() -> VolatileMatcher:
    return VolatileMatcher(DEFAULT_VOLATILE_KEYS)


def _sig(result: Any, volatile: VolatileMatcher) -> str:
    return analyze_result(result, volatile).digest


class TestToolSignature:
    @given(st.dictionaries(_KEYS, JSONISH, max_size=6))
    def test_key_order_is_ignored(self, arguments: dict[str, Any]) -> None:
        """Reversing the insertion order of keys gives the same signature."""
        reordered = dict(reversed(list(arguments.items())))
        assert tool_signature("t", arguments) == tool_signature("t", reordered)

    @given(JSONISH, st.sampled_from(["  ", "\t", " \n ", "\u3000"]))
    def test_surrounding_and_inner_whitespace_is_ignored(self, value: Any, pad: str) -> None:
        """Padding strings and widening the spaces inside them leaves the signature unchanged."""
        normal = _respace(value, " ")
        assert tool_signature("t", {"v": normal}) == tool_signature(
            "t", {"v": _respace(value, pad)})

    def test_narration_beside_an_action_is_no_part_of_the_call(self) -> None:
        """Agent TARS sends ``thought`` and ``step`` with every action, reworded each time: the
        same click with other words is the same call, as a JSON text and as a dict. Narration
        alone (a ``think`` tool), or beside numbers only (sequential thinking), is the call."""
        def click(thought: str, step: str) -> dict[str, Any]:
            return {"thought": thought, "step": step, "action": "click(point='795 226')"}

        first = tool_signature("browser_vision_control", click("search for 90028", "click it"))
        again = tool_signature("browser_vision_control",
                               json.dumps(click("the page did not respond", "click again")))
        assert first == again
        assert first != tool_signature("browser_vision_control",
                                       {"thought": "x", "action": "click(point='10 20')"})
        assert tool_signature("think", {"thought": "a"}) != tool_signature(
            "think", {"thought": "b"})
        assert tool_signature("sequentialthinking", {"thought": "a", "thoughtNumber": 2}) != \
            tool_signature("sequentialthinking", {"thought": "b", "thoughtNumber": 2})
        assert tool_signature("paginate", {"step": 2, "q": "x"}) != tool_signature(
            "paginate", {"step": 3, "q": "x"})

    @given(st.dictionaries(_KEYS, JSONISH, max_size=6))
    def test_json_string_signs_like_the_dict(self, arguments: dict[str, Any]) -> None:
        """Arguments given as a JSON string sign the same as the equivalent dict."""
        assert tool_signature("t", json.dumps(arguments)) == tool_signature("t", arguments)

    @pytest.mark.parametrize("arguments", [
        {"a  b": 1}, {" key": "v"}, {"v": "a\u00a0b"}, {"v": "a\u3000b"}, {"v": "x\x85y"},
        {"v": [math.nan]},
    ], ids=["inner-space-key", "padded-key", "nbsp", "ideographic-space", "nel", "nan"])
    def test_json_text_signs_like_the_dict_edge_cases(self, arguments: dict[str, Any]) -> None:
        """Keys with spaces, raw Unicode whitespace and NaN sign alike as JSON text or dict."""
        text = json.dumps(arguments, ensure_ascii=False)
        assert tool_signature("t", text) == tool_signature("t", arguments)
        volatile = VolatileMatcher()
        assert _sig(text, volatile) == _sig(arguments, volatile)

    @given(st.dictionaries(_KEYS, JSONISH | _ODD_VALUES, max_size=6))
    def test_dict_fast_path_writes_the_general_form(self, arguments: dict[str, Any]) -> None:
        """A dict takes orjson's path when it can and writes the general path's text."""
        assert canonical_args(arguments)[1] == _canonical(normalize_args(arguments))

    @pytest.mark.parametrize("depth", range(29, 35))
    @pytest.mark.parametrize("leaf", ["text", 7, [], {"k": "v"}],
                             ids=["text", "int", "empty-list", "plain-map"])
    def test_deep_json_text_takes_the_general_cut(self, depth: int, leaf: Any) -> None:
        """Around the depth cut, JSON text arguments are written as the general path writes."""
        value: Any = leaf
        for level in range(depth):
            value = {"k": value} if level % 2 else [value, 1]
        assert canonical_args(json.dumps(value))[1] == _canonical(normalize_args(value))

    @pytest.mark.parametrize("value", [
        {"ids": list(range(3000))}, {"by_id": {f"k{i}": i for i in range(3000)}},
    ], ids=["long-list", "long-map"])
    def test_long_container_takes_the_general_cut(self, value: Any) -> None:
        """A container past the items kept is cut alike as text or object, whatever the cap."""
        for cap in (4096, 100_000):
            assert canonical_args(json.dumps(value), max_value_chars=cap)[1] == \
                _canonical(normalize_args(value, max_value_chars=cap))

    @given(st.text(alphabet="abcXYZ/._", min_size=1, max_size=12))
    def test_case_is_preserved(self, text: str) -> None:
        """Arguments differing only in case get different signatures (paths are case-sensitive)."""
        swapped = text.swapcase()
        if swapped != text:
            assert tool_signature("t", {"p": text}) != tool_signature("t", {"p": swapped})

    @given(st.sampled_from(["page", "cursor", "offset", "page_token", "next_token"]),
           st.integers(0, 10**6), st.integers(0, 10**6))
    def test_pagination_keys_change_the_signature(self, key: str, one: int, two: int) -> None:
        """Two pages of the same query are two different calls."""
        if one != two:
            assert tool_signature("s", {"q": "docs", key: one}) != tool_signature(
                "s", {"q": "docs", key: two})

    def test_tool_name_is_part_of_the_signature(self) -> None:
        """The same arguments to two tools are two different calls."""
        assert tool_signature("a", {"x": 1}) != tool_signature("b", {"x": 1})

    @given(ANYTHING)
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow],
              deadline=None)
    def test_never_raises(self, value: Any) -> None:
        """Any input at all gives a 16-hex-digit signature."""
        sig = tool_signature("t", value)
        assert len(sig) == 16 and int(sig, 16) >= 0

    def test_fifty_megabyte_string(self) -> None:
        """A 50 MB argument is hashed into an ordinary signature."""
        big = "a" * (50 * 1024 * 1024)
        sig = tool_signature("t", big)
        assert len(sig) == 16
        assert sig != tool_signature("t", big[:-1] + "b")

    def test_oversized_values_are_hashed(self) -> None:
        """Strings beyond ``max_value_chars`` are kept only as a digest."""
        normal = normalize_args({"blob": "z" * 10_000}, max_value_chars=64)
        assert len(normal["blob"]) < 64
        assert normalize_args({"blob": "z" * 10}, max_value_chars=64) == {"blob": "z" * 10}

    def test_deep_nesting_is_cut(self) -> None:
        """Nesting past the limit is folded, so a 10,000-deep list signs without recursion."""
        assert len(tool_signature("t", _nested(10_000))) == 16
        assert json.dumps(normalize_args(_nested(10_000))).count("[") <= 64

    def test_a_change_past_the_item_cut_changes_the_result(self) -> None:
        """Items past the first 2,048 of a list or mapping are still signed (as a digest of
        the rest, item by item): a longer listing, or one that differs only at its end, is not
        the same result; the same one is."""
        volatile = VolatileMatcher()

        def sig(value: Any) -> str:
            return analyze_result(json.dumps(value), volatile).digest

        entries = [f"file_{i}.txt" for i in range(2_104)]
        assert sig({"entries": entries[:2_100]}) != sig({"entries": entries})
        changed = [*entries[:-1], "other.txt"]
        assert sig({"entries": entries}) != sig({"entries": changed})
        assert sig({"entries": entries}) == sig({"entries": list(entries)})
        wide = {f"k{i}": i for i in range(2_100)}
        assert sig(wide) != sig({**wide, "k2099": -1})
        # volatile keys in the rest are still ignored (objects: this text would be over the
        # 64 KB that are parsed at all, and a longer text is hashed whole)
        rows = [{"id": i, "fetched_at": f"2025-03-17T10:00:{i % 60:02d}Z"} for i in range(2_100)]
        later = [{**row, "fetched_at": "2025-03-18T11:00:00Z"} for row in rows]
        assert analyze_result(rows, volatile).digest == analyze_result(later, volatile).digest
        rows[-1]["id"] = -1
        assert analyze_result(rows, volatile).digest != analyze_result(later, volatile).digest

    def test_a_change_past_the_depth_cut_changes_the_result(self) -> None:
        """A container 32 levels down is signed by a digest of its JSON, not cut to a marker."""
        volatile = VolatileMatcher()
        deep_a, deep_b = _nested(40), _nested(40)
        inner = deep_b
        for _ in range(39):
            inner = inner[0]
        inner.append("changed")
        assert analyze_result(deep_a, volatile).digest != analyze_result(deep_b, volatile).digest
        assert analyze_result(json.dumps(deep_a), volatile).digest == \
            analyze_result(deep_a, volatile).digest

    def test_a_growing_listing_is_never_stagnation(self) -> None:
        """The engine sees a directory listing that keeps growing past 2,048 entries as
        progress, not as the same result again."""
        engine = LoopEngine()
        run = engine.new_run()
        actions = []
        for n in range(2_100, 2_106):
            listing = json.dumps({"entries": [f"f{i}" for i in range(n)]})
            actions.append(engine.process(run, ToolCall(
                tool="list_dir", arguments={"path": "/data"}, result=listing,
                has_result=True)).action.label)
        assert actions == ["continue"] * 6

    def test_object_with_raising_str(self) -> None:
        """An object whose ``__str__`` raises signs as its type name, as a value and as a key."""
        assert len(tool_signature("t", {"x": _BadStr()})) == 16
        assert len(tool_signature("t", [_BadStrAndRepr(), {_BadStrAndRepr()}])) == 16
        assert len(analyze_result(_BadStrAndRepr(), VolatileMatcher()).digest) == 16

    def test_object_with_raising_str_as_key(self) -> None:
        """A mapping key whose ``__str__`` raises still gives a signature."""
        assert len(tool_signature("t", {_BadStr(): 1})) == 16

    def test_nan_is_stable(self) -> None:
        """NaN signs the same every time (it is not equal to itself, its signature is)."""
        assert tool_signature("t", {"x": math.nan}) == tool_signature("t", {"x": float("nan")})


class TestAnalyzeResult:
    @given(st.dictionaries(_KEYS, JSONISH, max_size=4), st.sampled_from(
        ["fetched_at", "createdAt", "timestamp", "expires_in", "request_id", "x_request_id",
         "trace_id", "span_id", "nonce", "etag", "response_time"]), _TEXT)
    def test_volatile_keys_are_ignored(self, body: dict[str, Any], key: str, noise: str) -> None:
        """A volatile key added to a result does not change its signature."""
        volatile = VolatileMatcher()
        clean = {k: v for k, v in body.items() if not volatile.is_volatile(k, v)}
        assert _sig({**clean, key: noise}, volatile) == _sig(clean, volatile)

    @given(st.integers(2000, 2099), st.integers(1, 12), st.integers(1, 28),
           st.integers(0, 23), st.integers(0, 59), st.sampled_from(["Z", "+02:00", ""]))
    def test_datetime_values_are_ignored(self, year: int, month: int, day: int, hour: int,
                                         minute: int, zone: str) -> None:
        """A value that is an ISO date-time with a time of day compares equal to any other."""
        volatile = VolatileMatcher()
        moment = f"{year}-{month:02}-{day:02}T{hour:02}:{minute:02}:00{zone}"
        assert _sig({"as_of": moment}, volatile) == _sig({"as_of": "2001-01-01T00:00:00Z"},
                                                         volatile)
        assert _sig({"date": moment}, volatile) == _sig({}, volatile)

    @given(st.datetimes(), st.sampled_from([
        "%a, %d %b %Y %H:%M:%S GMT",  # HTTP (RFC 9110) and email
        "%A, %d-%b-%y %H:%M:%S GMT",  # RFC 850
        "%a %b %d %H:%M:%S %Y",  # asctime
        "%a %b %d %H:%M:%S UTC %Y",  # date(1)
        "%d/%m/%Y %H:%M", "%Y-%m-%d %H:%M:%S"]))
    def test_a_date_with_a_time_of_day_in_any_form_is_volatile(self, moment: Any,
                                                                form: str) -> None:
        """``date`` when its value has a time of day: an HTTP ``Date`` header copied into a
        result changes every second and says nothing about the answer."""
        volatile = VolatileMatcher()
        assert _sig({"date": moment.strftime(form), "n": 1}, volatile) == _sig({"n": 1},
                                                                              volatile)

    @given(st.dates(), st.dates())
    def test_plain_dates_are_data(self, one: Any, two: Any) -> None:
        """A plain date (no time of day) is data: two different dates are two different results."""
        volatile = VolatileMatcher()
        if one != two:
            assert _sig({"date": one.isoformat()}, volatile) != _sig({"date": two.isoformat()},
                                                                     volatile)
            assert _sig(one.isoformat(), volatile) != _sig(two.isoformat(), volatile)

    def test_volatile_keys_are_configurable(self) -> None:
        """A custom volatile key list replaces the defaults."""
        custom = VolatileMatcher(["seq*"])
        assert _sig({"a": 1, "seq_no": 5}, custom) == _sig({"a": 1, "seq_no": 6}, custom)
        assert _sig({"a": 1, "timestamp": 5}, custom) != _sig({"a": 1, "timestamp": 6}, custom)

    def test_json_text_result_equals_object(self, volatile: VolatileMatcher) -> None:
        """A result given as JSON text compares equal to the same object."""
        assert _sig('{"b": 2, "a": [1]}', volatile) == _sig({"a": [1], "b": 2}, volatile)

    @pytest.mark.parametrize("depth", range(29, 35))
    @pytest.mark.parametrize("leaf", ["text", "", 7, None, [], {}, {"k": "v"}, ["a", "b"]],
                             ids=["text", "empty-text", "int", "null", "empty-list",
                                  "empty-map", "plain-map", "list-of-text"])
    def test_deep_json_text_result_equals_object(self, volatile: VolatileMatcher, depth: int,
                                                 leaf: Any) -> None:
        """Around the depth cut, JSON text (the fast path) and the object sign alike."""
        value: Any = leaf
        for level in range(depth):
            value = {"k": value, "fetched_at": "now"} if level % 2 else [value, 1]
        assert _sig(json.dumps(value), volatile) == _sig(value, volatile)

    @pytest.mark.parametrize("value", [
        {"ids": list(range(3000)), "request_id": "r1"},
        {"by_id": {f"k{i}": i for i in range(3000)}, "request_id": "r1"},
        {f"k{i}": i for i in range(3000)},
    ], ids=["long-list", "long-nested-map", "long-map"])
    def test_long_json_text_result_equals_object(self, value: Any) -> None:
        """A container past the items kept signs alike as text and object, whatever the cap."""
        text = json.dumps(value, separators=(",", ":"))
        volatile = VolatileMatcher()
        for cap in (4096, 100_000):
            assert analyze_result(text, volatile, max_value_chars=cap).digest == \
                analyze_result(value, volatile, max_value_chars=cap).digest

    @given(ANYTHING)
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow],
              deadline=None)
    def test_never_raises(self, value: Any) -> None:
        """Any result at all is analysed without raising."""
        info = analyze_result(value, VolatileMatcher())
        assert len(info.digest) == 16

    def test_fifty_megabyte_result(self, volatile: VolatileMatcher) -> None:
        """A 50 MB result is hashed into an ordinary digest."""
        assert len(_sig("r" * (50 * 1024 * 1024), volatile)) == 16

    @pytest.mark.parametrize(("result", "error"), [
        ({"error": "boom"}, "boom"),
        ({"error": {"code": 401, "message": "unauthorized"}}, '{"code":401,"message":'
                                                                '"unauthorized"}'),
        ({"status": 404, "message": "no such order"}, "404 no such order"),
        ({"status_code": "503"}, "503"),
        ({"statusCode": 429, "detail": "slow down"}, "429 slow down"),
        ({"ok": False, "message": "quota"}, "quota"),
        ({"success": False}, "ok: false"),
        ('{"error": "as json text"}', "as json text"),
    ], ids=["error-key", "error-object", "status-404", "status-code-str", "camel-status",
            "ok-false", "success-false", "json-text"])
    def test_structured_errors(self, volatile: VolatileMatcher, result: Any, error: str) -> None:
        """A top-level error key, a status >= 400 or ok: false makes the result an error."""
        assert analyze_result(result, volatile).error == error

    @pytest.mark.parametrize("result", [
        "error: this is just text",
        "Go handles error values explicitly",
        {"text": "error handling in go", "hits": 3},
        {"status": 200, "ok": True, "body": "no error"},
        {"status": "error-free"},
        {"error": None},
        {"error": ""},
        {"error": {}},
        {"ok": True},
        [{"error": "nested, not top level"}],
    ], ids=["text-prefix", "word-in-text", "word-in-field", "status-200", "status-str",
            "error-none", "error-empty", "error-empty-object", "ok-true", "nested"])
    def test_successes_mentioning_error(self, volatile: VolatileMatcher, result: Any) -> None:
        """A successful result that contains the word "error" is not an error."""
        assert analyze_result(result, volatile).error is None

    @pytest.mark.parametrize(("result", "expected"), [
        ({"status": "running"}, True), ({"state": "queued"}, True), ("pending...", True),
        ({"status": "done"}, False), ("completed", False),
    ], ids=["status-running", "state-queued", "text-pending", "status-done", "text-completed"])
    def test_in_progress(self, volatile: VolatileMatcher, result: Any, expected: bool) -> None:
        """Results that report a job still pending, queued or running are in progress."""
        assert analyze_result(result, volatile).in_progress is expected

    @pytest.mark.parametrize(("result", "expected"), [
        (None, True), ("", True), ("No results.", True), ([], True),
        ({"results": [], "total": 0}, True), ("3 results", False), ({"results": ["a"]}, False),
    ], ids=["none", "empty-str", "no-results", "empty-list", "empty-fields", "some", "one-hit"])
    def test_empty(self, volatile: VolatileMatcher, result: Any, expected: bool) -> None:
        """Empty results (nothing, "no results", empty containers) are recognised."""
        assert analyze_result(result, volatile).empty is expected


_SWE_AGENT_NOTHING = "Your command ran successfully and did not produce any output."


class TestHarnessNoOutput:
    """A harness's own words for a command that printed nothing are an empty result."""

    @pytest.mark.parametrize("result", [
        _SWE_AGENT_NOTHING + "\n(Open file: /repo/src/Main.java)\n(Current directory: /repo)"
                             "\nbash-$",
        _SWE_AGENT_NOTHING + "\n(Open file: n/a)\n(Current directory: /repo)\nbash-$",
        "<returncode>0</returncode>\n<output>\n</output>",
        "<returncode>1</returncode>\n<output>\n\n</output>",
        "\x1b[?2004l\x1b[?2004h\n[The command completed with exit code 0.]",
        "[The command completed with exit code 1.]",
        "\n[Current working directory: /workspace/repo]\n[Python interpreter: /usr/bin/python]"
        "\n[Command finished with exit code 0]",
        "(No content)",
        "exitcode: 0 (execution succeeded)\nCode output: ",
    ], ids=["swe-agent", "swe-agent-no-file", "mini-swe-agent", "mini-swe-agent-failing",
            "openhands-terminal", "openhands", "openhands-0.x", "claude-code", "autogen"])
    def test_said_nothing(self, signing: str, volatile: VolatileMatcher, result: str) -> None:
        """SWE-agent, mini-swe-agent, OpenHands, Claude Code and AutoGen saying "no output"."""
        info = analyze_result(result, volatile)
        assert info.empty
        assert info.digest == analyze_result(result + " ", volatile).digest  # its own digest

    def test_read_from_the_raw_text_whatever_the_bound(self, signing: str,
                                                       volatile: VolatileMatcher) -> None:
        """A bound on the facts' text (``max_value_chars``) below the message's length changes
        nothing: both paths read the message from the raw text."""
        result = _SWE_AGENT_NOTHING + "\n(Open file: /repo/src/Main.java)\n(Current directory: /r)"
        assert analyze_result(result, volatile, max_value_chars=40).empty

    @pytest.mark.parametrize("result", [
        _SWE_AGENT_NOTHING + "\nbut then: 3 files\n(Current directory: /repo)\nbash-$",
        "<returncode>0</returncode>\n<output>\nsrc/a.py\n</output>",
        "tests passed\n[The command completed with exit code 0.]",
        "3 passed\n[Python interpreter: /usr/bin/python]\n[Command finished with exit code 0]",
        "exitcode: 0 (execution succeeded)\nCode output: 42",
        "(No content) so far, 12 lines later",
        _SWE_AGENT_NOTHING + "\n" + "(Current directory: /repo)\n" * 40,
    ], ids=["swe-agent-more", "mini-swe-agent-output", "openhands-output",
            "openhands-0.x-output", "autogen-output",
            "claude-code-more", "too-long"])
    def test_said_something(self, signing: str, volatile: VolatileMatcher, result: str) -> None:
        """Output around those words, or a result past their length, is output."""
        assert not analyze_result(result, volatile).empty


def _distinct_results() -> st.SearchStrategy[list[Any]]:
    volatile = VolatileMatcher()
    return st.lists(JSONISH, min_size=2, max_size=25,
                    unique_by=lambda r: analyze_result(r, volatile).digest)


class TestVolatileText:
    @pytest.mark.parametrize(("first", "second"), [
        ("1 failed, 2 passed in 0.41s", "1 failed, 2 passed in 0.44s"),
        ("Done. 12 ms", "Done. 9 ms"),
        ("built; took 3.2 seconds", "built; took 14 seconds"),
        ("started 2025-03-17T10:00:01Z", "started 2025-03-18 11:42:07.5+02:00"),
        ("[10:00:01] server up", "[23:59:59.120] server up"),
        ("<Client object at 0x7f3a5c1d2e90>", "<Client object at 0x7f00aa0b1c22>"),
        ("job 550e8400-e29b-41d4-a716-446655440000 queued",
         "job 6ba7b810-9dad-11d1-80b4-00c04fd430c8 queued"),
        ("container 3f2a9c1b7d4e5f60 started", "container 9e8d7c6b5a4f3e21 started"),
        ("request 123456789012 accepted", "request 998877665544 accepted"),
        ("Cell In[3], line 1\n----> 1 f()\nNameError: name 'f' is not defined",
         "Cell In[4], line 1\n----> 1 f()\nNameError: name 'f' is not defined"),
        ("File <ipython-input-3-a4c5f5c6c8b3>:1 in <module>\nNameError",
         "File <ipython-input-12-9e8d7c6b5a4f>:1 in <module>\nNameError"),
        ("[INFO] Total time:  01:58 min\n[INFO] BUILD FAILURE",
         "[INFO] Total time:  02:03 min\n[INFO] BUILD FAILURE"),
        ("FAIL\texample.com/pkg\t1m2.512s", "FAIL\texample.com/pkg\t0m59.87s"),
        ("BUILD FAILED in 1m 23s\n3 actionable tasks", "BUILD FAILED in 2m 5s\n3 actionable tasks"),
        ("Stderr: error at line 45\nExit Code: 1\nProcess Group PGID: 60302",
         "Stderr: error at line 45\nExit Code: 1\nProcess Group PGID: 61477"),
    ], ids=["duration-s", "duration-ms", "took-seconds", "iso", "time-of-day", "address",
            "uuid", "hex-id", "decimal-id", "ipython-cell", "ipython-input", "maven-clock",
            "go-minutes", "gradle-minutes", "gemini-cli-pgid"])
    def test_volatile_tokens_are_masked(self, first: str, second: str) -> None:
        """Plain-text results that differ only in a volatile token have one signature."""
        volatile = VolatileMatcher()
        assert _sig(first, volatile) == _sig(second, volatile)

    @pytest.mark.parametrize(("first", "second"), [
        ("3 failed, 2 passed in 0.41s", "2 failed, 3 passed in 0.41s"),
        ("a.py:12: AssertionError", "a.py:13: AssertionError"),
        ("found 7 matches", "found 8 matches"),
        ("range 12:12", "range 12:13"),
        ("order 12345678901", "order 12345678902"),
        ("3f2a9c1b7d4e5f60", "9e8d7c6b5a4f3e21"),
        ("sha256:3f2a9c1b7d4e5f60", "sha256:9e8d7c6b5a4f3e21"),
        ("Cell In[3], line 1\nNameError", "Cell In[3], line 2\nNameError"),
        ("loaded 5m rows", "loaded 6m rows"),
        ("range 12:12 seen", "range 12:13 seen"),
    ], ids=["counts", "line-numbers", "short-numbers", "line-column", "11-digit-number",
            "an-id-alone", "one-word", "a-cell-line", "millions", "line-column-words"])
    def test_data_stays(self, first: str, second: str) -> None:
        """Counts, line numbers and short numbers are data: they keep results apart."""
        volatile = VolatileMatcher()
        assert _sig(first, volatile) != _sig(second, volatile)

    @pytest.mark.parametrize("path", ["accelerated", "pure-python"])
    def test_text_inside_a_json_result_is_masked_as_text(
            self, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A JSON result's string of several words is text: an API answer wrapped in an
        envelope (ToolBench's ``{"error": "", "response": "..."}``) returned again with a new
        timestamp is the same answer, on the C and the Python path alike."""
        if path == "pure-python":
            from otel_loopguard.signature import _form, _results, _text

            for module, name in ((_text, "_SCAN"), (_results, "_SIGN"), (_form, "_CANON")):
                monkeypatch.setattr(module, name, None)
        volatile = VolatileMatcher()

        def envelope(response: str) -> str:
            return json.dumps({"error": "", "response": response})

        answer = "{'status': 403, 'message': 'Account expired.', 'timestamp': %d}"
        first, second = (_sig(envelope(answer % stamp), volatile)
                         for stamp in (1713634632036, 1713634634116))
        assert first == second
        assert first != _sig(envelope(answer.replace("403", "404") % 1713634632036), volatile)
        rows = '[{"log": "tests ran in %s", "job": "%s"}]'
        assert _sig(rows % ("0.41s", "a1"), volatile) == _sig(rows % ("0.39s", "a1"), volatile)
        # a string of one word is data (an id, a digest); keys are not masked
        assert _sig(rows % ("0.41s", "123456789012345"), volatile) != _sig(
            rows % ("0.41s", "123456789012346"), volatile)
        assert _sig('{"took 0.41s": 1}', volatile) != _sig('{"took 0.39s": 1}', volatile)

    def test_codex_chunk_id_is_volatile(self) -> None:
        """Codex CLI heads each command's output with a fresh ``Chunk ID`` (six hex digits,
        too short for the mask of ids): the same output again is the same result, and a
        rerun of a failing command fails the same way."""
        volatile = VolatileMatcher()
        output = ("Chunk ID: {chunk}\nWall time: {wall} seconds\nProcess exited with code 1\n"
                  "Original token count: 40\nOutput:\nF\ntest_a.py:3: AssertionError\n")
        first, second = (output.format(chunk=chunk, wall=wall)
                         for chunk, wall in (("064955", "0.4696"), ("c921fa", "0.1409")))
        assert _sig(first, volatile) == _sig(second, volatile)
        assert _sig(first, volatile) != _sig(first.replace("test_a.py:3", "test_a.py:4"),
                                             volatile)
        decisions = run([call("exec_command", {"cmd": "pytest -q"}, output.format(
            chunk=f"{n:06x}", wall=f"0.{n}"), error="exit code 1") for n in range(3)])
        assert by(decisions, "failure") == {3: "warn"}

    def test_long_text_is_masked_before_it_is_hashed(self) -> None:
        """A text longer than ``max_value_chars`` is masked, then hashed."""
        volatile, body = VolatileMatcher(), "x" * 5000
        assert analyze_result(body + " in 0.41s", volatile).digest == analyze_result(
            body + " in 0.39s", volatile).digest


_SURFER = ("I clicked '{target}'.\n\nHere is a screenshot of [{title}]"
           "(https://forum.wordreference.com/). The viewport shows {shown}% of the webpage, and "
           "is positioned at the top of the page.\n{mode}\n\n{text}")
"""A result of AutoGen's multimodal web surfer (Magentic-One), as its source writes it."""
_OCR = "Automatic OCR of the page screenshot has detected the following text:"
_READINGS = ("WordReference Forums\n\nSpanish-English / Espa\u00f1ol-Ingl\u00e9s\nThreads: 801.5K",
             "WordReference.com Language Forums\nForums Dictionary search: [Search box]\n"
             "Rules/Help/FAQ Members Interface Language")
"""Two transcriptions of one screenshot of the same page (from a Magentic-One run)."""


def _surfer(text: str, *, target: str = "Spanish-English Vocabulary", shown: int = 21,
            title: str = "WordReference Forums", mode: str = _OCR) -> str:
    return _SURFER.format(target=target, title=title, shown=shown, mode=mode, text=text)


@pytest.fixture(params=["accelerated", "pure-python"])
def signing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Sign results with the C accelerator (when built) and without it."""
    if request.param == "pure-python":
        from otel_loopguard.signature import _results, _text

        monkeypatch.setattr(_text, "_SCAN", None)
        monkeypatch.setattr(_results, "_SIGN", None)
    return request.param


class TestScreenshotTranscription:
    """A web agent's transcription of its screenshot is volatile; the page it shows is not."""

    @pytest.mark.parametrize("ascii_only", [True, False])
    def test_two_readings_of_one_screen_are_the_same_result(self, signing: str,
                                                            ascii_only: bool) -> None:
        volatile = VolatileMatcher()
        first, second = (_surfer(text) for text in _READINGS)
        if ascii_only:  # the accelerator reads ASCII text itself
            first, second = (text.encode("ascii", "ignore").decode() for text in (first, second))
        assert first != second
        assert _sig(first, volatile) == _sig(second, volatile)

    @pytest.mark.parametrize("change", [{"title": "WordReference Forums | Log in"},
                                        {"shown": 35}, {"target": "English Only"}],
                             ids=["another-page", "another-view", "another-action"])
    def test_the_page_and_the_action_stay(self, signing: str,
                                          change: dict[str, Any]) -> None:
        volatile = VolatileMatcher()
        assert _sig(_surfer(_READINGS[0]), volatile) != _sig(
            _surfer(_READINGS[0], **change), volatile)

    def test_the_page_text_itself_stays(self, signing: str) -> None:
        """The surfer's other mode gives the page's own text, not a reading of a picture."""
        volatile = VolatileMatcher()
        mode = "The first 50 lines of the page text is:"
        assert _sig(_surfer(_READINGS[0], mode=mode), volatile) != _sig(
            _surfer(_READINGS[1], mode=mode), volatile)

    def test_a_result_with_a_reading_differs_from_one_without(self, signing: str) -> None:
        volatile = VolatileMatcher()
        assert _sig(_surfer(""), volatile) != _sig(
            _surfer("", mode="The first 50 lines of the page text is:"), volatile)

    def test_only_a_line_that_starts_with_it_ends_the_result(self, signing: str) -> None:
        """A text that quotes the line inside another line is compared whole."""
        volatile = VolatileMatcher()
        first, second = (f"grep found: {_OCR} {text}" for text in _READINGS)
        assert _sig(first, volatile) != _sig(second, volatile)

    def test_a_json_result_reads_its_text_values_as_text(self, signing: str) -> None:
        """A JSON envelope around the surfer's text (an MCP client's) changes nothing."""
        volatile = VolatileMatcher()
        first, second = (json.dumps({"content": _surfer(text), "is_error": False})
                         for text in _READINGS)
        assert _sig(first, volatile) == _sig(second, volatile)
        assert _sig(first, volatile) != _sig(
            json.dumps({"content": _surfer(_READINGS[0], title="WordReference Forums | Log in"),
                        "is_error": False}), volatile)

    def test_the_same_click_on_the_same_screen_three_times_is_stagnation(self) -> None:
        """Magentic-One clicking one link again and again, each screenshot read anew."""
        engine = LoopEngine(LoopGuardConfig())
        run = engine.new_run()
        readings = (*_READINGS, _READINGS[0] + "\nLatest posts")
        decisions = [engine.process(run, ToolCall(
            tool="click", arguments={"target": "Spanish-English Vocabulary"},
            result=_surfer(text), has_result=True, start_time_ns=10 * n + 1,
            end_time_ns=10 * n + 2)) for n, text in enumerate(readings)]
        # a page action (a state change) applied back to back with the same outcome is also a
        # repeat: both fire on the third click, on the same three calls and the same outcome,
        # one piece of evidence: a warn, as stagnation's ladder gives (no escalation)
        assert [d.action.label for d in decisions] == ["continue", "continue", "warn"]
        assert {e.detector for e in decisions[2].evidence} == {"stagnation", "repeat"}


class TestChangedResultIsNeverStagnation:
    @given(_distinct_results(), st.booleans())
    @settings(max_examples=60, deadline=None)
    def test_same_call_with_changing_results(self, results: list[Any], poll: bool) -> None:
        """The same call returning pairwise different results never yields stagnation evidence."""
        tools = {"probe": {"kind": "poll"}} if poll else {}
        engine = LoopEngine(LoopGuardConfig.create(tools=tools))
        run = engine.new_run()
        for index, result in enumerate(results):
            decision = engine.process(run, ToolCall(
                tool="probe", arguments={"q": "same"}, result=result, has_result=True,
                start_time_ns=10 * index + 1, end_time_ns=10 * index + 2))
            assert all(e.detector != "stagnation" for e in decision.evidence), decision


def test_the_ascii_mask_masks_what_the_general_one_does() -> None:
    """``_VOLATILE_ASCII_RE`` (ASCII text) and ``_VOLATILE_TEXT_RE`` replace the same tokens."""
    import random

    from otel_loopguard.signature._volatile import _VOLATILE_ASCII_RE, _VOLATILE_TEXT_RE

    rng = random.Random(31)
    alphabet = "0123456789abcdefxABCDEFXZzTt :.,-+\n\t\x1c\x1f\x0bmsuhinecorMSUHINECOR_"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60)))
             for _ in range(20_000)]
    texts += ["ran in 0.53s at 2026-11-29T10:00:01.5+01:00",
              "id deadbeef-dead-beef-dead-beefdeadbeef",
              "0x7f3a5c1d 12:30:45 3 failed, 2 passed", "abcdef123456 abcdefabcdef 12 MS 4 Hours",
              "Cell In[12], line 3 cell in[4] CELL IN[5]", "<ipython-input-3-a4c5f5c6c8b3> x"]
    for text in texts:
        assert _VOLATILE_ASCII_RE.sub("#", text) == _VOLATILE_TEXT_RE.sub("#", text), repr(text)
