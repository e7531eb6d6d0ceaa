"""Budgets: tool calls per run, calls of one tool per run, wall-clock seconds per run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Action, Evidence

__all__ = ["BudgetDetector"]

_PER_TOOL = ("max_calls_per_tool_warn", "max_calls_per_tool_stop")


@dataclass(frozen=True, slots=True)
class _Limits:
    """The budgets of one kind of run: the global ones, or a prompt template's."""

    max_tool_calls_warn: int | None
    max_tool_calls_stop: int | None
    max_calls_per_tool_warn: int | None
    max_calls_per_tool_stop: int | None
    max_steps_warn: int | None
    max_steps_stop: int | None
    max_run_seconds_warn: float | None
    max_run_seconds_stop: float | None
    per_tool: bool
    """True when some tool may have a per-tool budget (else those are never looked up)."""
    by_time: bool

    @classmethod
    def of(cls, values: Mapping[str, Any], tool_budgets: bool) -> _Limits:
        """Return the limits in ``values``; ``tool_budgets``: a tool's table sets one."""
        per_tool = tool_budgets or any(values[name] is not None for name in _PER_TOOL)
        by_time = (values["max_run_seconds_warn"] is not None
                   or values["max_run_seconds_stop"] is not None)
        return cls(values["max_tool_calls_warn"], values["max_tool_calls_stop"],
                   values["max_calls_per_tool_warn"], values["max_calls_per_tool_stop"],
                   values["max_steps_warn"], values["max_steps_stop"],
                   values["max_run_seconds_warn"], values["max_run_seconds_stop"],
                   per_tool, by_time)


class _BudgetState:
    __slots__ = ("calls", "calls_floor", "calls_warned", "limits", "per_tool", "quiet_below",
                 "seconds_warned", "started_ns", "steps_floor", "steps_warned")

    def __init__(self, limits: _Limits, floors: tuple[float, float, float] | None = None) -> None:
        """Count from zero under ``limits``; ``floors``: ``refloor``'s answer, when known."""
        self.calls = 0
        self.per_tool: dict[str, int] = {}
        self.started_ns = 0
        self.limits = limits
        # the warn limit each budget last warned at: a warn fires once, and once more only
        # when the run's prompt template raises that limit later in the run
        self.calls_warned = self.steps_warned = -1
        self.seconds_warned = -1.0
        self.calls_floor = self.steps_floor = 0.0
        """The fewest tool calls, and steps, at which a counted budget can still fire: below
        both, ``observe`` looks at none (``refloor``)."""
        self.quiet_below = 0.0
        """The tool calls below which a call reaches no budget whatever the run's model turns
        and times (no steps or time budget, none per tool): a caller may then only count the
        call (``BuiltinDetectors``); 0 when every call needs a look (``refloor``)."""
        if floors is None:
            self.refloor()
        else:
            self.calls_floor, self.steps_floor, self.quiet_below = floors

    def refloor(self) -> None:
        """Recompute the floors from the limits and the warns already given.

        A stop fires on every call past it; a warn only until it has fired at its limit. With
        a per-tool budget the floors are 0: every call may reach one.
        """
        limits = self.limits
        if limits.per_tool:
            self.calls_floor = self.steps_floor = self.quiet_below = 0.0
            return
        self.calls_floor = _lowest(limits.max_tool_calls_stop, limits.max_tool_calls_warn,
                                   self.calls_warned)
        self.steps_floor = _lowest(limits.max_steps_stop, limits.max_steps_warn,
                                   self.steps_warned)
        self.quiet_below = self.calls_floor \
            if self.steps_floor == math.inf and not limits.by_time else 0.0


def _lowest(stop: int | None, warn: int | None, warned: float) -> float:
    """Return the lowest count at which ``stop`` is passed, or ``warn`` not yet fired reached."""
    found = [limit for limit in (None if stop is None else stop + 1,
                                 warn if warn is None or warn > warned else None)
             if limit is not None]
    return min(found, default=math.inf)


