"""The C accelerator of the processor's ``span.end()`` answers exactly as its Python definitions.

``otel_loopguard/_span_end.c``: ``span_reading(name, attributes)`` is
``adapters.python_span_reading``, and ``keys_within(keys, attributes)`` is
``keys.issuperset(attributes)``, answered from a memo of key objects. (Its ``keep_aside``, the
common case of ``DeferredTurns._set_aside``, is compared with the Python path in
``tests/test_kept_aside_turns.py``, which runs with and without it.) Compared on generated
spans (every marker, value type and name prefix the definition tests, values that cannot be
hashed, keys that are equal strings but other objects), on the spans of the recorded framework
traces, and for memory: the memo keeps a bounded number of references. The module is the
installed one, else built from its source here (the tests skip only where it cannot be built).
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _compiled import compiled, memory_grown
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard import adapters
from otel_loopguard.adapters import _keys as k
from otel_loopguard.processor._deferred import _MAX_SPANS, _MAX_TRACES, BLANK_TURN_KEYS
from otel_loopguard.replay.tracefile import iter_spans

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "recorded"
_SETTINGS = settings(max_examples=400, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(name="reading", scope="module")
def _reading(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    module = compiled("otel_loopguard/_span_end.c", tmp_path_factory)
    adapters._set_up_reading(module)
    return module


def _answer(function: Callable[..., Any], *args: Any) -> Any:
    """The function's result, or the type of the exception it raised."""
    try:
        return function(*args)
    except Exception as exc:
        return type(exc)


def _copy(text: str) -> str:
    """An equal string that is another object (as an instrumentation's own key is)."""
    return "".join(list(text))


_NAMES = st.sampled_from(["chat gpt-4o", "invoke_agent support", "execute_tool search",
                          f"{k.LOGFIRE_FUNCTION_PREFIX} search", k.LOGFIRE_HANDOFF_PREFIX,
                          "Running tools", "", "GET /v1/x"]) | st.text(max_size=12)
_MARKERS = st.sampled_from([k.GEN_AI_OPERATION_NAME, k.OI_SPAN_KIND, k.TL_SPAN_KIND])
_VALUES = (st.sampled_from([*sorted(k.MODEL_OPERATIONS), k.OP_EXECUTE_TOOL, k.OP_HANDOFF,
                            k.OP_INVOKE_AGENT, "LLM", "llm", "TOOL", "tool", "AGENT", None,
                            "", 0, 1, True, 1.5, ("chat",), ["unhashable"]])
           | st.text(max_size=6))
_OTHER_KEYS = st.sampled_from(sorted(BLANK_TURN_KEYS)) | st.text(max_size=8)


@st.composite
def _attributes(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(_MARKERS, max_size=3, unique=True))
    out = {(_copy(key) if draw(st.booleans()) else key): draw(_VALUES) for key in keys}
    for key in draw(st.lists(_OTHER_KEYS, max_size=6)):
        out.setdefault(key, draw(st.text(max_size=4)))
    return out


class TestSpanReading:
    @_SETTINGS
    @given(name=_NAMES, attributes=_attributes(), c_first=st.booleans())
    def test_generated(self, reading: ModuleType, name: str, attributes: dict[str, Any],
                       c_first: bool) -> None:
        """The same reading, or the same exception, whichever asks first about a new name
        (both note an unmarked name as seen)."""
        if c_first:
            native = _answer(reading.span_reading, name, attributes)
            assert native == _answer(adapters.python_span_reading, name, attributes)
        else:
            python = _answer(adapters.python_span_reading, name, attributes)
            assert _answer(reading.span_reading, name, attributes) == python

    def test_other_mappings_take_the_definition(self, reading: ModuleType) -> None:
        """A mapping that is not a dict, or a name that is not a str, is read by Python."""
        proxy = types.MappingProxyType({k.GEN_AI_OPERATION_NAME: "chat"})
        assert reading.span_reading("chat x", proxy) == adapters.MODEL_SPAN
        assert _answer(reading.span_reading, None, {k.GEN_AI_OPERATION_NAME: "handoff"}) \
            == _answer(adapters.python_span_reading, None, {k.GEN_AI_OPERATION_NAME: "handoff"})

    def test_recorded_framework_spans(self, reading: ModuleType) -> None:
        """Every span of the recorded traces of the frameworks: the same reading and key test."""
        spans = [span for path in sorted(RECORDED.glob("*.jsonl"))
                 for span in iter_spans(str(path))]
        assert len(spans) > 500
        readings = set()
        for span in spans:
            attributes = dict(span.attributes)
            expected = adapters.python_span_reading(span.name, attributes)
            assert reading.span_reading(span.name, attributes) == expected, span.name
            assert reading.keys_within(BLANK_TURN_KEYS, attributes) \
                == BLANK_TURN_KEYS.issuperset(attributes), span.name
            readings.add(expected)
        assert readings == {adapters.NOT_READ, adapters.MODEL_SPAN, adapters.EVENT,
                            adapters.OTHER}


