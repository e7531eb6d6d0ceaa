"""The accelerator's per-call helpers give what the Python they replace gives.

``sign_call`` (a call's signature in one C call) against ``canonical_args`` and ``digest``;
``new_slotted`` (the engine's Step and Decision made without their ``__init__``) against
calling the class.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType

import orjson
import pytest
from _compiled import compiled

from otel_loopguard.detectors._step import Step
from otel_loopguard.signature import call_signature, digest
from otel_loopguard.signature._form import _xxh3_hex
from otel_loopguard.types import Action, Decision


@pytest.fixture(scope="module")
def accel(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled accelerator: the installed one, else one built from the source now."""
    return compiled("otel_loopguard/signature/_accel.c", tmp_path_factory)


def _random_value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick < 2:
        return rng.choice(("x", "a  b", " é\u2028中 ", "2026-11-29T10:00:00Z", "<C at 0x7f>",
                           "y" * rng.choice((10, 5000)), "\U0001f600 z"))
    if pick < 4:
        return rng.choice((0, -7, 2**63, 1.5, 1e300, True, None))
    if pick < 6:
        return rng.choice(("", "ok", "s p a c e d"))
    if pick < 8:
        return {rng.choice(("k", "é", "b", "a", "\u2028")) + str(i): _random_value(rng, depth + 1)
                for i in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_sign_call_is_the_digest_of_the_tool_and_canonical_args(accel: ModuleType) -> None:
    """(loads(text), digest(tool + NUL + canonical_args(text)[1])), or None where
    canonical_args in C leaves the text to Python."""
    rng = random.Random(5)
    texts = [json.dumps({"a": _random_value(rng), "b": _random_value(rng)},
                        ensure_ascii=rng.random() < 0.5) for _ in range(2000)]
    texts += ['{"a": 1', "[1]", "", " {}", "{}", '{"s": "<C at 0x7f3a5c1d>"}', "not json"]
    signed_texts = 0
    for text in texts:
        tool = rng.choice(("search", "é_tool", "", "t\ud800", "中"))
        expected = accel.canonical_args(text, 4096, orjson.loads)
        signed = accel.sign_call(tool, text, 4096, orjson.loads, _xxh3_hex)
        if expected is None:
            assert signed is None, text
            continue
        signed_texts += 1
        assert signed == (expected[0], digest(tool + "\x00" + expected[1])), (tool, text)
    assert signed_texts > 1000
    assert accel.sign_call(7, '{"a": 1}', 4096, orjson.loads, _xxh3_hex) is None  # not a str
    assert accel.sign_call("t", {"a": 1}, 4096, orjson.loads, _xxh3_hex) is None

    def refuse(text: str) -> object:
        raise TypeError(text)

    with pytest.raises(TypeError):
        accel.sign_call("t", '{"a": 1}', 4096, refuse, _xxh3_hex)


def test_call_signature_signs_what_it_cannot_read() -> None:
    """Arguments the C reading leaves to Python, and those nothing can sign, still sign."""
    args, sig = call_signature("t", {"b": [1, 2], "a": "x  y"}, 4096)
    assert args == {"a": "x  y", "b": [1, 2]} and len(sig) == 16
    assert call_signature("t", '{"a": "x  y", "b": [1, 2]}', 4096)[1] == sig

    class Unreadable(Mapping[str, object]):
        def __getitem__(self, key: str) -> object:
            raise ValueError(key)

        def __iter__(self) -> Iterator[str]:
            raise ValueError("no")

        def __len__(self) -> int:
            return 1

    args, sig = call_signature("t", Unreadable(), 4096)
    assert args is None and sig == digest("t\x00\x00unsignable:ValueError")


def test_new_slotted_makes_what_the_class_makes(accel: ModuleType) -> None:
    fields = (3, "read_file", "read", "c" * 16, True, "r" * 16, None, None, "", False,
              "0" * 16, 10, 20, True, "pair", {"path": "a"}, 2, "key", "outcome", 1, None, 1,
              "pair")
    made = accel.new_slotted(Step, *fields)
    assert type(made) is Step and made == Step(*fields)
    decision = (Action.CONTINUE, "OK", (), "", 3, "read_file", "0" * 16, False)
    assert accel.new_slotted(Decision, *decision) == Decision(*decision)
    # fewer values than fields: the class is called, with its defaults
    assert accel.new_slotted(Decision, Action.WARN) == Decision(Action.WARN)
    with pytest.raises(TypeError):
        accel.new_slotted(Decision, *decision, "one too many")


def test_new_slotted_calls_classes_of_another_shape(accel: ModuleType) -> None:
    """A class with a __post_init__, without slots of its own, or not a dataclass is called."""

    @dataclass(slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            self.value += 1

    @dataclass
    class Unslotted:
        value: int

    class Inherits(Decision):
        def __init__(self, *fields: object) -> None:
            self.fields = fields

    assert accel.new_slotted(Checked, 1).value == 2
    assert accel.new_slotted(Unslotted, 1) == Unslotted(1)
    made = accel.new_slotted(Inherits, 1, 2)
    assert type(made) is Inherits and made.fields == (1, 2)
    with pytest.raises(TypeError):
        accel.new_slotted()
