"""Checked by mypy, never run: ``ToolGuard.tool`` must keep the decorated function's signature.

``tests/test_enforce.py::test_tool_decorator_keeps_signatures_under_mypy`` runs
``mypy tests/typing/api.py`` with the project's strict settings. Each ``type: ignore`` below
marks a call that must be a type error; if the decorator returned ``Any``, the error would go
away and strict mode would report the ignore as unused.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from otel_loopguard import LoopGuardSpanProcessor, ToolGuard

guard = ToolGuard(LoopGuardSpanProcessor(registry=None))


@guard.tool
def search(query: str, limit: int = 5) -> str:
    """A sync tool."""
    return f"{query}:{limit}"


@guard.tool(name="fetch_page")
async def fetch(url: str) -> dict[str, int]:
    """An async tool, decorated with a name."""
    return {url: 200}


# The decorated functions keep their parameters and return types.
search_ref: Callable[[str, int], str] = search
fetch_ref: Callable[[str], Coroutine[Any, Any, dict[str, int]]] = fetch
text: str = search("refund policy")
text_too: str = search("refund policy", limit=3)


async def use_fetch() -> int:
    """Awaiting the async tool gives its own return type."""
    page: dict[str, int] = await fetch("https://example.com")
    return page["https://example.com"]


# Wrong calls are type errors (each ignore must be used).
search(42)  # type: ignore[arg-type]
search("q", limit="many")  # type: ignore[arg-type]
number: int = search("q")  # type: ignore[assignment]
never_awaited = fetch(url=1)  # type: ignore[arg-type]
wrong_ref: Callable[[int], str] = search  # type: ignore[assignment]
