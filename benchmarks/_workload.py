"""Realistic tool calls for the benchmarks: 4-key arguments, ~1 KB JSON results, a mix of tools.

Two shapes of run:

* ``no_loop``: every call is new (fresh arguments and a fresh result), so no detector has a reason
  to short-circuit; this is the worst case for the per-call work.
* ``text``: as ``no_loop``, with each result the plain text a shell or a file read returns (lines,
  a date-time and a duration among them) instead of JSON.
* ``cycle``: a fixed sequence of ``cycle_length`` distinct calls (each with its own result)
  repeated for the whole run, the loop the cycle detector is there to catch.

Calls are deterministic (seeded) and built before timing starts. ``Call`` is the neutral shape
(tool name, arguments dict, result JSON string) that both the otel-loopguard engine
(:func:`to_tool_calls`) and the loopguard-runtime adapter consume, so both see the same calls.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["RESULT_BYTES", "Call", "cycle_run", "no_loop_run", "text_run", "to_tool_calls"]

RESULT_BYTES = 1024
"""Target size of a result's JSON text (each result is within a few bytes above this)."""

_WORDS = (
    "refund", "policy", "invoice", "shipment", "delay", "warehouse", "customer", "address",
    "billing", "account", "tier", "premium", "discount", "coupon", "region", "europe", "asia",
    "pacific", "order", "status", "tracking", "carrier", "label", "return", "window", "damaged",
    "item", "replacement", "voucher", "loyalty", "points", "balance", "statement", "export",
    "report", "quarterly", "revenue", "forecast", "pipeline", "deploy", "cluster", "node",
    "memory", "latency", "drop", "rate", "budget", "approval", "manager", "ticket", "escalation",
    "priority", "sla", "breach", "incident", "postmortem", "owner", "schema", "migration",
    "index", "query", "plan", "cache", "eviction", "replica", "failover", "backup", "restore",
    "audit",
)

_CITIES = ("Paris", "Berlin", "Lisbon", "Osaka", "Lagos", "Lima", "Austin", "Oslo", "Pune", "Perth")


@dataclass(frozen=True, slots=True)
class Call:
    """One finished tool call as an agent framework sees it."""

    tool: str
    arguments: dict[str, Any]
    """Exactly four keys."""
    result: str
    """A JSON object (plain text in ``text_run``) of about ``RESULT_BYTES`` bytes."""


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _args(rng: random.Random, tool: str, i: int) -> dict[str, Any]:
    """Return 4-key arguments for ``tool``; ``i`` makes them unique within a run."""
    if tool == "search_docs":
        return {"query": f"{_phrase(rng, 4)} {i}", "limit": rng.choice((5, 10, 20)),
                "lang": rng.choice(("en", "de", "fr")), "include_archived": rng.random() < 0.2}
    if tool == "query_db":
        return {"sql": f"SELECT id, total FROM orders WHERE customer_id = {1000 + i} "
                       f"AND region = '{rng.choice(_CITIES)}'",
                "database": rng.choice(("sales", "crm", "billing")),
                "timeout_s": rng.choice((5, 10, 30)), "max_rows": rng.choice((50, 100, 500))}
    if tool == "http_get":
        return {"url": f"https://api.example.com/v2/{rng.choice(_WORDS)}/{i}",
                "headers": {"accept": "application/json", "x-tenant": f"t{rng.randrange(40)}"},
                "timeout_s": 10, "follow_redirects": True}
    if tool == "list_orders":
        return {"customer_id": 20_000 + i, "page": 1 + i % 7,
                "status": rng.choice(("open", "shipped", "returned")),
                "sort": rng.choice(("created", "-created", "total"))}
    if tool == "get_weather":
        return {"city": f"{rng.choice(_CITIES)}-{i}", "units": rng.choice(("metric", "imperial")),
                "date": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}", "lang": "en"}
    if tool == "crm_lookup":
        return {"customer_id": 50_000 + i, "fields": ["name", "tier", "owner"],
                "include_history": rng.random() < 0.5, "region": rng.choice(("eu", "us", "ap"))}
    if tool == "read_file":
        return {"path": f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{i}.py",
                "offset": 0, "limit": 400, "encoding": "utf-8"}
    # write_file: a mutating tool, as in real coding-agent runs
    return {"path": f"notes/{rng.choice(_WORDS)}_{i}.md", "content": _phrase(rng, 12),
            "mode": "overwrite", "create_dirs": True}


