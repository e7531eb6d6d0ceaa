"""The C accelerator of text results computes exactly the Python definition, and the findings
are the same with it and without it.

The accelerator is built from its source here when the installed package lacks it (an editable
install, a pure-Python wheel); the tests skip only when this machine cannot compile it.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from corpus import replay

import otel_loopguard.signature._text as text_module
from otel_loopguard.signature._text import canonical_text

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def textscan(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled accelerator: the installed one, else one built from the source now."""
    try:
        from otel_loopguard.signature import _textscan  # type: ignore[attr-defined]
    except ImportError:
        sys.path.insert(0, str(ROOT))
        try:
            from hatch_build import SOURCE, build_extension
        finally:
            sys.path.remove(str(ROOT))
        try:
            built = build_extension(ROOT / SOURCE, tmp_path_factory.mktemp("textscan"))
        except RuntimeError as exc:
            pytest.skip(f"the accelerator cannot be built here: {exc}")
        spec = importlib.util.spec_from_file_location("_textscan", built)
        assert spec is not None and spec.loader is not None
        _textscan = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_textscan)
    return _textscan


_PIECES = (*"0123456789abcdefABCDEFxXzZTt:.,-+_ \n\t\r\x0b\x1c#gmsé",
    "ms", "sec", "Seconds", "minutes", " hours", "h", "hr", "2026-11-29T10:00:00.5+05:30",
    "2026-11-29 10:00", "0x7f3a", "0x", "deadbeef", "12:34:56", "1:02:03,4", "in 0.53s",
    "3f2a9c1b-7d4e-4b1a-9c3d-0123456789ab", "123456789012", "abcdef123456", "  ", "\n\n")


def _random_texts(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 30)))


def test_random_texts_get_the_python_form(textscan: ModuleType) -> None:
    differ = [text for text in _random_texts(60_000, 7)
              if (textscan.canonical_text(text) or canonical_text(text)) != canonical_text(text)]
    assert not differ, f"{len(differ)} texts differ, first: {differ[:3]!r}"


def test_non_ascii_text_is_left_to_python(textscan: ModuleType) -> None:
    assert textscan.canonical_text("took 12 ms — done") is None
    assert textscan.canonical_text("took 12 ms, done") == "took #, done"
    with pytest.raises(TypeError, match="takes a str"):
        textscan.canonical_text(b"bytes")


def test_what_the_form_masks(textscan: ModuleType) -> None:
    cases = {
        "ran 12 tests in 0.53s\n\nOK": "ran 12 tests in # OK",
        "at 2026-11-29T10:00:05.123Z job 3f2a9c1b7d4e started": "at # job # started",
        "<Context object at 0x7f3a5c1d2e90> 3 failed, 2 passed":
            "<Context object at #> 3 failed, 2 passed",
        "  job:3f2a9c1b7d4e  ": "job:3f2a9c1b7d4e",  # one word: the answer, not noise
        "line 12:34 col 5": "line 12:34 col 5",
        "": "",
    }
    for text, form in cases.items():
        assert canonical_text(text) == form, text
        assert textscan.canonical_text(text) == form, text


def _corpus_texts() -> Iterator[str]:
    for run in replay.iter_runs():
        for turn in run["turns"]:
            for call in turn["calls"]:
                result = call.get("result")
                if isinstance(result, str) and result.lstrip()[:1] not in ("{", "["):
                    yield result


@pytest.mark.slow
def test_every_text_result_of_the_corpus_gets_the_python_form(textscan: ModuleType) -> None:
    texts = differ = 0
    first = ""
    for text in _corpus_texts():
        texts += 1
        fast = textscan.canonical_text(text)
        if fast is not None and fast != canonical_text(text):
            differ += 1
            first = first or text
    assert texts > 10_000
    assert not differ, f"{differ} of {texts} corpus texts differ, first: {first[:200]!r}"


@pytest.mark.slow
def test_findings_are_the_same_without_the_accelerator(
        textscan: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from _golden_findings import GOLDEN, all_findings, dump

    def python_only(text: str) -> str | None:
        del text
        return None

    scan: Callable[[str], str | None] = python_only
    monkeypatch.setattr(text_module, "_SCAN", scan)
    stored = json.loads(GOLDEN.read_text())
    assert json.loads(dump(all_findings())) == stored
    monkeypatch.setattr(text_module, "_SCAN", textscan.canonical_text)
    assert json.loads(dump(all_findings())) == stored
