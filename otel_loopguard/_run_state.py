"""A run's state in the engine: its counters, outcomes, world version and calls in flight.

``LoopEngine`` keeps no runs itself: callers hold one :class:`RunState` per run and serialise
the engine's calls on it (``RunState.lock``). The functions here are the changes of a run's
state that more than one of the engine's entry points make.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any, Final

from otel_loopguard.detectors._step import Step
from otel_loopguard.detectors.failure import DECLINED, classify_error, refusal_with_words
from otel_loopguard.exceptions import LoopGuardError
from otel_loopguard.signature import ResultInfo
from otel_loopguard.signature._volatile import mask_volatile_text
from otel_loopguard.types import Action, Decision, ToolCall
from otel_loopguard.waste import RunWaste

__all__ = ["RESET_SLOTS", "InFlight", "Outcome", "RunState", "changed", "check_reentry",
           "heard", "record_failure", "record_outcome", "record_unchanged",
           "restart_unchanged"]

_MAX_MUTATIONS: Final = 1024
"""Distinct successful mutations a run remembers to tell a new state change from a re-applied
one (the oldest forgotten first)."""
_NO_MUTATIONS: Final[frozenset[str]] = frozenset()
_QUOTED_RE: Final = re.compile(r"`[^`]*(?:`|$)")
"""What an error quotes between backticks (to the end of a text cut in the quote): the call's
own input echoed back (the editors' ``Multiple occurrences of old_str `...` ``), which says
nothing of how it failed, and ``classify_error`` reads none of it."""
_MASK_RE: Final = re.compile(
    r"(?=[\da-fA-F])(?:\b[0-9a-fA-F]{12,}\b|\d{5,}|\d{4}-\d{2}-\d{2}[Tt ][\d:.]+\S*)")
"""Ids (12 or more hex digits), long numbers and date-times in an error. Cases are spelled out
and a first test fails fast where none can start, as in ``_VOLATILE_ASCII_RE``: under
``re.IGNORECASE`` every position tried all three alternatives, folding case per character, and
masking took a third of ``_failure_of``'s time (``benchmarks/bench_failure.py``). No character
outside ASCII folds to one of these, so the matches are those of the case-insensitive pattern."""


_MAX_IN_FLIGHT: Final = 1024
"""Guarded calls a run counts as running at once; past it the oldest is forgotten."""


class InFlight:
    """The guarded calls of one run that have started and not yet been processed.

    Enforce mode lets a call run only after ``precheck``; while it runs it is not in the run's
    detector states yet, so the guard registers it here (``LoopEngine.call_started``) and
    ``precheck`` counts it: 32 parallel calls then meet the budgets and the repetition ladders
    as 32 calls. Each call is kept as the step ``precheck`` predicted for it, under a key: the
    span id of its tool span, or of the span the guard saw, which parallel calls may share;
    ``process`` of a call with that span id, or ``LoopEngine.call_finished``, takes one call of
    the key out. Guarded by the run's lock, like the rest of ``RunState``.
    """

    __slots__ = ("by_key", "calls")

    def __init__(self) -> None:
        """Start with no call running."""
        self.calls = 0
        """Calls running now."""
        self.by_key: dict[str, list[Step]] = {}
        """Key → the predicted step of each call running under it."""

    def steps(self) -> Iterator[Step]:
        """Yield the predicted step of every running call, the earliest key first."""
        for steps in self.by_key.values():
            yield from steps

    def add(self, key: str, step: Step) -> None:
        """Count one more call running under ``key`` (past the bound, the oldest is dropped)."""
        if self.calls >= _MAX_IN_FLIGHT:
            self.remove(next(iter(self.by_key)))
        self.by_key.setdefault(key, []).append(step)
        self.calls += 1

    def remove(self, key: str) -> None:
        """Stop counting one call running under ``key`` (nothing when there is none)."""
        steps = self.by_key.get(key)
        if not steps:
            return
        steps.pop()
        if not steps:
            del self.by_key[key]
        self.calls -= 1


Outcome = tuple[str, str | None, str, bool, int, int]
"""The streak of identical outcomes of one call signature (successes or failures), as a plain
tuple (built in C: a class instance per new call cost about 3,700 instructions):
``(result, error, kind, empty, unchanged, version)``. What ``precheck`` needs to repeat the
outcome: its result and error, the call's kind, whether the result was empty; in how many world
versions in a row the call got it (``Step.unchanged``), and the latest of them."""


class RunState:
    """Everything the engine remembers about one run. Bounded; guarded by ``lock``."""

    __slots__ = ("answered", "argued", "calls", "explicit_handoffs", "failed", "handoff_state",
                 "handoffs", "highest", "hinted", "idle_state", "in_flight", "last_agent",
                 "last_end_ns", "last_turn", "lock", "mutation_failed", "mutations", "notifying",
                 "outcomes", "results", "states", "stopped", "template", "version", "waste",
                 "world")

    def __init__(self, states: tuple[Any, ...], handoff_state: Any,
                 idle_state: Any = None) -> None:
        """Hold fresh detector states."""
        self.lock = threading.Lock()
        self.states = states
        self.handoff_state = handoff_state
        self.idle_state = idle_state
        self.handoffs = 0
        """Explicit handoffs observed (a handoff is an action: it ends a streak of idle turns)."""
        self.template: str | None = None
        """The run's prompt template, once a caller has told ``LoopEngine.set_template``."""
        self.calls = 0
        self.highest = Action.CONTINUE
        self.stopped: Decision | None = None
        self.last_end_ns = -1
        self.last_turn: int | None = None
        self.last_agent: str | None = None
        self.explicit_handoffs = False
        self.outcomes: dict[str, Outcome] = {}
        """Call signature → its latest outcome, for ``precheck`` and ``NO_EFFECT`` (bounded)."""
        self.version = 0
        """The world version: distinct successful state changes seen (see ``make_step``)."""
        self.world = ""
        """``in_world``'s suffix for ``version`` (``@3``; ``""`` for 0), made once per change."""
        self.mutations: dict[str, None] | frozenset[str] = _NO_MUTATIONS
        """The (call, result) keys of the successful mutations behind ``version`` (bounded;
        a shared empty set until the first one)."""
        self.results: dict[tuple[int, int], ResultInfo] = {}
        """(length, hash) of the run's latest result texts → their analysis (bounded)."""
        self.hinted = False
        """Enforce mode, ``hint_then_abort``: a hint was already given in this run."""
        self.notifying = 0
        """The id of the thread running ``on_decision`` for this run (0: none)."""
        self.in_flight = InFlight()
        """Guarded calls that started and have not been processed yet (enforce mode)."""
        self.waste = RunWaste()
        """The tool calls the run wasted continuing its loops (``otel_loopguard.waste``)."""
        self.mutation_failed = False
        """A mutating call of the run has failed: its successes may end a failure streak, so
        their targets are worth finding (``ToolKinds.target``, ``kinds._tools``)."""
        self.argued: set[str] = set()
        """Tools the run called with arguments: an empty arguments object of one of them,
        with no result, lost what it had (``LoopEngine._step``). At most 256."""
        self.answered = False
        """The run's latest model turn asked for no tool (by its finish reasons or output
        messages) and its words were not captured: the next turn follows new input that only
        its own content can name (``Turns.process_model_turn``)."""
        self.failed = False
        """A call of the run has failed: until then the detectors that are
        ``quiet_until_failure`` are not called (``LoopEngine._unfailed``)."""

    def in_callback(self) -> bool:
        """Return True on the thread that is running ``on_decision`` for this run.

        Whoever holds the run's ``lock`` to call the engine checks this first: the callback runs
        under that lock, so taking it again on that thread would deadlock.
        """
        return self.notifying == threading.get_ident()


RESET_SLOTS: Final = tuple(n for n in RunState.__slots__
                           if n not in ("lock", "notifying", "template"))
"""What ``LoopEngine.reset`` replaces: everything but the lock, the callback marker and the
run's template (which says what the run is, not what it has seen)."""


def record_outcome(run: RunState, call_sig: str, outcome: tuple[str, str | None, str, bool],
                   version: int) -> tuple[int, bool]:
    """Record a call's outcome (result, error, kind, empty) in the run's ``outcomes``.

    Return the step's ``unchanged`` (the calls of the same outcome counted across world
    versions) and whether it repeats the call's previous outcome in the same world version
    (for the run's waste). The outcomes serve ``precheck``, ``NO_EFFECT`` and the waste.
    """
    outcomes, repeat, unchanged = run.outcomes, False, 1
    latest = outcomes.pop(call_sig, None)
    if latest is not None and latest[0] == outcome[0] and latest[1] == outcome[1]:
        unchanged = latest[4]
        if latest[5] != version:
            unchanged += 1
            latest = (*latest[:4], unchanged, version)
        else:
            repeat = True
    else:
        latest = (*outcome, 1, version)
    outcomes[call_sig] = latest
    if len(outcomes) > 1024:
        del outcomes[next(iter(outcomes))]
    return unchanged, repeat


def restart_unchanged(run: RunState, call_sig: str) -> int:
    """Restart the count of world versions the call's latest outcome survived; return it (1).

    For an outcome that does not read as a failure (``reads_as_failure``): the same passing
    output after each change is no change without effect, so it never reaches ``NO_EFFECT``,
    and ``precheck``, which predicts from the stored count, never predicts one for it either.
    """
    latest = run.outcomes[call_sig]
    run.outcomes[call_sig] = (*latest[:4], 1, latest[5])
    return 1


_USER: Final = "\x00user"
"""``mutations``' mark of a run that heard its user (its first message is its task)."""


def changed(run: RunState, mutation: str) -> int:
    """Record a new successful state change and return the run's next world version.

    A successful mutating call that differs from the run's earlier ones (other arguments,
    or another result) changes the agent's world: the calls after it are new observations,
    and every repetition detector counts their repeats within the new version (their keys
    carry it, see ``in_world``). Re-applying a remembered mutation with the same result is
    no change.
    """
    mutations = run.mutations
    if not isinstance(mutations, dict):
        mutations = run.mutations = {}
    mutations[mutation] = None
    if len(mutations) > _MAX_MUTATIONS:
        del mutations[next(iter(mutations))]
    return _next_world(run)


def _next_world(run: RunState) -> int:
    """Advance the run's world version (and ``in_world``'s suffix for it); return it."""
    run.version += 1
    run.world = "@" + str(run.version)
    return run.version


def unseen_input(run: RunState) -> None:
    """New input reached the model and was not captured: a change of the agent's world.

    A model turn after an answer (a turn that asked for no tool) whose words were not captured,
    its own input not captured either (``Turns``, ``RunState.answered``): an agent loop ends
    at an answer, so only new input, the user's reply or the harness's feedback, called the
    model again, and what it said is unknown. Absent is not the same: the calls after it are
    new observations, as after a user's new message (``heard`` of a ``reply``). Nothing is
    remembered of it: an unknown input equals no other, so there is nothing to recognise again
    (and nothing to grow ``mutations`` by, turn after turn of a conversation).
    """
    mutations = run.mutations
    if _USER not in mutations:  # a captured message after it is no longer the task
        if not isinstance(mutations, dict):
            mutations = run.mutations = {}
        mutations[_USER] = None
    _next_world(run)


def heard(run: RunState, message: str, *, reply: bool = False) -> None:
    """A new message from the user changes the agent's world, as a new change does.

    An agent that looks something up again because its user asked again (``recheck it
    now``) is answering its user, not stuck: the repetition detectors count the calls
    after a new user message as new observations. The same message again changes nothing,
    nor does the run's first (its task: an instrumentation may report it after the first
    tool call, when the model span encloses the tools), unless it is a ``reply``: the user's
    answer to a tool that asked them, which comes after the task whether the task was seen.
    """
    key = "\x00user:" + message
    if not isinstance(run.mutations, dict):
        run.mutations = {}
    if key in run.mutations:
        return
    if _USER not in run.mutations:  # the run's first message is its task: no change
        run.mutations[_USER] = None
        if not reply:
            run.mutations[key] = None
            return
    changed(run, key)


def record_failure(run: RunState, call: ToolCall, info: ResultInfo) -> tuple[str, str, str]:
    """Return a failed call's error text (numbers and dates masked), class and reason.

    Marks ``run`` as having a failure (``RunState.failed``). A refusal whose result hands the
    model the user's words (``refusal_with_words``) is heard as the user's reply: the run's
    world advances, and the next refusal is another attempt's.
    """
    run.failed = True
    if call.error:
        text = call.error_message or (str(call.result)[:500] if call.has_result else "") or \
            "error"
    else:
        text = info.error or ""
    failure = _failure_of(text)
    if failure[1] == DECLINED and call.has_result and refusal_with_words(call.result):
        heard(run, info.digest, reply=True)
    return failure


def record_unchanged(run: RunState, result: str) -> tuple[str, str, str]:
    """Return the error text, class and reason of an edit whose result says it changed nothing.

    The result is the error (``unchanged_words`` found the words at its head). Marks ``run`` as
    having a failure.
    """
    run.failed = True
    return _failure_of(result)


def _failure_of(text: str) -> tuple[str, str, str]:
    """Return an error's text (numbers, dates, quotes masked; whitespace folded), class, reason."""
    error = " ".join(_MASK_RE.sub("#", mask_volatile_text(text[:500])).split())
    if "`" in error:
        error = _QUOTED_RE.sub("`#`", error)
    return (error, *classify_error(error))


def check_reentry(run: RunState) -> None:
    """Raise when this thread is inside ``on_decision`` for ``run`` (it holds the run's lock)."""
    if run.in_callback():
        raise LoopGuardError(
            "on_decision must not feed or reset the run it was called for (process, precheck, "
            "process_handoff, reset, set_template or a guarded tool call of that run inside "
            "the callback); do that work after the callback returns")
