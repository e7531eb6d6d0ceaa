"""Budgets: tool calls per run, calls of one tool per run, wall-clock seconds per run."""

from __future__ import annotations

from otel_loopguard.detectors._base import DetectorBase
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Action, Evidence

__all__ = ["BudgetDetector"]


class _BudgetState:
    __slots__ = ("calls", "per_tool", "seconds_warned", "started_ns")

    def __init__(self) -> None:
        self.calls = 0
        self.per_tool: dict[str, int] = {}
        self.started_ns = 0
        self.seconds_warned = False


class BudgetDetector(DetectorBase):
    """Run budgets: warn once when a warn budget is reached, stop on every call past a stop one.

    Defaults: warn at 50 tool calls per run; the other budgets are off. Exempt tools count
    toward budgets but are never flagged themselves.
    """

    name = "budget"

    def new_state(self) -> _BudgetState:
        """Return the run's counters."""
        return _BudgetState()

    def observe(self, state: _BudgetState, step: Step) -> Evidence | None:
        """Count the call and compare every budget."""
        state.calls += 1
        per_tool = state.per_tool[step.tool] = state.per_tool.get(step.tool, 0) + 1
        if len(state.per_tool) > 1024:
            del state.per_tool[next(iter(state.per_tool))]
        if not state.started_ns:
            state.started_ns = step.start_time_ns or step.end_time_ns
        if step.kind == "exempt":
            return None
        cfg = self.config
        seconds = max(0, step.end_time_ns - state.started_ns) / 1e9
        checks = (
            ("run", state.calls, cfg.max_tool_calls_warn, cfg.max_tool_calls_stop),
            ("tool", per_tool, cfg.threshold(step.tool, "max_calls_per_tool_warn"),
             cfg.threshold(step.tool, "max_calls_per_tool_stop")),
        )
        warned: Evidence | None = None
        for scope, count, warn, stop in checks:
            if stop is not None and count >= stop:
                return self._hit(step, scope, count, stop, Action.STOP)
            if warn is not None and count == warn and warned is None:
                warned = self._hit(step, scope, count, warn, Action.WARN)
        by_time = self._seconds(step, seconds, state)
        if by_time is not None and (warned is None or by_time.action > warned.action):
            return by_time
        return warned

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