class TestKeysWithin:
    @_SETTINGS
    @given(attributes=_attributes(), repeats=st.integers(1, 3),
           narrower=st.sampled_from(sorted(BLANK_TURN_KEYS)))
    def test_generated(self, reading: ModuleType, attributes: dict[str, Any], repeats: int,
                       narrower: str) -> None:
        """issuperset's answer, the first time and from the memo, for two sets (the memo is
        per set), and for the same keys as other string objects."""
        sets = (BLANK_TURN_KEYS, BLANK_TURN_KEYS - {narrower})
        copied = {(_copy(key) if isinstance(key, str) else key): value
                  for key, value in attributes.items()}
        for _ in range(repeats):
            for keys in sets:
                for attrs in (attributes, copied):
                    assert reading.keys_within(keys, attrs) == keys.issuperset(attrs)

    def test_many_keys_and_other_types(self, reading: ModuleType) -> None:
        """More keys than the memo takes, keys that are not str, other sets and mappings."""
        wide = {key: 1 for key in sorted(BLANK_TURN_KEYS)[:20]}
        assert reading.keys_within(BLANK_TURN_KEYS, wide) is True
        assert reading.keys_within(BLANK_TURN_KEYS, {**wide, "gen_ai.input.messages": "[]"}) \
            is False
        assert reading.keys_within(frozenset({1, 2}), {1: "a"}) is True
        assert reading.keys_within(frozenset({1, 2}), {3: "a"}) is False
        assert reading.keys_within({"a"}, {"a": 1}) is True  # a set, not a frozenset
        assert reading.keys_within(BLANK_TURN_KEYS, types.MappingProxyType({"x": 1})) is False
        assert reading.keys_within(BLANK_TURN_KEYS, {}) is True

    def test_a_key_object_freed_and_replaced_is_not_mistaken(self,
                                                             reading: ModuleType) -> None:
        """The memo holds its keys: a new string with another text can never take the address
        of a remembered one and get its answer."""
        for number in range(2000):
            assert reading.keys_within(BLANK_TURN_KEYS, {_copy(k.GEN_AI_SYSTEM): 1}) is True
            other = {f"gen_ai.custom.{number}": 1}
            assert reading.keys_within(BLANK_TURN_KEYS, other) is False

    def test_memory_is_bounded(self, reading: ModuleType) -> None:
        """Keys of new objects on every span: the memo keeps at most its few entries."""
        def run() -> None:
            for number in range(500):
                reading.keys_within(BLANK_TURN_KEYS, {f"key.{number}": 1, _copy("model"): 2})

        assert memory_grown(run) < 16_384


def test_the_processor_uses_the_accelerator_where_built() -> None:
    """Where the module is installed (and not turned off), ``span_reading`` is its function,
    and the processor's blank test its ``keys_within``."""
    module = adapters._SPAN_END
    if module is None:
        pytest.skip("the accelerator is not built or turned off here")
    assert adapters.span_reading is module.span_reading
    test = adapters._keys_test(BLANK_TURN_KEYS)
    assert test({k.GEN_AI_OPERATION_NAME: "chat"}) is True
    assert getattr(test, "func", None) is module.keys_within


