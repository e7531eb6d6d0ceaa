"""Detector of repeating sequences of tool calls (agent handoffs: ``handoff.py``).

It uses :class:`PeriodMatcher`, which keeps, for every period ``p`` up to the maximum, the
length of the current suffix where ``step[i] == step[i - p]``. Each new step updates those
counters in O(max period), so the cost per call is constant in the run length and linear (not
quadratic) in the longest cycle looked for. For tool calls it also chains repetitions of a
block that come back with a few other steps between them (``A B C x A B C y A B C``).
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar, Final

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase, ladder, lowest
from otel_loopguard.detectors._step import Step, sequence_key
from otel_loopguard.types import Action, Evidence

__all__ = ["CycleDetector", "PeriodMatcher"]

_NO_MATCH: Final[dict[int, int]] = {}
"""The counters of a step seen nowhere in the window (shared; never modified)."""
_MAX_BATCH = 32
"""Calls of one model turn merged into one cycle step; a larger turn starts a new step."""
_NO_BLOCK: Final = (1, 0, 0)
"""(occurrences, period, matched steps) of a step that repeats no earlier block."""


class PeriodMatcher:
    """Incremental detector of the smallest period of the latest steps.

    Not thread-safe: used under the run's lock. Memory is O(max_period).
    """

    __slots__ = ("_chains", "_counts", "_history", "_keys", "_match", "_previous",
                 "_previous_block", "block", "cycle_max", "max_period")

    def __init__(self, max_period: int, cycle_max: int | None = None) -> None:
        """Track periods 1..``max_period``.

        With ``cycle_max``, ``period`` reports back-to-back cycles up to that length only, and
        the longer periods serve ``block``: a block of steps repeated with other steps between.
        """
        self.max_period = max_period
        self.cycle_max = cycle_max
        self._chains: deque[int] = deque(maxlen=max_period)
        """Per kept step (with ``cycle_max``): how many times the block ending there occurred."""
        self.block = self._previous_block = _NO_BLOCK
        """The latest step's block, with ``cycle_max``: (occurrences, period, matched steps).

        The latest ``matched`` (>= 2) steps equal the ``matched`` steps ``period`` steps
        earlier, and that block has now occurred ``occurrences`` times, each occurrence matching
        the one before it in the same way (other steps may stand between them). ``(1, 0, 0)``
        when the latest step ends no repeated block."""
        self._history: deque[Any] = deque(maxlen=max_period)
        """The payload of each kept step, oldest first."""
        self._keys: deque[str] = deque(maxlen=max_period)
        """The keys of the kept steps, searched by C-speed ``index``."""
        self._counts: dict[str, int] = {}
        """Key → its occurrences among the kept steps: a key new to them (most steps of a run
        that does not loop) is told in one lookup, not by comparing it with every kept key."""
        self._match: dict[int, int] = _NO_MATCH
        """Period → length of the current suffix where ``step[i] == step[i - period]``; only
        the periods whose count is not zero (usually none or one)."""
        self._previous = self._match

    def push(self, key: str, payload: Any = None) -> bool:
        """Append a step identified by ``key`` (``payload`` travels with it for evidence).

        Only the periods at which ``key`` occurred before can continue their suffix; every
        other count restarts at zero. ``index`` finds those occurrences in C, so a step costs
        O(occurrences) in Python whatever ``max_period`` is.

        Returns:
            Whether ``key`` occurred among the kept steps: when not, no period and no block
            ends at it (``period`` gives (0, 0), ``block`` is ``(1, 0, 0)``).
        """
        counts = self._counts
        found = counts.get(key, 0)
        if not found:
            self.push_new(key, payload)
            return False
        history, keys = self._history, self._keys
        old = self._previous = self._match
        self._previous_block = self.block
        size = len(keys)
        block = _NO_BLOCK
        match: dict[int, int] = {}
        start = 0
        chains = self._chains if self.cycle_max is not None else None
        for _ in range(found):
            start = keys.index(key, start) + 1
            period = size - start + 1
            matched = match[period] = old.get(period, 0) + 1
            if chains is not None and matched >= 2 and period >= 2 and \
                    chains[start - 1] >= block[0]:
                block = (chains[start - 1] + 1, period, matched)
        self._match = match
        self.block = block
        oldest = keys[0] if size == self.max_period else None
        history.append(payload)  # the deques drop their oldest step when full
        keys.append(key)
        self._chains.append(block[0])
        counts[key] = found + 1
        if oldest is not None:
            self._forget(oldest)
        return True

    def push_new(self, key: str, payload: Any = None) -> None:
        """``push`` a step whose ``key`` is not among the kept steps.

        Most steps of a run that does not loop: nothing is searched, no period and no block
        ends at it.
        """
        self._previous, self._previous_block = self._match, self.block
        self._match, self.block = _NO_MATCH, _NO_BLOCK
        keys, counts = self._keys, self._counts
        if len(keys) == self.max_period:  # the deques drop their oldest step
            oldest = keys[0]
            left = counts[oldest] - 1
            if left:
                counts[oldest] = left
            else:
                del counts[oldest]
        self._history.append(payload)
        keys.append(key)
        self._chains.append(1)
        counts[key] = 1

    def _forget(self, key: str) -> None:
        """Count one occurrence of ``key`` less among the kept steps (it leaves them)."""
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]

    def replace_last(self, key: str, payload: Any = None) -> bool:
        """Replace the latest step (a batch that grew by one call); return what ``push`` does."""
        if self._history:
            self._history.pop()
            self._forget(self._keys.pop())
            self._chains.pop()
            self._match = self._previous
            self.block = self._previous_block
        return self.push(key, payload)

    def reset(self) -> None:
        """Forget everything (a broken chain)."""
        self._history.clear()
        self._keys.clear()
        self._counts.clear()
        self._chains.clear()
        self._match = _NO_MATCH
        self._previous = self._match
        self.block = self._previous_block = _NO_BLOCK
        """The latest step's block, with ``cycle_max``: (occurrences, period, matched steps).

        The latest ``matched`` (>= 2) steps equal the ``matched`` steps ``period`` steps
        earlier, and that block has now occurred ``occurrences`` times, each occurrence matching
        the one before it in the same way (other steps may stand between them). ``(1, 0, 0)``
        when the latest step ends no repeated block."""

    def copy(self) -> PeriodMatcher:
        """Return an independent copy (pushing on it leaves this matcher as it is)."""
        other = PeriodMatcher(self.max_period, self.cycle_max)
        other._history = self._history.copy()
        other._keys = self._keys.copy()
        other._counts = self._counts.copy()
        other._chains = self._chains.copy()
        other._match, other._previous = self._match, self._previous  # replaced, never changed
        other.block, other._previous_block = self.block, self._previous_block
        return other

    def period(self, min_period: int = 2) -> tuple[int, int]:
        """Return (period, matched steps) of the smallest repeating period, or (0, 0).

        A period below ``min_period`` (e.g. the same step again and again) returns (0, 0): that
        is another detector's business.
        """
        best, limit = 0, self.cycle_max or self.max_period
        for period, matched in self._match.items():
            if matched >= period and period <= limit and (not best or period < best):
                best = period
        if not best or best < min_period:
            return 0, 0
        return best, self._match[best]

    def previous_occurrences(self) -> int:
        """Return the occurrences (see ``block``) of the block ending at the step before."""
        return self._chains[-2] if len(self._chains) > 1 else 1

    def last_payloads(self, count: int) -> list[Any]:
        """Return the payloads of the latest ``count`` steps, oldest first."""
        return list(self._history)[-count:]


class _CycleState:
    __slots__ = ("batch", "matcher")

    def __init__(self, max_period: int, cycle_max: int | None) -> None:
        self.matcher = PeriodMatcher(max_period, cycle_max)
        self.batch: list[tuple[str, int, str, str]] = []
        """The current turn's calls, the payload of the matcher's latest step: it grows in
        place (and that step is replaced) until the next turn starts a new list, so an earlier
        step's payload never changes. A fork copies it before it grows."""


