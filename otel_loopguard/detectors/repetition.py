"""Detectors of repeated calls: stagnation, repeat, reread and batch."""

from __future__ import annotations

from typing import Any, ClassVar

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase, ladder, lowest, occurrence_details
from otel_loopguard.detectors._step import CountingWindow, Step
from otel_loopguard.types import Evidence

__all__ = ["BatchDetector", "RepeatDetector", "RereadDetector", "StagnationDetector"]

_MAX_BATCH = 64
"""Parallel calls of one turn the batch detector compares; larger turns are skipped."""
_MAX_TRACKED = 1024
"""Distinct keys a run-wide counter keeps (oldest dropped first)."""


class _PollState:
    __slots__ = ("last", "window")

    def __init__(self, size: int) -> None:
        self.window = CountingWindow(size)
        self.last: dict[str, tuple[str, list[tuple[int, str]]]] = {}


class StagnationDetector(DetectorBase):
    """The same call returning the same result (volatile fields stripped).

    Counts occurrences of (call, result) in the last ``window_size`` calls: warn at 3, replan at
    4, stop at 5. Poll tools count unchanged results in a row instead: warn at 5, stop at 10.
    Failed calls are left to the failure detectors; calls without a captured result to
    ``repeat``.
    """

    name: ClassVar[str] = "stagnation"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "stagnation_warn", "stagnation_replan",
                             "stagnation_stop")
        self._poll_floor = lowest(self.config, "poll_warn", "poll_stop")

    def new_state(self) -> _PollState:
        """Return the run's window and per-call poll streaks."""
        return _PollState(self.config.window_size)

    def observe(self, state: _PollState, step: Step) -> Evidence | None:
        """Count this (call, result) and report the ladder it reached."""
        if not step.has_result or step.error is not None or step.kind == "exempt":
            return None
        if step.kind == "poll":
            return self._poll(state, step)
        occ = state.window.push(step.pair, step.index, step.span_id)
        if len(occ) < self._floor:
            return None
        cfg, tool = self.config, step.tool
        action = ladder(len(occ), cfg.threshold(tool, "stagnation_warn"),
                        cfg.threshold(tool, "stagnation_replan"),
                        cfg.threshold(tool, "stagnation_stop"))
        return self.evidence("STAGNANT_RESULT", action, tool, len(occ), occurrence_details(
            occ, call=step.call_sig[:8], result=step.result_sig[:8],
            window=cfg.window_size))

    def _poll(self, state: _PollState, step: Step) -> Evidence | None:
        last = state.last.get(step.call_sig)
        if last is not None and last[0] == step.result_sig:
            streak = last[1]
            streak.append((step.index, step.span_id))
            del streak[:-self.config.poll_stop]
        else:
            streak = [(step.index, step.span_id)]
        state.last.pop(step.call_sig, None)
        state.last[step.call_sig] = (step.result_sig, streak)
        if len(state.last) > _MAX_TRACKED:
            del state.last[next(iter(state.last))]
        if len(streak) < self._poll_floor:
            return None
        cfg, tool = self.config, step.tool
        action = ladder(len(streak), cfg.threshold(tool, "poll_warn"), None,
                        cfg.threshold(tool, "poll_stop"))
        return self.evidence("POLL_STAGNANT", action, tool, len(streak), occurrence_details(
            streak, call=step.call_sig[:8], result=step.result_sig[:8], poll=True))


class RepeatDetector(DetectorBase):
    """The same call repeated when results are not captured: warn at 3, replan at 5, no stop."""

    name: ClassVar[str] = "repeat"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "repeat_warn", "repeat_replan")

    def new_state(self) -> CountingWindow:
        """Return the run's window of recent calls."""
        return CountingWindow(self.config.window_size)

    def observe(self, state: CountingWindow, step: Step) -> Evidence | None:
        """Count this call when its result is absent."""
        if step.has_result or step.error is not None or step.kind in ("exempt", "poll"):
            return None
        occ = state.push(step.call_sig, step.index, step.span_id)
        if len(occ) < self._floor:
            return None
        cfg, tool = self.config, step.tool
        action = ladder(len(occ), cfg.threshold(tool, "repeat_warn"),
                        cfg.threshold(tool, "repeat_replan"))
        return self.evidence("REPEATED_CALL", action, tool, len(occ), occurrence_details(
            occ, call=step.call_sig[:8], window=cfg.window_size))


