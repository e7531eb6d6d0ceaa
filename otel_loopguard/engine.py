"""The detection engine: per-run state, tool calls in, decisions out.

The engine is shared by the span processor, ``check`` and ``serve``. It holds no runs itself:
callers keep one :class:`RunState` per run and serialise calls on it (``RunState.lock``).
"""

from __future__ import annotations

import copy
import fnmatch
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Final, get_args

from otel_loopguard.config import LoopGuardConfig, ToolKind
from otel_loopguard.detectors import HandoffDetector, make_default_detectors
from otel_loopguard.detectors._base import DetectorBase
from otel_loopguard.detectors._fused import BuiltinDetectors
from otel_loopguard.detectors._step import Step, in_world
from otel_loopguard.detectors.budget import BudgetDetector
from otel_loopguard.detectors.failure import classify_error
from otel_loopguard.detectors.idle import IdleTurnsDetector
from otel_loopguard.exceptions import LoopGuardError
from otel_loopguard.kinds import CallKindClassifier, tool_base_name
from otel_loopguard.kinds._target import call_target
from otel_loopguard.policy import Policy
from otel_loopguard.signature import (
    ResultInfo,
    VolatileMatcher,
    analyze_result,
    call_signature,
    digest,
)
from otel_loopguard.signature._native import NATIVE
from otel_loopguard.types import (
    Action,
    Decision,
    Detector,
    Evidence,
    Handoff,
    ModelTurn,
    ToolCall,
)
from otel_loopguard.waste import RunWaste, is_loop_finding

__all__ = ["InFlight", "LoopEngine", "RunState"]

_MASK_RE: Final = re.compile(r"\b[0-9a-f]{12,}\b|\d{5,}|\d{4}-\d{2}-\d{2}[T ][\d:.]+\S*",
                             re.IGNORECASE)
_TARGET_KEYS: Final = frozenset({
    "path", "file", "file_path", "filepath", "filename", "target_file", "target",
    "target_directory", "directory", "dir", "uri", "url", "notebook_path",
    "relative_workspace_path", "explanation", "description"})
"""Argument keys that say where a change goes, or why, but not what it is."""
_QUERY_KEYS: Final = frozenset({"query", "pattern", "glob", "glob_pattern", "q", "search",
                                "regex"})
"""Argument keys of what a search looks for: empty, the export dropped it."""
_PLAN_TOOL_PATTERNS: Final = ("*todo*",)
"""Planning tools (``TodoWrite``, ``todo_write``, ``update_todo_list``): an agent updates its
to-do list again and again as it works, which is neither a loop nor a change of the world, so
they are ``exempt`` unless configured otherwise."""
_NO_RESULT: Final = ResultInfo(digest="")
_CALL_KINDS: Final[frozenset[str]] = frozenset(get_args(ToolKind))
"""Every kind of call (``tool_kind``): what a detector observes unless it says otherwise."""
_NO_FAILURE: Final[tuple[None, None, str]] = (None, None, "")
"""The error, error class and reason of a call that did not fail."""
_CONTAINED: Final = (Exception, SystemExit)
"""What a user callback may raise without it reaching the app: a ``sys.exit()`` in a callback
called from ``span.end()`` must not end the span's thread or skip the downstream processor
(KeyboardInterrupt still goes through)."""
_RESULT_CACHE_MAX: Final = 16
"""Most recent result texts per run whose analysis is reused (a loop repeats its results)."""
_PER_CALL: Final = "\x00per-call"
"""Cached kind of a tool whose every call is classified on its own (shell and editor tools)."""
_NO_ARGUMENTS: Final[Any] = object()
_MAX_MUTATIONS: Final = 1024
"""Distinct successful mutations a run remembers to tell a new state change from a re-applied
one (the oldest forgotten first)."""
_NO_MUTATIONS: Final[frozenset[str]] = frozenset()
_RUNNING_RESULT: Final = digest("\x00running")
"""The result ``precheck`` assumes for a call still running when no identical call has ended:
the same for every identical call, as a loop's repeated answers are."""


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


_Outcome = tuple[str, str | None, str, bool, int, int]
"""The streak of identical outcomes of one call signature (successes or failures), as a plain
tuple (built in C: a class instance per new call cost about 3,700 instructions):
``(result, error, kind, empty, unchanged, version)``. What ``precheck`` needs to repeat the
outcome: its result and error, the call's kind, whether the result was empty; in how many world
versions in a row the call got it (``Step.unchanged``), and the latest of them."""


