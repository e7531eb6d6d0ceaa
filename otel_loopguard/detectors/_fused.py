"""The built-in detectors' work on one tool call in two Python calls (the engine's hot path).

Most calls of a healthy run are new: a new call, a new result, no failure. On such a call each
built-in detector only records it (a first occurrence, a result not seen before, one more call
counted) and finds nothing. Called one by one, the seven that look at it cost seven Python
calls plus the helpers each one calls (about 650 instructions a call in CPython 3.11, a third
of their work on such a call). :class:`BuiltinDetectors` does that recording inline, in the
detectors' order, and hands a step to a detector's own ``observe`` whenever it may reach one of
that detector's thresholds or its state is due for upkeep: each inline path is the detector's
own for that case, on the same state, so evidence and state are what the detectors called one
by one give (``tests/test_fused.py`` compares the two).

It reads the detectors' states, and the thresholds below which they return at once, directly:
it belongs to these detectors, and a change to one of them changes its part here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otel_loopguard.detectors._step import Step
from otel_loopguard.detectors.budget import BudgetDetector
from otel_loopguard.detectors.cycle import CycleDetector
from otel_loopguard.detectors.failure import FailureDetector, MutatingFailureDetector
from otel_loopguard.detectors.near_duplicate import NearDuplicateDetector
from otel_loopguard.detectors.repetition import (
    _MAX_TRACKED,
    THINK_TOOLS,
    UNSAID,
    BatchDetector,
    RepeatDetector,
    RereadDetector,
    StagnationDetector,
    think_key,
    unsaid_thought,
)
from otel_loopguard.kinds._tools import is_browser_action
from otel_loopguard.types import Detector, Evidence

__all__ = ["BUILT_IN_ORDER", "BuiltinDetectors"]

BUILT_IN_ORDER = (StagnationDetector, RepeatDetector, CycleDetector, FailureDetector,
                  MutatingFailureDetector, RereadDetector, BatchDetector, NearDuplicateDetector,
                  BudgetDetector)
"""The built-in tool-call detectors in the order ``make_default_detectors`` gives them."""


class BuiltinDetectors:
    """The built-in detectors at the head of an engine's list, observed together.

    Holds them and, per detector, where it and its state are in the engine's list and the
    run's states (None when it is not in the list), and the thresholds below which its inline
    path applies. Stateless itself:
    thread-safe as the detectors are (the run's lock guards their states).
    """

    __slots__ = ("batch", "budget", "budget_inline", "count", "cycle", "detectors", "failure",
                 "mutating_failure", "near_duplicate", "repeat", "reread", "reread_inline",
                 "shell_tools", "stagnation", "stagnation_stall", "stagnation_unchanged")

    def __init__(self, detectors: Sequence[Detector]) -> None:
        """Take the detectors that ``prefix_length(detectors)`` counts at the list's head."""
        self.count = prefix_length(detectors)
        self.detectors = tuple(detectors[:self.count])
        found = {type(detector): index for index, detector in enumerate(self.detectors)}
        self.stagnation = found.get(StagnationDetector)
        self.repeat = found.get(RepeatDetector)
        self.cycle = found.get(CycleDetector)
        self.failure = found.get(FailureDetector)
        self.mutating_failure = found.get(MutatingFailureDetector)
        self.reread = found.get(RereadDetector)
        self.batch = found.get(BatchDetector)
        self.near_duplicate = found.get(NearDuplicateDetector)
        self.budget = found.get(BudgetDetector)
        by_class: dict[type, Any] = {type(detector): detector for detector in self.detectors}
        stagnation = by_class.get(StagnationDetector)
        self.stagnation_unchanged = 0 if stagnation is None or stagnation._floor < 2 \
            else stagnation._no_effect_floor
        """A first (call, result) in the window finds nothing when its ``unchanged`` is below
        this (0: never inline, a first occurrence may reach a threshold of 1)."""
        self.stagnation_stall: Any = None if stagnation is None else stagnation.stall
        """The stagnation detector's ``stall``: a read that returns the previous read's result."""
        reread = by_class.get(RereadDetector)
        self.reread_inline = reread is not None and reread._floor > 1
        """A first (read, content) finds nothing (a threshold of 1 may fire on it)."""
        budget = by_class.get(BudgetDetector)
        self.budget_inline = budget is not None and not budget._per_tool
        """The budgets' state is only counted on a quiet call: no run counts calls by tool."""
        near_duplicate = by_class.get(NearDuplicateDetector)
        self.shell_tools: frozenset[str] = near_duplicate._shell_tools \
            if near_duplicate is not None else frozenset()

    def observe(  # noqa: C901, PLR0912, PLR0915 - one frame for all: what this class is for
            self, states: tuple[Any, ...], step: Step, failed: bool,
            evidence: list[Evidence]) -> None:
        """Observe ``step`` with each detector, in order; append what they find to ``evidence``.

        ``failed``: a call of the run has failed (before it, the failure detectors, which are
        ``quiet_until_failure``, are not called). Each detector's inline path comes first,
        under the conditions in which its own ``observe`` would only record the step.
        """
        kind, index, pair, result = step.kind, step.index, step.pair, step.result_sig
        has_result, key, new_batch = step.has_result, step.sequence, step.new_batch
        if self.stagnation is not None and has_result and step.error is None \
                and kind != "exempt" and (kind != "mutating" or is_browser_action(step.tool)):
            # (a successful change is not stagnation's: StagnationDetector.observe)
            # a (call, result) new to the window, no NO_EFFECT
            position = self.stagnation
            state = states[position]
            window = state.window
            if (kind != "poll" and index < window._expiry and pair not in window._members
                    and pair not in window._previous
                    and step.unchanged < self.stagnation_unchanged):
                window._members[pair] = [(index, step.span_id)]
                if kind == "read" and not step.empty:  # a result unlike the previous one
                    if result != state.stall[0]:
                        state.stall = (result, step.call_sig, False, 1, ((index, step.span_id),))
                    else:
                        found = self.stagnation_stall(state, step)
                        if found is not None:
                            evidence.append(found)
                elif step.tool in THINK_TOOLS:  # a thought: StagnationDetector.observe
                    found = self.stagnation_stall(state, step,
                                                  think_key(result, step.version))
                    if found is not None:
                        evidence.append(found)
            else:
                found = self.detectors[position].observe(states[position], step)
                if found is not None:
                    evidence.append(found)
        elif self.stagnation is not None and not has_result and unsaid_thought(step):
            found = self.stagnation_stall(states[self.stagnation], step,
                                          think_key(UNSAID, step.version))
            if found is not None:
                evidence.append(found)
        if self.repeat is not None:  # a captured result of a call that changes nothing
            position = self.repeat
            state = states[position]
            if has_result and kind != "mutating":
                seen = state.seen
                if result not in seen:  # a new result: the count restarts
                    state.since = index
                    seen[result] = None
                    if len(seen) > _MAX_TRACKED:
                        del seen[next(iter(seen))]
                state.last = ""
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)
        if self.cycle is not None:  # the first call of a turn, new to the window
            position = self.cycle
            state = states[position]
            if new_batch and key and key not in state.matcher._counts:
                state.batch = [(key, index, step.span_id, step.tool)]
                state.matcher.push_new(key, state.batch)  # nothing repeats
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)
        if failed:
            self._failures(states, step, evidence)
        if self.reread is not None and kind == "read":  # a (read, content) new to the run
            position = self.reread
            state = states[position]
            if (has_result and step.error is None and pair not in state
                    and self.reread_inline):
                state[pair] = (1, [(index, step.span_id)])
                if len(state) > _MAX_TRACKED:
                    del state[next(iter(state))]
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)
        if self.batch is not None:  # a turn's first call after a turn of one call
            position = self.batch
            state = states[position]
            if new_batch and key and len(state.current) < 2:
                state.closed += 1
                state.current, state.current_fired = {key}, False
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)
        if self.near_duplicate is not None:  # a result none of the recent calls returned
            position = self.near_duplicate
            state = states[position]
            arguments = step.arguments
            if arguments is not None and (kind == "mutating"
                                          or step.tool.lower() in self.shell_tools):
                arguments = None  # no arguments kept: never in a group
            if arguments is None or not (step.empty or result in state.results):
                state.entries.append([step, None, arguments])  # featured later, if ever
                state.results.append(result)
                step.arguments = None
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)
        if self.budget is not None:  # below every budget, none by tool
            position = self.budget
            state = states[position]
            calls = state.calls + 1
            if calls < state.quiet_below and state.started_ns and self.budget_inline:
                state.calls = calls
            else:
                found = self.detectors[position].observe(state, step)
                if found is not None:
                    evidence.append(found)

    def _failures(self, states: tuple[Any, ...], step: Step, evidence: list[Evidence]) -> None:
        """Observe a step of a run that has a failure with the failure detectors."""
        if self.failure is not None:
            position = self.failure
            found = self.detectors[position].observe(states[position], step)
            if found is not None:
                evidence.append(found)
        if self.mutating_failure is not None and step.kind == "mutating":
            position = self.mutating_failure
            found = self.detectors[position].observe(states[position], step)
            if found is not None:
                evidence.append(found)


def prefix_length(detectors: Sequence[Detector]) -> int:
    """Return how many detectors at the head of ``detectors`` ``BuiltinDetectors`` can take.

    Those of the built-in classes themselves (a subclass may observe otherwise), each once and
    in ``BUILT_IN_ORDER``, so that evidence comes in the list's order.
    """
    position = 0
    for count, detector in enumerate(detectors):
        cls = type(detector)
        if cls not in BUILT_IN_ORDER[position:]:
            return count
        position = BUILT_IN_ORDER.index(cls) + 1
    return len(detectors)
