"""What a run spent continuing its loops: the tool calls after the first finding, and their cost.

The definition (docs/metrics.md, "Waste"): after a run's first **loop finding** (a tool call
decided above ``continue`` with evidence from a loop detector: every detector but ``budget``,
``handoff`` and ``idle_turns``), a later tool call is **wasted** when

* it is a loop finding itself, or
* the run is still in its loop (every call since the latest loop finding was wasted) and the
  call repeats an earlier call of the run with the same outcome (same arguments, same result or
  error) in the same world version, which is what the repetition detectors count as a repeat.

The first call that is neither ends the loop (the agent did something new); counting resumes at
the run's next loop finding. Calls of ``exempt`` tools are neither wasted nor end a loop. Each
wasted call adds its tool span's duration; the model turn that issued it (``ToolCall.turn``)
adds its tokens (and their price) once, whichever of the turn and its calls arrives first (the
calls of one turn come one after another: they end after it and before the next turn).

One ``RunWaste`` per run, updated by the engine as each call is decided and each model turn
arrives; guarded by the run's lock like the rest of ``RunState``. Bounded: the usage of the
latest 64 model turns is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard.types import Action, Evidence, ToolCall

if TYPE_CHECKING:
    from otel_loopguard.config import ModelPrice

__all__ = ["NOT_LOOP_DETECTORS", "RunWaste", "Waste", "is_loop_finding"]

NOT_LOOP_DETECTORS: Final = frozenset({"budget", "handoff", "idle_turns"})
"""Detectors whose findings start no waste: a budget is a limit, not a loop; handoffs and idle
turns are not tool calls."""
_MAX_TURNS: Final = 64
_NO_COST: Final[Mapping[str, float]] = MappingProxyType({})


def is_loop_finding(action: Action, evidence: list[Evidence]) -> bool:
    """Return True when a call decided ``action`` on ``evidence`` (its own) is a loop finding."""
    return action is not Action.CONTINUE and any(
        found.action and found.detector not in NOT_LOOP_DETECTORS for found in evidence)


@dataclass(frozen=True, slots=True)
class Waste:
    """Totals of wasted tool calls and what they cost (a run's, or a sum over runs)."""

    tool_calls: int = 0
    model_turns: int = 0
    """Model turns that issued at least one wasted call, each counted once."""
    input_tokens: int = 0
    output_tokens: int = 0
    tool_seconds: float = 0.0
    """The wasted calls' tool span durations, summed."""
    cost: Mapping[str, float] = field(default_factory=lambda: _NO_COST)
    """Currency → what the wasted turns' tokens cost, for models with configured prices."""

    def __bool__(self) -> bool:
        """Return True when anything was wasted."""
        return bool(self.tool_calls or self.model_turns or self.input_tokens
                    or self.output_tokens or self.cost)

    def __add__(self, other: Waste) -> Waste:
        """Return the sum of two totals."""
        cost = dict(self.cost)
        for currency, amount in other.cost.items():
            cost[currency] = cost.get(currency, 0.0) + amount
        return Waste(self.tool_calls + other.tool_calls, self.model_turns + other.model_turns,
                     self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.tool_seconds + other.tool_seconds,
                     MappingProxyType(cost) if cost else _NO_COST)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON shape (``check --format json``, ``LoopEngine.summary``)."""
        return {"tool_calls": self.tool_calls, "model_turns": self.model_turns,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "tool_seconds": round(self.tool_seconds, 6),
                "cost": {currency: round(amount, 9)
                         for currency, amount in sorted(self.cost.items())}}


_NOTHING: Final = Waste()


class _Tally:
    """A run's totals, mutable."""

    __slots__ = ("calls", "cost", "input", "nanoseconds", "output", "turns")

    def __init__(self) -> None:
        self.calls = self.turns = self.input = self.output = self.nanoseconds = 0
        self.cost: dict[str, float] = {}

    def tokens(self, turn: _Turn) -> None:
        self.input += turn.input_tokens
        self.output += turn.output_tokens
        if turn.currency is not None:
            self.cost[turn.currency] = self.cost.get(turn.currency, 0.0) + turn.amount

    def frozen(self) -> Waste:
        return Waste(self.calls, self.turns, self.input, self.output, self.nanoseconds / 1e9,
                     MappingProxyType(dict(self.cost)) if self.cost else _NO_COST)


class _Turn:
    """One model turn's usage: its tokens and what they cost."""

    __slots__ = ("amount", "currency", "input_tokens", "output_tokens")

    def __init__(self, input_tokens: int, output_tokens: int, price: ModelPrice | None) -> None:
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.currency: str | None = None
        self.amount = 0.0
        if price is not None:
            self.currency, self.amount = price.currency, price.cost(input_tokens, output_tokens)


class RunWaste:
    """The waste of one run, computed incrementally (see the module docstring)."""

    __slots__ = ("_awaited", "_changed", "_counted", "_reported", "_total", "_turns", "found",
                 "looping")

    def __init__(self) -> None:
        """Start with nothing wasted and no finding."""
        self.found = False
        """The run had its first loop finding."""
        self.looping = False
        """Every call since the run's latest loop finding was wasted (the loop goes on)."""
        self._turns: dict[int, _Turn] = {}
        """The usage of the run's latest model turns, by number."""
        self._counted = 0
        """The number of the latest turn counted (0: none)."""
        self._awaited = 0
        """A counted turn that has not arrived yet (0: none): its tokens count when it does."""
        self._total = _Tally()
        self._reported = _NOTHING
        """The totals at the last ``take``."""
        self._changed = False

    def called(self, call: ToolCall, kind: str, finding: bool, repeat: bool) -> None:
        """Take one decided tool call: whether it is a loop finding, whether it repeats.

        ``repeat``: the call got the same outcome as its previous occurrence in the same world
        version. One function, no helper: it runs for every call of a loop.
        """
        if kind == "exempt":
            return
        if finding:
            wasted = self.found
            self.found = self.looping = True
            if not wasted:
                return
        elif not (self.looping and repeat):
            self.looping = False
            return
        total = self._total
        total.calls += 1
        start, end = call.start_time_ns, call.end_time_ns
        if 0 < start <= end:
            total.nanoseconds += end - start
        self._changed = True
        index = call.turn
        if not index or index == self._counted:  # no turn known, or its turn counted already
            return
        self._counted = index
        total.turns += 1
        turn = self._turns.get(index)
        if turn is None:
            self._awaited = index
        else:
            total.tokens(turn)

    def turn(self, index: int, input_tokens: int, output_tokens: int,
             price: ModelPrice | None) -> None:
        """Take the usage of model turn ``index`` (the ``ToolCall.turn`` of its calls)."""
        turn = _Turn(input_tokens, output_tokens, price)
        if index == self._awaited:  # its wasted calls came first
            self._awaited = 0
            self._total.tokens(turn)
            self._changed = True
        elif index == self._counted:  # a new turn under a number seen before: not counted yet
            self._counted = 0
        turns = self._turns
        turns.pop(index, None)
        turns[index] = turn
        if len(turns) > _MAX_TURNS:
            del turns[next(iter(turns))]

    def total(self) -> Waste:
        """Return the run's waste so far."""
        return self._total.frozen()

    def take(self) -> Waste | None:
        """Return what was wasted since the previous ``take`` (None: nothing), for counters."""
        if not self._changed:
            return None
        self._changed = False
        now, before = self._total.frozen(), self._reported
        self._reported = now
        cost = {currency: amount - before.cost.get(currency, 0.0)
                for currency, amount in now.cost.items()}
        return Waste(now.tool_calls - before.tool_calls, now.model_turns - before.model_turns,
                     now.input_tokens - before.input_tokens,
                     now.output_tokens - before.output_tokens,
                     now.tool_seconds - before.tool_seconds,
                     MappingProxyType(cost) if cost else _NO_COST)