class BudgetDetector(DetectorBase):
    """Run budgets: warn once when a warn budget is reached, stop on every call past a stop one.

    A stop budget of N tool calls lets N calls run: the N+1st is stopped (in enforce mode,
    before it runs), and so is every call after it; a warn budget of N warns on the Nth call.

    Defaults: warn at 50 tool calls per run; the other budgets (calls of one tool, steps, i.e.
    tool calls and model turns, and wall-clock seconds) are off. Exempt tools count toward
    budgets but are never flagged themselves. A prompt template's table
    (``LoopGuardConfig.templates``) replaces the budgets it sets for runs of that template,
    from the call after the engine learns the run's template (``use_template``); a tool's own
    table still wins for the per-tool budgets.
    """

    name: ClassVar[str] = "budget"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; budgets that are off for every tool are never looked at."""
        super().__init__(config)
        cfg = self.config
        tool_budgets = any(name in o.thresholds for o in cfg.tools.values() for name in _PER_TOOL)
        self._default = _Limits.of(cfg.values, tool_budgets)
        # one entry per configured table: bounded by the config, never by the templates seen
        self._templates = {table: _Limits.of({**cfg.values, **budgets}, tool_budgets)
                           for table, budgets in cfg.templates.items()}
        self._per_tool = self._default.per_tool or any(
            limits.per_tool for limits in self._templates.values())
        """Some run may have a per-tool budget: calls are counted per tool (else never)."""
        fresh = _BudgetState(self._default)
        self._floors = (fresh.calls_floor, fresh.steps_floor, fresh.quiet_below)
        """The floors of a new run's counters, worked out once (``_BudgetState.refloor``)."""

    def new_state(self) -> _BudgetState:
        """Return the run's counters."""
        return _BudgetState(self._default, self._floors)

    def use_template(self, state: _BudgetState, template: str | None) -> None:
        """Apply the budgets of prompt template ``template`` to the run (global if none)."""
        table = self.config.template_table(template)
        state.limits = self._default if table is None else self._templates[table]
        state.refloor()

    def observe(self, state: _BudgetState, step: Step) -> Evidence | None:
        """Count the call and compare every budget (a stop wins over a warn)."""
        state.calls += 1
        per_tool = self._count(state.per_tool, step.tool) if self._per_tool else 0
        if not state.started_ns:
            state.started_ns = step.start_time_ns or step.end_time_ns
        if step.kind == "exempt":
            return None
        limits, calls = state.limits, state.calls
        quiet = calls < state.calls_floor and calls + step.turns < state.steps_floor
        found = None if quiet else self._counted(step, state, per_tool)
        if not limits.by_time or (found is not None and found.action is Action.STOP):
            return found
        seconds = max(0, step.end_time_ns - state.started_ns) / 1e9
        by_time = self._seconds(step, seconds, state)
        if by_time is not None and (found is None or by_time.action > found.action):
            return by_time
        return found

    @staticmethod
    def _count(counts: dict[str, int], tool: str) -> int:
        """Count one more call of ``tool`` (at most 1,024 tools, the oldest dropped)."""
        count = counts[tool] = counts.get(tool, 0) + 1
        if len(counts) > 1024:
            del counts[next(iter(counts))]
        return count

    def _counted(self, step: Step, state: _BudgetState,  # noqa: PLR0911 - one per budget
                 per_tool: int) -> Evidence | None:
        """Compare the counted budgets: every stop first, then the first warn reached.

        Steps are the run's tool calls plus the model turns before this call (seed 002's step
        budget); a turn can add several at once, so its warn fires once, on reaching it.
        """
        limits, calls, tool = state.limits, state.calls, step.tool
        stop = limits.max_tool_calls_stop
        if stop is not None and calls > stop:
            return self._hit(step, "run", calls, stop, Action.STOP)
        steps = calls + step.turns
        if limits.max_steps_stop is not None and steps > limits.max_steps_stop:
            return self._hit(step, "steps", steps, limits.max_steps_stop, Action.STOP)
        tool_warn = None
        if limits.per_tool:
            tool_stop = self._tool_limit(tool, "max_calls_per_tool_stop", limits)
            if tool_stop is not None and per_tool > tool_stop:
                return self._hit(step, "tool", per_tool, tool_stop, Action.STOP)
            tool_warn = self._tool_limit(tool, "max_calls_per_tool_warn", limits)
        warn = limits.max_tool_calls_warn
        if warn is not None and calls >= warn > state.calls_warned:
            state.calls_warned = warn
            state.refloor()
            return self._hit(step, "run", calls, warn, Action.WARN)
        if tool_warn is not None and per_tool == tool_warn:
            return self._hit(step, "tool", per_tool, tool_warn, Action.WARN)
        warn = limits.max_steps_warn
        if warn is not None and steps >= warn > state.steps_warned:
            state.steps_warned = warn
            state.refloor()
            return self._hit(step, "steps", steps, warn, Action.WARN)
        return None

    def _tool_limit(self, tool: str, name: str, limits: _Limits) -> Any:
        """Return a per-tool budget: the tool's own table, else the run's limits."""
        override = self.config.tools.get(tool)
        if override is not None and name in override.thresholds:
            return override.thresholds[name]
        return getattr(limits, name)

    def _seconds(self, step: Step, seconds: float, state: _BudgetState) -> Evidence | None:
        limits = state.limits
        if limits.max_run_seconds_stop is not None and seconds > limits.max_run_seconds_stop:
            return self._hit(step, "seconds", state.calls, limits.max_run_seconds_stop,
                             Action.STOP, seconds)
        warn = limits.max_run_seconds_warn
        if warn is not None and seconds >= warn > state.seconds_warned:
            state.seconds_warned = warn
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
