"""Enforce mode inside agent frameworks: the hooks that stop a looping tool call before it runs.

* :mod:`otel_loopguard.integrations.openai_agents`: tool input/output guardrails for the OpenAI
  Agents SDK (``guard_tools(tools, processor)``).
* :mod:`otel_loopguard.integrations.langchain`: ``LoopGuardMiddleware`` for LangChain 1.x
  ``create_agent`` and ``guard_tool(tool, processor)`` for LangGraph's ``ToolNode``.

Each module imports its framework only when it is imported itself: ``otel_loopguard`` never
depends on a framework. Both use the state of a ``LoopGuardSpanProcessor``; see ``docs/enforce.md``.
"""

from __future__ import annotations

from otel_loopguard.enforce._verdict import GuardVerdict

__all__ = ["GuardVerdict"]
