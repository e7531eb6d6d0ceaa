"""Budgets: tool calls per run, calls of one tool per run, wall-clock seconds per run."""

from __future__ import annotations

import sys
from typing import ClassVar

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase, lowest
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Action, Evidence

__all__ = ["BudgetDetector"]


class _BudgetState:
    __slots__ = ("calls", "per_tool", "seconds_warned", "started_ns", "steps_warned")

    def __init__(self) -> None:
        self.calls = 0
        self.per_tool: dict[str, int] = {}
        self.started_ns = 0
        self.seconds_warned = False
        self.steps_warned = False


class BudgetDetector(DetectorBase):
    """Run budgets: warn once when a warn budget is reached, stop on every call past a stop one.

    Defaults: warn at 50 tool calls per run; the other budgets (calls of one tool, steps, i.e.
    tool calls and model turns, and wall-clock seconds) are off. Exempt tools count toward
    budgets but are never flagged themselves.
    """

    name: ClassVar[str] = "budget"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; budgets that are off for every tool are never looked at."""
        super().__init__(config)
        cfg = self.config
        self._per_tool = lowest(cfg, "max_calls_per_tool_warn",
                                "max_calls_per_tool_stop") != sys.maxsize
        self._by_time = (cfg.max_run_seconds_warn is not None
                         or cfg.max_run_seconds_stop is not None)

    def new_state(self) -> _BudgetState:
        """Return the run's counters."""
        return _BudgetState()

    def observe(self, state: _BudgetState, step: Step) -> Evidence | None:
        """Count the call and compare every budget (a stop wins over a warn)."""
        state.calls += 1
        tool = step.tool
        per_tool = state.per_tool[tool] = state.per_tool.get(tool, 0) + 1
        if len(state.per_tool) > 1024:
            del state.per_tool[next(iter(state.per_tool))]
        if not state.started_ns:
            state.started_ns = step.start_time_ns or step.end_time_ns
        if step.kind == "exempt":
            return None
        found = self._counted(step, state, per_tool)
        if not self._by_time or (found is not None and found.action is Action.STOP):
            return found
        seconds = max(0, step.end_time_ns - state.started_ns) / 1e9
        by_time = self._seconds(step, seconds, state)
        if by_time is not None and (found is None or by_time.action > found.action):
            return by_time
        return found

    def _counted(self, step: Step, state: _BudgetState,  # noqa: PLR0911 - one per budget
                 per_tool: int) -> Evidence | None:
        """Compare the counted budgets: every stop first, then the first warn reached.

        Steps are the run's tool calls plus the model turns before this call (seed 002's step
        budget); a turn can add several at once, so its warn fires once, on reaching it.
        """
        cfg, calls, tool = self.config, state.calls, step.tool
        stop = cfg.max_tool_calls_stop
        if stop is not None and calls >= stop:
            return self._hit(step, "run", calls, stop, Action.STOP)
        steps = calls + step.turns
        if cfg.max_steps_stop is not None and steps >= cfg.max_steps_stop:
            return self._hit(step, "steps", steps, cfg.max_steps_stop, Action.STOP)
        tool_warn = None
        if self._per_tool:
            tool_stop = cfg.threshold(tool, "max_calls_per_tool_stop")
            if tool_stop is not None and per_tool >= tool_stop:
                return self._hit(step, "tool", per_tool, tool_stop, Action.STOP)
            tool_warn = cfg.threshold(tool, "max_calls_per_tool_warn")
        if cfg.max_tool_calls_warn is not None and calls == cfg.max_tool_calls_warn:
            return self._hit(step, "run", calls, cfg.max_tool_calls_warn, Action.WARN)
        if tool_warn is not None and per_tool == tool_warn:
            return self._hit(step, "tool", per_tool, tool_warn, Action.WARN)
        warn = cfg.max_steps_warn
        if warn is not None and steps >= warn and not state.steps_warned:
            state.steps_warned = True
            return self._hit(step, "steps", steps, warn, Action.WARN)
        return None

    def _seconds(self, step: Step, seconds: float, state: _BudgetState) -> Evidence | None:
        cfg = self.config
        if cfg.max_run_seconds_stop is not None and seconds >= cfg.max_run_seconds_stop:
            return self._hit(step, "seconds", state.calls, cfg.max_run_seconds_stop, Action.STOP,
                             seconds)
        warn = cfg.max_run_seconds_warn
        if warn is not None and seconds >= warn and not state.seconds_warned:
            state.seconds_warned = True
            return self._hit(step, "seconds", state.calls, warn, Action.WARN, seconds)
        return None

    def _hit(self, step: Step, scope: str, count: int, limit: float,  # noqa: PLR0917
             action: Action, seconds: float | None = None) -> Evidence | None:
        details: dict[str, object] = {"budget": scope, "limit": limit,
                                      "call_indices": [step.index]}
        if seconds is not None:
            details["seconds"] = round(seconds, 3)
        code = "BUDGET_EXHAUSTED" if action is Action.STOP else "BUDGET_WARNING"
        return self.evidence(code, action, step.tool, count, details)