class RereadDetector(DetectorBase):
    """Re-reading the same range of the same file with unchanged content, anywhere in the run.

    Without captured results the reads alone are compared, with the quieter repeat ladder (warn
    at ``repeat_warn``, replan at ``repeat_replan``), still anywhere in the run.
    """

    name: ClassVar[str] = "reread"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "reread_warn")
        self._floor_calls_only = lowest(self.config, "repeat_warn", "repeat_replan")

    def new_state(self) -> dict[str, tuple[int, list[tuple[int, str]]]]:
        """Return the run-wide (read, content) → (count, recent occurrences) table."""
        return {}

    def observe(self, state: dict[str, tuple[int, list[tuple[int, str]]]],
                step: Step) -> Evidence | None:
        """Count this read (with its content when captured) when the tool is a read tool."""
        if step.kind != "read" or step.error is not None:
            return None
        count, occ = state.pop(step.pair, (0, []))  # the pair is the call alone without results
        occ.append((step.index, step.span_id))
        del occ[:-10]
        state[step.pair] = (count + 1, occ)
        if len(state) > _MAX_TRACKED:
            del state[next(iter(state))]
        cfg, tool = self.config, step.tool
        if not step.has_result:
            if count + 1 < self._floor_calls_only:
                return None
            action = ladder(count + 1, cfg.threshold(tool, "repeat_warn"),
                            cfg.threshold(tool, "repeat_replan"))
            return self.evidence("REPEATED_READ", action, tool, count + 1, occurrence_details(
                occ, call=step.call_sig[:8], outcomes_compared=False))
        if count + 1 < self._floor:
            return None
        action = ladder(count + 1, cfg.threshold(tool, "reread_warn"))
        return self.evidence("REPEATED_READ", action, tool, count + 1, occurrence_details(
            occ, call=step.call_sig[:8], result=step.result_sig[:8]))


class _BatchState:
    __slots__ = ("current", "current_fired", "previous", "streak")

    def __init__(self) -> None:
        self.current: set[str] = set()
        self.previous: frozenset[str] = frozenset()
        self.streak = 0
        self.current_fired = False


class BatchDetector(DetectorBase):
    """The same set of parallel calls with unchanged results in consecutive model turns."""

    name: ClassVar[str] = "batch"

    def new_state(self) -> _BatchState:
        """Return the run's current and previous batch."""
        return _BatchState()

    def observe(self, state: _BatchState, step: Step) -> Evidence | None:
        """Add the call to its batch and compare the batch with the turns before it."""
        if step.new_batch:
            self._close(state)
        if len(state.current) >= _MAX_BATCH:
            state.current_fired = True  # a turn this large is not compared (bounded state)
            return None
        state.current.add(step.pair)
        if (state.current_fired or len(state.current) < 2 or step.kind in ("exempt", "poll")
                or frozenset(state.current) != state.previous):
            return None
        count = state.streak + 1
        action = ladder(count, self.config.threshold(step.tool, "batch_warn"))
        if action:
            state.current_fired = True
        details: dict[str, Any] = {"batch_size": len(state.current), "turns": count,
                                   "call_indices": [step.index]}
        return self.evidence("REPEATED_BATCH", action, step.tool, count, details)

    @staticmethod
    def _close(state: _BatchState) -> None:
        done = frozenset(state.current)
        if len(done) >= 2:
            state.streak = state.streak + 1 if done == state.previous else 1
        else:
            state.streak = 0
        state.previous = done
        state.current = set()
        state.current_fired = False