class RunState:
    """Everything the engine remembers about one run. Bounded; guarded by ``lock``."""

    __slots__ = ("calls", "explicit_handoffs", "failed", "handoff_state", "handoffs", "highest",
                 "hinted", "idle_state", "in_flight", "last_agent", "last_end_ns", "last_turn",
                 "lock", "mutation_failed", "mutations", "notifying", "outcomes", "results",
                 "states", "stopped", "template", "version", "waste", "world")

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
        self.outcomes: dict[str, _Outcome] = {}
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
        their targets are worth finding (``LoopEngine._target``)."""
        self.failed = False
        """A call of the run has failed: until then the detectors that are
        ``quiet_until_failure`` are not called (``LoopEngine._unfailed``)."""

    def in_callback(self) -> bool:
        """Return True on the thread that is running ``on_decision`` for this run.

        Whoever holds the run's ``lock`` to call the engine checks this first: the callback runs
        under that lock, so taking it again on that thread would deadlock.
        """
        return self.notifying == threading.get_ident()


_RESET_SLOTS: Final = tuple(n for n in RunState.__slots__
                            if n not in ("lock", "notifying", "template"))
"""What ``LoopEngine.reset`` replaces: everything but the lock, the callback marker and the
run's template (which says what the run is, not what it has seen)."""
_MODEL: Final = ""
"""The ``tool`` of a decision on a model turn (no tool call triggered it)."""
_CONTINUE: Final = Action.CONTINUE
"""The action of a healthy call, looked up once: ``Action.CONTINUE`` goes through the enum
metaclass's ``__getattr__`` hook on every read (about 1,000 instructions, a sixtieth of a
healthy call's own work)."""
_NEW_STEP: Final[Callable[..., Step]] = Step if NATIVE is None else \
    partial(NATIVE.new_slotted, Step)
"""``Step(*fields)``, every field given in order: made in C where the accelerator is built.

A slotted dataclass's ``__init__`` is Python code that sets each field in turn: about 3,000
instructions per call for a Step's 23, a twentieth of a healthy call (``new_slotted`` in
``signature/_accel.c`` makes the same object with its slots set directly)."""
_NEW_DECISION: Final[Callable[..., Decision]] = Decision if NATIVE is None else \
    partial(NATIVE.new_slotted, Decision)
"""``Decision(*fields)``, every field given in order, as ``_NEW_STEP`` makes a Step."""