class CycleDetector(DetectorBase):
    """A sequence of 2 to ``cycle_max_length`` (call, result) steps repeating back to back.

    The parallel calls of one batch form a single step: warn at 2 repetitions, stop at 3,
    reported when a repetition completes. A call whose result was not captured matches no
    other step (``sequence_key``), so a sequence of such calls is never a cycle.

    A block of steps (mutating calls included) that comes back identically, outcomes included,
    with up to ``cycle_max_gap`` other steps between its repetitions warns (``REPEATED_BLOCK``)
    at ``cycle_gap_warn`` (3) occurrences, on the second step of that occurrence. Steps are
    compared by ``sequence_key``: reads and plain calls within the run's world version.
    """

    name: ClassVar[str] = "cycle"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``."""
        super().__init__(config)
        self._gap_floor = lowest(self.config, "cycle_gap_warn")

    def new_state(self) -> _CycleState:
        """Return the run's period matcher."""
        cfg = self.config
        return _CycleState(cfg.cycle_max_length + cfg.cycle_max_gap, cfg.cycle_max_length)

    def fork(self, state: _CycleState, step: Step) -> _CycleState:
        """Return a copy of the matcher and the current batch."""
        other = _CycleState(1, None)
        other.matcher = state.matcher.copy()
        other.batch = state.batch.copy()
        return other

    def observe(self, state: _CycleState, step: Step) -> Evidence | None:
        """Add the call (to its batch's step) and report a completed repetition."""
        key = step.sequence or sequence_key(step)
        member = (key, step.index, step.span_id, step.tool)
        if step.new_batch or not state.batch or len(state.batch) >= _MAX_BATCH:
            state.batch = [member]
            seen = state.matcher.push(key, state.batch)
        else:
            state.batch.append(member)
            key = "|".join(sorted(m[0] for m in state.batch))
            seen = state.matcher.replace_last(key, state.batch)
        if not seen:  # a step new to the window repeats nothing
            return None
        period, matched = state.matcher.period(1)
        if step.kind in ("exempt", "poll") or period == 1:  # the same step again: stagnation's
            return None
        if not period:
            return None if state.matcher.block[0] < self._gap_floor else \
                self._block(state, step)
        if matched % period:
            return None
        reps = matched // period + 1
        cfg = self.config
        action = ladder(reps, cfg.threshold(step.tool, "cycle_warn"), None,
                        cfg.threshold(step.tool, "cycle_stop"))
        return self.evidence("CYCLE_DETECTED", action, step.tool, reps,
                             self._details(state, period, reps, True))

    def _block(self, state: _CycleState, step: Step) -> Evidence | None:
        """Report a block that came back, other steps between, as it starts again."""
        count, period, matched = state.matcher.block
        if count <= state.matcher.previous_occurrences() or not step.has_result:
            return None
        warn = self.config.threshold(step.tool, "cycle_gap_warn")
        if warn is None or count < warn:
            return None
        details = self._details(state, matched, count, True)
        details["gap"] = period - matched
        return self.evidence("REPEATED_BLOCK", Action.WARN, step.tool, count, details)

    @staticmethod
    def _details(state: _CycleState, period: int, reps: int, outcomes: bool) -> dict[str, Any]:
        steps = state.matcher.last_payloads(period)
        members = [m for batch in steps for m in batch]
        return {"cycle_length": period, "repetitions": reps, "outcomes_compared": outcomes,
                "cycle_tools": [m[3] for m in members],
                "call_indices": [m[1] for m in members],
                "repeats_span_ids": [m[2] for m in members if m[2]]}