_TOOLS = ("search_docs", "query_db", "http_get", "list_orders", "get_weather", "crm_lookup",
          "read_file", "write_file")


def _result(rng: random.Random, tool: str, i: int) -> str:
    """Return a ~1 KB JSON result, distinct for each ``i`` (volatile fields included)."""
    items: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"tool": tool, "total": 0, "items": items,
                           "request_id": f"req-{rng.getrandbits(64):016x}",
                           "fetched_at": f"2026-11-29T10:{i % 60:02d}:{rng.randrange(60):02d}Z"}
    while True:
        items.append({"id": f"{tool[:3]}-{i}-{len(items)}", "title": _phrase(rng, 4),
                      "snippet": _phrase(rng, 12), "score": round(rng.random(), 4)})
        doc["total"] = len(items)
        text = json.dumps(doc, separators=(",", ":"))
        if len(text) >= RESULT_BYTES - 60:
            return text


def _text_result(rng: random.Random, tool: str, i: int) -> str:
    """Return ~1 KB of plain text, distinct for each ``i`` (a time and a duration included)."""
    lines = [f"{tool} #{i} at 2026-11-29 10:{i % 60:02d}:{rng.randrange(60):02d}"]
    while sum(map(len, lines)) < RESULT_BYTES - 60:
        lines.append(f"{tool[:3]}-{i}-{len(lines)}  {_phrase(rng, 4)}: {_phrase(rng, 8)}")
    lines.append(f"{len(lines) - 1} items in {rng.randrange(10, 900)} ms")
    return "\n".join(lines)


def text_run(length: int, *, seed: int = 3) -> list[Call]:
    """Return ``length`` calls that never repeat, each result plain text."""
    return _fresh_run(length, seed, _text_result)


def no_loop_run(length: int, *, seed: int = 1) -> list[Call]:
    """Return ``length`` calls that never repeat: a mix of eight tools, every call new."""
    return _fresh_run(length, seed, _result)


def _fresh_run(length: int, seed: int, result: Callable[[random.Random, str, int], str]
               ) -> list[Call]:
    rng = random.Random(seed)
    calls = []
    for i in range(length):
        tool = _TOOLS[rng.randrange(len(_TOOLS))]
        calls.append(Call(tool, _args(rng, tool, i), result(rng, tool, i)))
    return calls


def cycle_run(length: int, cycle_length: int, *, seed: int = 2) -> list[Call]:
    """Return ``length`` calls made of ``cycle_length`` distinct calls repeated in order."""
    rng = random.Random(seed)
    cycle = []
    for i in range(cycle_length):
        tool = _TOOLS[i % len(_TOOLS)]
        cycle.append(Call(tool, _args(rng, tool, i), _result(rng, tool, i)))
    return [cycle[i % cycle_length] for i in range(length)]


def to_tool_calls(calls: list[Call], *, trace_id: str = "0" * 31 + "1",
                  json_args: bool = True) -> list[Any]:
    """Return otel-loopguard ``ToolCall`` objects for ``calls``, shaped as the adapters make them.

    Arguments are the JSON text a GenAI span carries (``json.dumps`` as the SDK instrumentations
    and ``LoopGuardHarness`` write it; the adapters hand it over unparsed), or the dict itself with
    ``json_args=False`` (the shape in-process integrations pass); the result stays the JSON string
    the span carried; each call is its own model turn, 10 ms long, one after the other.
    """
    from otel_loopguard.types import ToolCall

    out = []
    start = 1_700_000_000_000_000_000
    for i, call in enumerate(calls):
        arguments: Any = json.dumps(call.arguments) if json_args else call.arguments
        out.append(ToolCall(tool=call.tool, arguments=arguments, result=call.result,
                            has_result=True, agent="bench-agent", span_id=f"{i + 1:016x}",
                            trace_id=trace_id, start_time_ns=start, end_time_ns=start + 10_000_000,
                            turn=i + 1))
        start += 20_000_000
    return out
