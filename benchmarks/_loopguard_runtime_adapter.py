"""Feed the benchmark's tool calls through loopguard-runtime (PyPI), for a side-by-side timing.

loopguard-runtime (import name ``loopguard``, version 0.2.1 when written) has no OpenTelemetry
input. Its Python API for a live agent is ``loopguard.LoopGuardCallbackHandler``, a LangChain
callback handler: ``on_tool_start(serialized, input_str, inputs=...)`` when a tool starts and
``on_tool_end(output)`` when it returns. Each call records two events in its ``Monitor``; the
detectors are ``loopguard.guard.default_detectors()`` (exact repeats, stall, progress, repeated
failure, cycle, handoff). LangChain is not needed: the handler falls back to a plain base class.

Two ways to drive it are offered:

* :class:`RuntimeCallbackAdapter` - the documented integration, default detectors, everything
  the handler does per call (it also keeps a JSON-ready message log of each event/decision).
  ``interrupt_on_fatal=False`` only so a stop decision cannot raise out of a timing loop; it
  changes no detection work (the benchmark's workloads never reach stop anyway).
* :class:`RuntimeMonitorAdapter` - the bare ``Monitor`` with the same default detectors and the
  same event signatures the handler would record, without the handler's message log. This is
  the lowest cost loopguard-runtime can be made to run at, for an honest lower bound.

This module imports ``loopguard`` at import time: it is for ``benchmarks/bench_engine.py`` run
from a venv where loopguard-runtime is installed, never for the tests.
"""

from __future__ import annotations

from typing import Any

from loopguard.guard import default_detectors  # type: ignore[import-not-found]
from loopguard.langgraph import LoopGuardCallbackHandler  # type: ignore[import-not-found]
from loopguard.monitor import Monitor  # type: ignore[import-not-found]
from loopguard.runner import tool_signature  # type: ignore[import-not-found]
from loopguard.signals import GuardAction  # type: ignore[import-not-found]

__all__ = ["RuntimeCallbackAdapter", "RuntimeMonitorAdapter", "version"]


def version() -> str:
    """Return the installed loopguard-runtime version."""
    from importlib.metadata import version as dist_version

    return dist_version("loopguard-runtime")


class RuntimeCallbackAdapter:
    """One run = one fresh ``LoopGuardCallbackHandler`` with its default detectors."""

    name = "loopguard-runtime (callback handler)"

    def __init__(self) -> None:
        self.handler = LoopGuardCallbackHandler(interrupt_on_fatal=False)

    def new_run(self) -> None:
        """Start a new run, as a fresh handler per agent invocation."""
        self.handler = LoopGuardCallbackHandler(interrupt_on_fatal=False)

    def process(self, tool: str, arguments: dict[str, Any], result: str) -> GuardAction:
        """Feed one finished tool call; return the action decided on its result."""
        handler = self.handler
        handler.on_tool_start({"name": tool}, None, inputs=arguments)
        handler.on_tool_end(result)
        return handler.monitor.decisions[-1].action


class RuntimeMonitorAdapter:
    """One run = one fresh ``Monitor`` with the default detectors, fed as the handler feeds it."""

    name = "loopguard-runtime (bare Monitor)"

    def __init__(self) -> None:
        self.monitor = Monitor(default_detectors())

    def new_run(self) -> None:
        """Start a new run."""
        self.monitor = Monitor(default_detectors())

    def process(self, tool: str, arguments: dict[str, Any], result: str) -> GuardAction:
        """Record the tool decision and its observation; return the action on the result."""
        monitor = self.monitor
        monitor.observe_decision("agent", f"decided: {tool}({arguments})",
                                 tool_signature(tool, arguments), last_tool=tool,
                                 last_args=arguments)
        text = str(result).strip().replace("\n", " ")[:160]
        observed = monitor.observe_decision("tools", f"observed: {text}", f"result:{text}",
                                            last_result=text)
        return observed.decision.action
