"""Detector of repeating sequences of tool calls (agent handoffs: ``handoff.py``).

It uses :class:`PeriodMatcher`, which keeps, for every period ``p`` up to the maximum, the
length of the current suffix where ``step[i] == step[i - p]``. Each new step updates those
counters in O(max period), so the cost per call is constant in the run length and linear (not
quadratic) in the longest cycle looked for.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from otel_loopguard.detectors._base import DetectorBase, ladder
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Evidence

__all__ = ["CycleDetector", "PeriodMatcher"]

_NO_MATCH: Final[dict[int, int]] = {}
"""The counters of a step seen nowhere in the window (shared; never modified)."""
_MAX_BATCH = 32
"""Calls of one model turn merged into one cycle step; a larger turn starts a new step."""


class PeriodMatcher:
    """Incremental detector of the smallest period of the latest steps.

    Not thread-safe: used under the run's lock. Memory is O(max_period).
    """

    __slots__ = ("_history", "_keys", "_match", "_previous", "max_period")

    def __init__(self, max_period: int) -> None:
        """Track periods 1..``max_period``."""
        self.max_period = max_period
        self._history: list[tuple[str, Any]] = []  # bounded by hand: lists are small
        self._keys: list[str] = []
        """The keys of ``_history``, searched by C-speed ``count`` and ``index``."""
        self._match: dict[int, int] = _NO_MATCH
        """Period → length of the current suffix where ``step[i] == step[i - period]``; only
        the periods whose count is not zero (usually none or one)."""
        self._previous = self._match

    def push(self, key: str, payload: Any = None) -> None:
        """Append a step identified by ``key`` (``payload`` travels with it for evidence).

        Only the periods at which ``key`` occurred before can continue their suffix; every
        other count restarts at zero. ``count`` and ``index`` find those occurrences in C, so a
        step costs O(occurrences) in Python whatever ``max_period`` is.
        """
        history, keys = self._history, self._keys
        old = self._previous = self._match
        size = len(keys)
        found = keys.count(key)
        if found:
            match: dict[int, int] = {}
            start = 0
            for _ in range(found):
                start = keys.index(key, start) + 1
                period = size - start + 1
                match[period] = old.get(period, 0) + 1
            self._match = match
        else:
            self._match = _NO_MATCH
        history.append((key, payload))
        keys.append(key)
        if size >= self.max_period:
            del history[0]
            del keys[0]

    def replace_last(self, key: str, payload: Any = None) -> None:
        """Replace the latest step (a batch that grew by one call)."""
        if self._history:
            self._history.pop()
            self._keys.pop()
            self._match = self._previous
        self.push(key, payload)

    def reset(self) -> None:
        """Forget everything (a broken chain)."""
        self._history.clear()
        self._keys.clear()
        self._match = _NO_MATCH
        self._previous = self._match

    def period(self, min_period: int = 2) -> tuple[int, int]:
        """Return (period, matched steps) of the smallest repeating period, or (0, 0).

        A period below ``min_period`` (e.g. the same step again and again) returns (0, 0): that
        is another detector's business.
        """
        best = 0
        for period, matched in self._match.items():
            if matched >= period and (not best or period < best):
                best = period
        if not best or best < min_period:
            return 0, 0
        return best, self._match[best]

    def last_payloads(self, count: int) -> list[Any]:
        """Return the payloads of the latest ``count`` steps, oldest first."""
        return [payload for _, payload in self._history[-count:]]


class _CycleState:
    __slots__ = ("batch", "matcher")

    def __init__(self, max_period: int) -> None:
        self.matcher = PeriodMatcher(max_period)
        self.batch: list[tuple[str, int, str, str]] = []


class CycleDetector(DetectorBase):
    """A sequence of 2 to ``cycle_max_length`` (call, result) steps repeating back to back.

    The parallel calls of one batch form a single step. With results captured: warn at 2
    repetitions, stop at 3, reported when a repetition completes. Without results the calls
    alone are compared, with the quieter repeat ladder (warn at 3, replan at 5, no stop).
    """

    name: ClassVar[str] = "cycle"

    def new_state(self) -> _CycleState:
        """Return the run's period matcher."""
        return _CycleState(self.config.cycle_max_length)

    def observe(self, state: _CycleState, step: Step) -> Evidence | None:
        """Add the call (to its batch's step) and report a completed repetition."""
        member = (step.pair, step.index, step.span_id, step.tool)
        if step.new_batch or not state.batch or len(state.batch) >= _MAX_BATCH:
            state.batch = [member]
            state.matcher.push(step.pair, tuple(state.batch))
        else:
            state.batch.append(member)
            key = "|".join(sorted(m[0] for m in state.batch))
            state.matcher.replace_last(key, tuple(state.batch))
        period, matched = state.matcher.period()
        if not period or matched % period or step.kind in ("exempt", "poll"):
            return None
        reps = matched // period + 1
        cfg = self.config
        if step.has_result:
            action = ladder(reps, cfg.threshold(step.tool, "cycle_warn"), None,
                            cfg.threshold(step.tool, "cycle_stop"))
        else:
            action = ladder(reps, cfg.threshold(step.tool, "repeat_warn"),
                            cfg.threshold(step.tool, "repeat_replan"))
        return self.evidence("CYCLE_DETECTED", action, step.tool, reps,
                             self._details(state, period, reps, step.has_result))

    @staticmethod
    def _details(state: _CycleState, period: int, reps: int, outcomes: bool) -> dict[str, Any]:
        steps = state.matcher.last_payloads(period)
        members = [m for batch in steps for m in batch]
        return {"cycle_length": period, "repetitions": reps, "outcomes_compared": outcomes,
                "cycle_tools": [m[3] for m in members],
                "call_indices": [m[1] for m in members],
                "repeats_span_ids": [m[2] for m in members if m[2]]}
