"""docs/testing.md's tables of ``LoopGuardHarness`` and ``AgentScript`` methods show the
signatures the code has, so a keyword the page leaves out is not one users cannot find."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from otel_loopguard.testing import MISSING, AgentScript, LoopGuardHarness

PAGE = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
_ROW = re.compile(r"^\| `(?P<name>\w+)\((?P<params>[^`]*)\)` \|", re.MULTILINE)


def _default(value: Any) -> str:
    if value is MISSING:
        return "MISSING"
    return "None" if value is None else json.dumps(value)


def _written(method: Any) -> str:
    """The parameters of ``method`` as the page writes them: ``a, b=None, *, c=0.01``."""
    out: list[str] = []
    for param in list(inspect.signature(method).parameters.values())[1:]:
        if param.kind is param.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        default = "" if param.default is param.empty else f"={_default(param.default)}"
        out.append(param.name + default)
    return ", ".join(out)


def test_method_tables_match_the_code() -> None:
    rows = {m["name"]: m["params"] for m in _ROW.finditer(PAGE.read_text(encoding="utf-8"))}
    methods = {name: getattr(cls, name) for cls in (LoopGuardHarness, AgentScript)
               for name, _ in inspect.getmembers(cls, inspect.isfunction)
               if not name.startswith("_")}
    assert sorted(rows) == sorted(methods)
    assert {name: _written(methods[name]) for name in rows} == rows