class TestKeepAside:
    """``keep_aside``: the common case of ``DeferredTurns._set_aside`` in one step."""

    @pytest.fixture(name="keep")
    def _keep(self, reading: ModuleType) -> Callable[..., bool | None]:
        reading.setup_kept(collections.deque, collections.OrderedDict, _MAX_TRACES, _MAX_SPANS)
        return reading.keep_aside  # type: ignore[no-any-return]

    def test_kept_with_its_trace(self, keep: Callable[..., bool | None]) -> None:
        """A trace's first span gets a deque, the next ones join it, in order."""
        deferred: dict[int, Any] = {}
        traces: collections.OrderedDict[int, Any] = collections.OrderedDict()
        assert keep(deferred, traces, 7, "a") is True
        assert keep(deferred, traces, 7, "b") is True
        assert keep(deferred, {}, 8, "c") is True
        assert deferred == {7: collections.deque(["a", "b"]), 8: collections.deque(["c"])}

    def test_a_trace_with_a_run_is_not_kept(self, keep: Callable[..., bool | None]) -> None:
        deferred: dict[int, Any] = {}
        assert keep(deferred, collections.OrderedDict({7: object()}), 7, "a") is False
        assert deferred == {}

    def test_the_limits_and_other_types_go_to_python(self,
                                                     keep: Callable[..., bool | None]) -> None:
        """None, nothing changed: a new trace past _MAX_TRACES, a trace's span past
        _MAX_SPANS, a table that is not an exact dict, an id that is not an int."""
        full = {number: collections.deque() for number in range(_MAX_TRACES)}
        assert keep(full, {}, -1, "a") is None and -1 not in full
        spans = collections.deque(range(_MAX_SPANS))
        deferred: dict[int, Any] = {7: spans}
        assert keep(deferred, {}, 7, "a") is None and len(spans) == _MAX_SPANS

        class Table(dict):  # type: ignore[type-arg]
            pass

        assert keep(Table(), {}, 7, "a") is None
        assert keep({}, Table(), 7, "a") is None
        assert keep({}, {}, "7", "a") is None
        assert keep({7: ["not a deque"]}, {}, 7, "a") is None


def test_no_reference_is_leaked(reading: ModuleType) -> None:
    """Fresh values and spans on every call: what the calls leave allocated stays flat."""
    reading.setup_kept(collections.deque, collections.OrderedDict, _MAX_TRACES, _MAX_SPANS)

    def run() -> None:
        for number in range(300):
            value = _copy(f"agent {number}")
            for key in (k.GEN_AI_OPERATION_NAME, k.OI_SPAN_KIND, k.TL_SPAN_KIND):
                reading.span_reading("x", {key: value, "other": 1})
            reading.span_reading(f"unseen {number}", {"n": number})
            deferred: dict[int, Any] = {}
            reading.keep_aside(deferred, {}, number, [value])
            reading.keep_aside(deferred, {}, number, [value])

    assert memory_grown(run) < 16_384


def test_a_finalizer_run_by_the_memo_may_call_it_again(reading: ModuleType) -> None:
    """Replacing a memo entry frees the set it held; a finalizer of that set's items that
    tests keys again finds the memo whole (the old entry is released last)."""
    answers: list[bool] = []

    class Finalized:
        def __del__(self) -> None:
            answers.append(reading.keys_within(BLANK_TURN_KEYS, {_copy("gen_ai.system"): 1}))

    keys = frozenset({Finalized(), "a"})
    assert reading.keys_within(keys, {_copy("a"): 1}) is True
    del keys
    for number in range(20):  # every entry replaced, the one holding the set among them
        assert reading.keys_within(BLANK_TURN_KEYS, {f"k{number}": 1}) is False
    assert answers == [True]
    assert reading.keys_within(BLANK_TURN_KEYS, {_copy("gen_ai.system"): 1}) is True