def _record_outcome(run: RunState, call_sig: str, outcome: tuple[str, str | None, str, bool],
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

class LoopEngine:
    """Runs the detectors and the policy over the tool calls of runs.

    Thread-safe as long as each ``RunState`` is used by one thread at a time (hold its lock).
    ``on_decision`` (seed 004's hook) receives every decision above continue; an exception in it
    is contained and counted in ``callback_errors``.

    ``signature(tool, arguments) -> str`` and ``result_signature(tool, result) -> str`` (seed
    004's hooks) replace the built-in signatures: two calls are the same call when ``signature``
    returns the same text, two results the same result when ``result_signature`` does. Use them
    to compare only the fields that identify a call or an answer. The result's facts (structured
    error, in-progress state, emptiness) still come from the result itself. A hook that raises
    or returns something other than a string is contained: the built-in signature is used for
    that call and the error is counted in ``callback_errors``.
    """

    def __init__(self, config: LoopGuardConfig | None = None, *,
                 detectors: Sequence[Detector] | None = None, policy: Policy | None = None,
                 on_decision: Callable[[Decision], object] | None = None,
                 signature: Callable[[str, Any], str] | None = None,
                 result_signature: Callable[[str, Any], str] | None = None) -> None:
        """Build the engine; detectors default to ``make_default_detectors(config)``."""
        self.config = config or LoopGuardConfig()
        self.signature = signature
        self.result_signature = result_signature
        self.detectors = tuple(detectors if detectors is not None
                               else make_default_detectors(self.config))
        self.handoffs = HandoffDetector(self.config) if "handoff" in self.config.detectors \
            else None
        self.policy = policy or Policy()
        self.on_decision = on_decision
        self.callback_errors = 0
        self._volatile_matcher = VolatileMatcher(self.config.volatile_keys)
        self._kinds: dict[str, str] = {}
        self._call_kinds = CallKindClassifier(self.config)
        self._in_callback = threading.local()
        self._near_duplicates = "near_duplicate" in self.config.detectors
        self._plain_policy = type(self.policy) is Policy
        self._enforce = self.config.mode == "enforce"
        self._result_cache_size = max(2, min(_RESULT_CACHE_MAX, self.config.cycle_max_length))
        self._observers = tuple(detector.observe for detector in self.detectors)
        builtins = BuiltinDetectors(self.detectors)
        self._builtins = builtins if builtins.count else None
        """The built-in detectors at the head of ``detectors``, observed together in a few
        Python calls (``BuiltinDetectors``); None when the list starts with another."""
        others = tuple(enumerate(self.detectors))[builtins.count:]
        self._all_observing = tuple((detector.observe, index) for index, detector in others)
        self._observing = {kind: tuple((detector.observe, index) for index, detector in others
                                       if kind in _declared(detector, "observed_kinds",
                                                            _CALL_KINDS))
                           for kind in _CALL_KINDS}
        """Call kind → the other detectors that look at a call of that kind, with their
        state's index: one that ignores the kind (``observed_kinds``) is not called for it."""
        self._unfailed = {kind: tuple(entry for entry in observing if not _declared(
                              self.detectors[entry[1]], "quiet_until_failure", False))
                          for kind, observing in self._observing.items()}
        """``_observing`` for a run none of whose calls has failed: without the detectors
        that say a success changes nothing for them until then (``quiet_until_failure``)."""
        self._forks = tuple(getattr(detector, "fork", None) or _deep_fork
                            for detector in self.detectors)
        self._whole_forks = tuple(
            getattr(type(detector), "fork", None) in (None, DetectorBase.fork)
            for detector in self.detectors)
        """Per detector: its fork copies the whole state, so any call may be observed on it."""
        self._max_chars = self.config.max_value_chars
        self.idle = IdleTurnsDetector(self.config) if (
            "idle_turns" in self.config.detectors and self.config.run_key != "conversation"
            and self.config.idle_turns_warn is not None) else None
        """The idle-turns detector, fed by ``process_model_turn`` (None when off)."""
        self._budget = next(((i, d) for i, d in enumerate(self.detectors)
                             if isinstance(d, BudgetDetector)), None)
        self._new_states = tuple(detector.new_state for detector in self.detectors)

    def new_run(self) -> RunState:
        """Return the state of a new run."""
        handoffs, idle = self.handoffs, self.idle
        return RunState(tuple([new_state() for new_state in self._new_states]),
                        handoffs.new_state() if handoffs is not None else None,
                        idle.new_state() if idle is not None else None)

    def reset(self, run: RunState) -> None:
        """Forget everything ``run`` has seen, in place (seed 004's ``reset()``); hold its lock.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        fresh = self.new_run()
        for name in _RESET_SLOTS:
            setattr(run, name, getattr(fresh, name))
        if run.template is not None:
            self._use_template(run)

    def summary(self, run: RunState) -> dict[str, Any]:
        """Return the counts of ``run`` (seed 004's ``summary()``), for logging at its end.

        ``tool_calls``; ``unique_call_signatures``, the distinct calls among the last 1,024
        kept; ``action``, the highest the run reached; ``max_tool_calls``, the run's tool-call
        budget (the stop limit, else the warn limit, else None) and ``budget_remaining``, the
        calls left before it (None without a budget); ``waste``, the calls the run wasted
        continuing its loops after its first finding and what they cost (``Waste.to_json``).
        """
        cfg, template = self.config, run.template
        limit = cfg.budget(template, "max_tool_calls_stop")
        if limit is None:
            limit = cfg.budget(template, "max_tool_calls_warn")
        return {"tool_calls": run.calls, "unique_call_signatures": len(run.outcomes),
                "action": run.highest.label, "max_tool_calls": limit,
                "budget_remaining": None if limit is None else max(0, limit - run.calls),
                "waste": run.waste.total().to_json()}

    def process(self, run: RunState, call: ToolCall) -> Decision:
        """Observe one finished tool call of ``run`` and return the decision on it.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        if run.in_flight.calls:
            run.in_flight.remove(call.span_id)
        step, repeat = self._step(run, call)
        waste = run.waste
        evidence: list[Evidence] = []
        if call.agent and call.agent != run.last_agent:
            implicit = self._agent_change(run, call)
            if implicit is not None:
                evidence.append(implicit)
        if self.handoffs is not None and len(run.handoff_state.agents) > 1 and not repeat \
                and step.error is None and (step.has_result or step.kind == "mutating"):
            self.handoffs.progress(run.handoff_state)  # something done: no ping-pong
        states = run.states
        if self._builtins is not None:
            self._builtins.observe(states, step, run.failed, evidence)
        if self._all_observing:
            self._observe_others(run, step, evidence)
        if not evidence and self._plain_policy and (run.stopped is None or not self._enforce):
            # the common case, as Policy.decide and _finish would conclude it (a run's stop
            # is repeated on its later calls in enforce mode only)
            if waste.looping:
                waste.called(call, step.kind, False, repeat)
            return _NEW_DECISION(_CONTINUE, "OK", (), "", step.index, step.tool, step.span_id,
                                 False)  # escalated
        decision = self._finish(run, evidence, step.tool, step.index, step.span_id)
        if evidence or waste.looping:
            waste.called(call, step.kind, is_loop_finding(decision.action, evidence), repeat)
        return decision

    def _observe_others(self, run: RunState, step: Step, evidence: list[Evidence]) -> None:
        """Observe ``step`` with the detectors after the built-in ones, through ``observe``."""
        states = run.states
        observing = self._observing if run.failed else self._unfailed
        for observe, index in observing.get(step.kind, self._all_observing):
            found = observe(states[index], step)
            if found is not None:
                evidence.append(found)

    def precheck(self, run: RunState, tool: str, arguments: Any) -> Decision:
        """Return what running this call *again* would lead to, before it runs (enforce mode).

        Assumes the call repeats its latest outcome in this run (the same result, or the same
        error; a call not seen yet has an unknown, uncaptured result) and runs the detectors on
        copies of their states with that hypothetical call, so the prediction is what detection
        would decide: a call whose next identical outcome would reach a threshold gets that
        action now, and a guard can block the call that would be one too many. Budgets count
        this call. Does not change the run's state.

        Calls still running (``call_started``) count as if they had ended first, as predicted:
        identical ones as repeats of the same outcome (of a repeated result, when none is known
        yet and their results are captured), in every detector; the others in the detectors
        that copy their whole state (the budgets), since the narrower copies hold only what
        this call's signature touches.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        running = list(run.in_flight.steps()) if run.in_flight.calls else []
        step = self._hypothetical(run, tool, arguments, running)
        if step.kind == "exempt":
            return self.policy.decide((), tool=tool, call_index=step.index, span_id="")
        evidence: list[Evidence] = []
        for observe, fork, whole, state in zip(self._observers, self._forks, self._whole_forks,
                                               run.states, strict=True):
            forked = fork(state, step)
            for earlier in running:
                if whole or earlier.call_sig == step.call_sig:
                    observe(forked, earlier)
            found = observe(forked, step)
            if found is not None:
                evidence.append(Evidence(found.detector, found.code, found.action, found.tool,
                                         found.count, {**found.details, "predicted": True}))
        decision = self.policy.decide(evidence, tool=tool, call_index=step.index, span_id="")
        if self.config.mode == "enforce" and run.stopped is not None and \
                decision.action < Action.STOP:
            prior = run.stopped
            decision = Decision(action=Action.STOP, code=prior.code, evidence=prior.evidence,
                                hint=prior.hint, call_index=step.index, tool=tool)
        return decision

    def call_started(self, run: RunState, tool: str, arguments: Any, key: str, *,
                     captured: bool = True) -> None:
        """Count a guarded call that is about to run in ``run`` until it is processed.

        ``precheck`` then counts it toward the run's budgets and repetition ladders; ``process``
        of a call whose ``span_id`` is ``key``, or ``call_finished(run, key)``, stops counting
        it (whichever comes first; call both when the key may not be the call's own span).
        Hold the run's lock.

        Args:
            run: the run's state.
            tool: the tool's name.
            arguments: its arguments, as ``precheck`` got them.
            key: the span id (16 hex digits) of the call's tool span, or of the span the guard
                saw around it.
            captured: whether the call's result will be recorded.
        """
        running = list(run.in_flight.steps()) if run.in_flight.calls else []
        step = self._hypothetical(run, tool, arguments, running, captured=captured)
        step.arguments = None  # kept for as long as the call runs: only its digests
        run.in_flight.add(key, step)

    @staticmethod
    def call_finished(run: RunState, key: str) -> None:
        """Stop counting a call running under ``key`` (nothing if ``process`` already did)."""
        run.in_flight.remove(key)

    def _hypothetical(self, run: RunState, tool: str, arguments: Any, running: list[Step], *,
                      captured: bool = False) -> Step:
        """Return the step of ``tool(arguments)`` repeating its latest outcome in ``run``.

        Its position follows the ``running`` calls. A call with no outcome yet has an unknown
        result, unless identical calls are running whose results are captured (or, for a call
        about to run, its own result will be): then it repeats the result they will get.
        """
        args, call_sig = call_signature(tool, arguments, self._max_chars)
        if self.signature is not None:
            call_sig = self._custom_call_sig(tool, arguments, call_sig)
        outcome = run.outcomes.get(call_sig)
        version, end = run.version, max(run.last_end_ns, 0)
        index = run.calls + len(running) + 1
        common: dict[str, Any] = {"index": index, "tool": tool, "call_sig": call_sig, "span_id": "",
                  "start_time_ns": end, "end_time_ns": end, "new_batch": True,
                  "arguments": args if self._near_duplicates else None,
                  "turns": run.last_turn or 0, "call_key": in_world(call_sig, version),
                  "version": version}
        if outcome is None:
            kind = self.tool_kind(tool, arguments=arguments)
            twin = next((s for s in running if s.call_sig == call_sig and s.has_result), None)
            if twin is None and not captured:
                return Step(**common, kind=kind, has_result=False, result_sig="", error=None,
                            error_class=None, error_reason="", empty=False,
                            pair=in_world(call_sig, version), outcome=call_sig)
            result = twin.result_sig if twin is not None else _RUNNING_RESULT
            key = call_sig + ":" + result
            return Step(**common, kind=kind, has_result=True, result_sig=result, error=None,
                        error_class=None, error_reason="", empty=False,
                        pair=in_world(key, version), outcome=key)
        # a repeat: the same outcome, and so no new state change
        result, error, kind, empty, unchanged, seen_in = outcome
        error_class, reason = classify_error(error) if error else (None, "")
        key = call_sig + ":" + result if result else call_sig
        return Step(**common, kind=kind, has_result=bool(result), result_sig=result, error=error,
                    error_class=error_class, error_reason=reason, empty=empty,
                    pair=in_world(key, version), outcome=key,
                    target=self._target(tool, kind, error, args, arguments),
                    unchanged=unchanged + (seen_in != version))

    @staticmethod
    def counts_inferred_handoff(run: RunState) -> bool:
        """Return whether a handoff inferred from sibling agent spans still counts in ``run``.

        Only until the run reports a handoff span of its own: from then on its spans say where
        control goes. The live processor, ``check`` and ``serve`` all ask this.
        """
        return run.handoffs == 0

    def process_handoff(self, run: RunState, handoff: Handoff) -> Decision:
        """Observe one explicit handoff of ``run``.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        run.explicit_handoffs = True
        run.last_agent = handoff.to_agent
        if handoff.explicit:
            run.handoffs += 1
        found = self.handoffs.observe(run.handoff_state, handoff) if self.handoffs else None
        return self._finish(run, [found] if found else [], "handoff", run.calls, handoff.span_id)

    def process_model_turn(self, run: RunState, turn: ModelTurn) -> Decision:
        """Observe one model turn (a chat span) of ``run`` and return the decision on it.

        Call it, in end-time order with the run's tool calls and handoffs, for every model
        span of the run; the ``idle_turns`` detector judges the turns (its decisions have
        ``tool`` ``""`` and the run's tool calls so far as ``call_index``). A numbered turn
        (``ModelTurn.index``) also gives its tokens to the run's waste, for the wasted calls
        it issued (``otel_loopguard.waste``). Cheap when that detector is off.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        if turn.index is not None:
            run.waste.turn(turn.index, turn.input_tokens, turn.output_tokens,
                           self.config.price(turn.models) if self.config.prices else None)
        if self.handoffs is not None and turn.output_sig and turn.requested_tools is False:
            self.handoffs.said(run.handoff_state, turn.output_sig)  # a contribution in words
        if turn.user_input and turn.input_sig:
            self._heard(run, turn.input_sig)
        idle = self.idle
        found = idle.observe_turn(run.idle_state, turn, run.calls + run.handoffs) \
            if idle is not None else None
        if found is None:  # a model turn cannot be blocked: a stop is not repeated on it
            return Decision(_CONTINUE, "OK", (), "", run.calls, _MODEL, turn.span_id)
        return self._finish(run, [found], _MODEL, run.calls, turn.span_id)

    def process_blank_turn(self, run: RunState, span_id: int, start_ns: int, end_ns: int,
                           agent_span_id: str | None) -> None:
        """``process_model_turn`` of a blank turn, without building the turn or its decision.

        A blank turn has no content, no request for tools known and no usage to give (an
        unnumbered turn): most model spans, since content is opt-in. It gives nothing to the
        waste, the handoffs or the messages heard, and is never a finding; the ``idle_turns``
        detector restarts its streak with it (``IdleTurnsDetector.observe_blank``). ``span_id``
        is the span's id as a number (formatted only if a finding lists it); the rest as
        ``ModelTurn`` has them.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        if self.idle is not None:
            self.idle.observe_blank(run.idle_state, span_id, start_ns, end_ns, agent_span_id,
                                    acted=run.calls + run.handoffs)

    def set_template(self, run: RunState, template: str | None) -> None:
        """Record the prompt template of ``run`` (``name@version``, ``name`` or ``tpl-…``).

        The template's budgets (``LoopGuardConfig.templates``) apply from the run's next tool
        call; callers may learn the template after the first calls. Nothing is kept per
        template name beyond the run itself. Hold the run's lock.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        if template != run.template:
            run.template = template
            self._use_template(run)

    def _use_template(self, run: RunState) -> None:
        if self._budget is not None:
            index, budget = self._budget
            budget.use_template(run.states[index], run.template)

    def make_step(self, run: RunState, call: ToolCall) -> Step:
        """Return the normalised step of ``call``; advance the run's counters and outcomes."""
        return self._step(run, call)[0]

    def _step(self, run: RunState, call: ToolCall) -> tuple[Step, bool]:
        """Return the step of ``call`` and whether it repeats its call's previous outcome.

        Advances the run's counters and records the call's outcome (``_record_outcome``).
        Besides the result's analysis, the call's signature and the outcome, the helpers it
        calls are those of a failure, a hook, a new tool or a new state change.
        """
        index = run.calls = run.calls + 1
        has_result, tool, turn, result = call.has_result, call.tool, call.turn, call.result
        info = self._result_info(run, result) if has_result else _NO_RESULT
        if self.result_signature is not None and has_result:
            info = self._custom_result_info(tool, result, info)
        error, error_class, reason = self._failure(run, call, info) \
            if call.error or info.error is not None else _NO_FAILURE
        if turn is not None:  # a new model turn starts a new batch
            new_batch, run.last_turn = turn != run.last_turn, turn
        else:  # without turns: a call that starts after every earlier one ended
            new_batch = call.start_time_ns >= run.last_end_ns or call.start_time_ns == 0
        end = call.end_time_ns  # not max(): a builtin's call costs more than the comparison
        run.last_end_ns = end if end > run.last_end_ns else run.last_end_ns
        args, call_sig = call_signature(tool, call.arguments, self._max_chars)
        if self.signature is not None:
            call_sig = self._custom_call_sig(tool, call.arguments, call_sig)
        kind = self._kinds.get(tool)
        if kind is None or kind is _PER_CALL or (info.in_progress and kind == "default"):
            kind = self.tool_kind(tool, info, call.arguments)
        # a call not captured whole equals no other; a failed one keeps its identity, since the
        # failure ladders (and precheck's prediction of them) key on the call and its target
        # (most calls: a dict of arguments naming no query key, of a call that changes nothing)
        known = error is not None or (
            kind != "mutating" and type(args) is dict and _QUERY_KEYS.isdisjoint(args)) or (
            (args is not None or has_result) and arguments_known(kind, args))
        if not known:
            call_sig = digest(call_sig + "\x00opaque:" + str(index))
        result_sig = info.digest
        outcome = call_sig + ":" + result_sig if has_result else call_sig
        version = run.version
        if kind == "mutating":
            if error is not None:
                run.mutation_failed = True
            elif outcome not in run.mutations:
                version = self._changed(run, outcome)
        # a successful mutation's target only ends a failure streak on it: none is open in a
        # run before a mutating call failed, so until then it is not looked for (see Step.target)
        target = self._target(tool, kind, error, args, call.arguments) \
            if error is not None or run.mutation_failed else None
        world = run.world  # in_world, inline: two keys per call
        if world:
            pair, call_key = outcome + world, call_sig + world
        else:
            pair, call_key = outcome, call_sig
        unchanged, repeat = _record_outcome(run, call_sig, (result_sig, error, kind, info.empty),
                                            version)
        # Positional, in Step's field order: with keyword arguments, building it costs about
        # 2 us more in CPython 3.11 (benchmarks/bench_step.py).
        return _NEW_STEP(index, tool, kind, call_sig, has_result, result_sig,
                    error, error_class, reason, info.empty, call.span_id, call.start_time_ns,
                    call.end_time_ns, new_batch, pair,
                    args if self._near_duplicates and known else None,  # arguments
                    turn or 0, call_key, outcome, version, target, unchanged,
                    # sequence_key: unknown outcome, mutation in any version, else the pair
                    f"\x00absent:{index}" if not has_result and error is None
                    else outcome if kind == "mutating" else pair), repeat

    def _target(self, tool: str, kind: str, error: str | None, args: Any,
                arguments: Any) -> str | None:
        """Return what a mutating or failed call acts on (None for other calls, or none named).

        A mutating call's target is what it changes (``CallKindClassifier.target``: the file a
        shell command writes, an editor's path), so ``mutating_failure`` can tell a success on
        that target from one elsewhere; a failed call's is ``call_target`` of its arguments.
        """
        if kind == "mutating":
            found = self._call_kinds.target(tool, arguments)
            return None if found is None else tool + "\x00" + found
        return None if error is None else call_target(tool, args)

    @staticmethod
    def _changed(run: RunState, mutation: str) -> int:
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
        run.version += 1
        run.world = "@" + str(run.version)
        return run.version

    @classmethod
    def _heard(cls, run: RunState, message: str) -> None:
        """A new message from the user changes the agent's world, as a new change does.

        An agent that looks something up again because its user asked again (``recheck it
        now``) is answering its user, not stuck: the repetition detectors count the calls
        after a new user message as new observations. The same message again changes nothing,
        nor does the run's first (its task: an instrumentation may report it after the first
        tool call, when the model span encloses the tools).
        """
        key = "\x00user:" + message
        if not isinstance(run.mutations, dict):
            run.mutations = {}
        if key in run.mutations:
            return
        if "\x00user" not in run.mutations:  # the run's first message is its task: no change
            run.mutations["\x00user"] = run.mutations[key] = None
            return
        cls._changed(run, key)

    def _custom_call_sig(self, tool: str, arguments: Any, builtin: str) -> str:
        """Return the call signature from the ``signature`` hook (``builtin`` if it fails)."""
        text = self._hook_text(self.signature, tool, arguments)
        return builtin if text is None else digest(tool + "\x00custom\x00" + text)

    def _custom_result_info(self, tool: str, result: Any, info: ResultInfo) -> ResultInfo:
        """Return ``info`` with the digest of the ``result_signature`` hook's text."""
        text = self._hook_text(self.result_signature, tool, result)
        if text is None:
            return info
        return ResultInfo(digest=digest("\x00custom\x00" + text), error=info.error,
                          in_progress=info.in_progress, empty=info.empty)

    def _hook_text(self, hook: Callable[[str, Any], str] | None, tool: str,
                   value: Any) -> str | None:
        """Return what a signature hook gives for ``value``.

        None, counted in ``callback_errors``, when it raises or gives something else than a
        string.
        """
        try:
            text = hook(tool, value)  # type: ignore[misc]  # set when this is called
        except _CONTAINED:
            text = None
        if isinstance(text, str):
            return text
        self.callback_errors += 1
        return None

    def _result_info(self, run: RunState, result: Any) -> ResultInfo:
        """Return the result's signature and facts, reusing the run's last few results.

        A loop returns the same text again and again (and a stuck poll the same state), so a
        hit on the run's recent texts skips parsing. Keys are the text's length and hash (no
        copy of the text is kept); the cache holds the results of the last ``cycle_max_length``
        calls (2 to 16), so a cycle the cycle detector can see is analysed once per step.
        """
        if not isinstance(result, str):
            return analyze_result(result, self._volatile_matcher, max_value_chars=self._max_chars)
        key, cache = (len(result), hash(result)), run.results
        info = cache.get(key)
        if info is None:
            info = cache[key] = analyze_result(result, self._volatile_matcher,
                                               max_value_chars=self._max_chars)
            if len(cache) > self._result_cache_size:
                del cache[next(iter(cache))]
        return info

    def tool_kind(self, tool: str, info: ResultInfo = _NO_RESULT,
                  arguments: Any = _NO_ARGUMENTS) -> str:
        """Return the kind of a call: ``read``, ``mutating``, ``poll``, ``exempt`` or ``default``.

        The configured kind of the tool wins; a shell or editor tool's call gets the kind of
        what it does (:mod:`otel_loopguard.kinds`; without ``arguments``, or without command
        text in them, the kind its name gives); other tools get the kind their name gives,
        cached. A ``default`` call whose result is in progress counts as ``poll``.
        """
        kind = self._kinds.get(tool)
        if kind is None:
            kind = _PER_CALL if self._call_kinds.mode(tool) else self._infer_kind(tool)
            if len(self._kinds) < 4096:
                self._kinds[tool] = kind
        if kind is _PER_CALL:
            per_call = None if arguments is _NO_ARGUMENTS else \
                self._call_kinds.kind(tool, arguments)
            kind = per_call or self._infer_kind(tool)
        if kind == "default" and info.in_progress and self.config.tool_kind(tool) is None:
            return "poll"
        return kind

    def _infer_kind(self, tool: str) -> str:
        cfg = self.config
        configured = cfg.tool_kind(tool)
        if configured is not None:
            return configured
        names = {tool, tool.rsplit("__", 1)[-1], tool_base_name(tool)}
        if not names.isdisjoint(cfg.mutating_tools):
            return "mutating"
        if not names.isdisjoint(cfg.read_tools):
            return "read"
        lowered = tool.lower()
        if any(fnmatch.fnmatchcase(lowered, p) for p in _PLAN_TOOL_PATTERNS):
            return "exempt"
        if any(fnmatch.fnmatchcase(lowered, p) for p in cfg.poll_tool_patterns):
            return "poll"
        return "default"

    @staticmethod
    def _failure(run: RunState, call: ToolCall, info: ResultInfo) -> tuple[str, str, str]:
        """Return a failed call's error text (numbers and dates masked), class and reason.

        Marks ``run`` as having a failure (``RunState.failed``).
        """
        run.failed = True
        if call.error:
            text = call.error_message or (str(call.result)[:500] if call.has_result else "") or \
                "error"
        else:
            text = info.error or ""
        error = " ".join(_MASK_RE.sub("#", text[:500]).split())
        return (error, *classify_error(error))

    def _agent_change(self, run: RunState, call: ToolCall) -> Evidence | None:
        previous, run.last_agent = run.last_agent, call.agent
        if (previous is None or previous == call.agent or run.explicit_handoffs
                or self.handoffs is None or call.agent is None):
            return None
        handoff = Handoff(from_agent=previous, to_agent=call.agent, span_id=call.span_id,
                          end_time_ns=call.end_time_ns, explicit=False)
        return self.handoffs.observe(run.handoff_state, handoff)

    def _finish(self, run: RunState, evidence: list[Evidence], tool: str, index: int,
                span_id: str) -> Decision:
        decision = self.policy.decide(evidence, tool=tool, call_index=index, span_id=span_id)
        if self.config.mode == "enforce" and run.stopped is not None and \
                decision.action < Action.STOP:
            prior = run.stopped
            decision = Decision(action=Action.STOP, code=prior.code, evidence=prior.evidence,
                                hint=prior.hint, call_index=index, tool=tool, span_id=span_id)
        run.highest = max(run.highest, decision.action)
        if decision.action is Action.STOP and run.stopped is None:
            run.stopped = decision
        if decision.action > Action.CONTINUE and self.on_decision is not None:
            self.notify(run, decision)
        return decision

    def notify(self, run: RunState, decision: Decision) -> None:
        """Hand ``decision`` of ``run`` to ``on_decision``, containing what it raises.

        The engine calls it for every decision above continue; an enforce-mode guard calls it
        for a call it blocks before the call runs (that call never reaches ``process``). While
        the callback runs, the run cannot be fed again from that thread (``LoopGuardError``,
        counted with the callback's errors when it escapes the callback), and a callback that
        feeds another run is not called back for that nested decision.
        """
        if self.on_decision is None or getattr(self._in_callback, "active", False):
            return
        self._in_callback.active = True
        previous, run.notifying = run.notifying, threading.get_ident()
        try:
            self.on_decision(decision)
        except _CONTAINED:
            self.callback_errors += 1
        finally:
            run.notifying = previous
            self._in_callback.active = False


def arguments_known(kind: str, arguments: Any) -> bool:
    """Whether a call's arguments were captured whole enough to compare it with another.

    Absent is not the same, for arguments as for results. An IDE export or an instrumentation
    without content capture keeps ``{"target_file": ...}`` or nothing of an edit, and an empty
    ``query`` of a search whose pattern was dropped: two such calls may be different calls, so
    they never count as the same one (no repeat of it, no stagnation on it), and each
    successful change of that kind is a change of state. (A call with neither arguments nor a
    result captured, as coding agents report tool calls by default, is not compared either:
    the engine checks that beside this.)
    """
    if isinstance(arguments, dict):
        # most calls name no query key: one set operation says so, and nothing is looked up
        if not _QUERY_KEYS.isdisjoint(arguments) and "" in map(arguments.get, _QUERY_KEYS):
            return False
        return kind != "mutating" or _holds_content(arguments)
    return kind != "mutating" or arguments not in (None, "", [], {})


def _holds_content(arguments: dict[Any, Any]) -> bool:
    """Whether a mutation's arguments say what it is: a value under a non-target key."""
    for key, value in arguments.items():
        if key not in _TARGET_KEYS and value not in (None, "", [], {}):
            return True
    return False


def _declared(detector: Detector, name: str, default: Any) -> Any:
    """Return what ``detector``'s class says of its ``observe`` in attribute ``name``.

    ``observed_kinds`` (the call kinds whose steps it looks at) or ``quiet_until_failure``
    (whether it can skip the calls before a run's first failure); ``default`` (every kind,
    every call) for a detector that does not say, or that inherits the attribute from a class
    whose ``observe`` it overrides (the new ``observe`` may look at more).
    """
    cls = type(detector)
    value = getattr(cls, name, None)
    if value is None:
        return default
    declared = next(k for k in cls.__mro__ if name in vars(k))
    observing = next((k for k in cls.__mro__ if "observe" in vars(k)), declared)
    return value if issubclass(declared, observing) else default


def _deep_fork(state: Any, step: Step) -> Any:
    """Return a deep copy of ``state``: the fork of a detector that has no ``fork`` method."""
    return copy.deepcopy(state)


def _check_reentry(run: RunState) -> None:
    """Raise when this thread is inside ``on_decision`` for ``run`` (it holds the run's lock)."""
    if run.in_callback():
        raise LoopGuardError(
            "on_decision must not feed the run it was called for (process, precheck, "
            "process_handoff or a guarded tool call of that run inside the callback); do that "
            "work after the callback returns")
