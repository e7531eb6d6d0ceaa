"""The detection engine: per-run state, tool calls in, decisions out.

The engine is shared by the span processor, ``check`` and ``serve``. It holds no runs itself:
callers keep one :class:`RunState` per run and serialise calls on it (``RunState.lock``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final, get_args

from otel_loopguard._callbacks import Callbacks
from otel_loopguard._precheck import Prechecks
from otel_loopguard._run_state import (
    RESET_SLOTS,
    InFlight,
    RunState,
    changed,
    check_reentry,
    heard,
    record_failure,
    record_outcome,
    record_unchanged,
    restart_unchanged,
)
from otel_loopguard._turns import Turns
from otel_loopguard.adapters._rules import is_plain_tool
from otel_loopguard.config import LoopGuardConfig, ToolKind
from otel_loopguard.detectors import HandoffDetector, make_default_detectors
from otel_loopguard.detectors._base import DetectorBase, declared, deep_fork
from otel_loopguard.detectors._failing_text import reads_as_failure
from otel_loopguard.detectors._fused import BuiltinDetectors
from otel_loopguard.detectors._step import Step
from otel_loopguard.detectors.budget import BudgetDetector
from otel_loopguard.detectors.failure import unchanged_words
from otel_loopguard.detectors.idle import IdleTurnsDetector
from otel_loopguard.detectors.repetition import StagnationDetector
from otel_loopguard.kinds._tools import (
    NO_ARGUMENTS,
    PER_CALL,
    QUERY_KEYS,
    ToolKinds,
    arguments_known,
    turn_acknowledged,
)
from otel_loopguard.policy import Policy
from otel_loopguard.signature import (
    ResultInfo,
    VolatileMatcher,
    analyze_result,
    call_signature,
    digest,
)
from otel_loopguard.signature._native import NATIVE
from otel_loopguard.types import Action, Decision, Detector, Evidence, ToolCall
from otel_loopguard.waste import is_loop_finding

__all__ = ["InFlight", "LoopEngine", "RunState"]

_NO_RESULT: Final = ResultInfo(digest="")
_CALL_KINDS: Final[frozenset[str]] = frozenset(get_args(ToolKind))
"""Every kind of call (``tool_kind``): what a detector observes unless it says otherwise."""
_NO_FAILURE: Final[tuple[None, None, str]] = (None, None, "")
"""The error, error class and reason of a call that did not fail."""
_RESULT_CACHE_MAX: Final = 16
"""Most recent result texts per run whose analysis is reused (a loop repeats its results)."""
_MAX_ARGUED: Final = 256
"""Tools per run remembered as called with arguments (``RunState.argued``)."""
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


def _argued(run: RunState, tool: str) -> bool:
    """Note that ``run`` called ``tool`` with arguments (at most 256 tools); return True."""
    argued = run.argued
    if len(argued) < _MAX_ARGUED:
        argued.add(tool)
    return True


def _lost(run: RunState, tool: str, kinds: ToolKinds) -> bool:
    """Whether an empty arguments object of ``tool`` lost what the call had.

    So when the run called that tool with arguments before, or when the tool never goes without
    them: a shell's command, an editor's file (``ToolKinds.takes_arguments``).
    """
    return tool in run.argued or kinds.takes_arguments(tool)


def _known(run: RunState, tool: str, kind: str, args: Any, has_result: bool, *,
           kinds: ToolKinds) -> bool:
    """Whether a call without a non-empty dict of arguments was captured whole enough to compare.

    ``_step`` judges a non-empty dict itself. An empty arguments object is a tool that takes
    none, unless it lost them (``_lost``): then with no result either the call equals no other
    (absent is not the same).
    """
    if args == {} and not has_result and _lost(run, tool, kinds):
        return False
    return (args is not None or has_result) and arguments_known(kind, args, tool)


class LoopEngine(Prechecks, Turns, Callbacks):
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
        self._tool_kinds = ToolKinds(self.config)
        self._kinds = self._tool_kinds.cache  # _step looks a known tool up here, per call
        self._ask_tools = self._tool_kinds.ask_tools  # and here whether it asks the user
        self._in_callback = threading.local()
        self._near_duplicates = "near_duplicate" in self.config.detectors
        self._plain_policy = type(self.policy) is Policy
        self._enforce = self.config.mode == "enforce"
        self._result_cache_size = max(2, min(_RESULT_CACHE_MAX, self.config.cycle_max_length))
        stagnation = next((d for d in self.detectors if isinstance(d, StagnationDetector)), None)
        self._no_effect_check = sys.maxsize if stagnation is None \
            else stagnation._no_effect_floor - 1
        """The ``unchanged`` at which a plain call's outcome is read for a failure: the next
        identical one could reach ``NO_EFFECT`` (``reads_as_failure``)."""
        self._observers = tuple(detector.observe for detector in self.detectors)
        builtins = BuiltinDetectors(self.detectors)
        self._builtins = builtins if builtins.count else None
        """The built-in detectors at the head of ``detectors``, observed together in a few
        Python calls (``BuiltinDetectors``); None when the list starts with another."""
        others = tuple(enumerate(self.detectors))[builtins.count:]
        self._all_observing = tuple((detector.observe, index) for index, detector in others)
        self._observing = {kind: tuple((detector.observe, index) for index, detector in others
                                       if kind in declared(detector, "observed_kinds",
                                                            _CALL_KINDS))
                           for kind in _CALL_KINDS}
        """Call kind → the other detectors that look at a call of that kind, with their
        state's index: one that ignores the kind (``observed_kinds``) is not called for it."""
        self._unfailed = {kind: tuple(entry for entry in observing if not declared(
                              self.detectors[entry[1]], "quiet_until_failure", False))
                          for kind, observing in self._observing.items()}
        """``_observing`` for a run none of whose calls has failed: without the detectors
        that say a success changes nothing for them until then (``quiet_until_failure``)."""
        self._forks = tuple(getattr(detector, "fork", None) or deep_fork
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
            check_reentry(run)
        fresh = self.new_run()
        for name in RESET_SLOTS:
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
            check_reentry(run)
        if run.in_flight.calls:
            run.in_flight.remove(call.span_id)
        prior_end = run.last_end_ns  # the latest end among the run's earlier calls
        step, repeat = self._step(run, call)
        waste = run.waste
        evidence: list[Evidence] = []
        if call.agent and call.agent != run.last_agent:
            implicit = self._agent_change(run, call, prior_end)
            if implicit is not None:
                evidence.append(implicit)
        if self.handoffs is not None and len(run.handoff_state.agents) > 1 \
                and step.error is None and (not repeat if step.has_result
                                            else step.kind == "mutating"
                                            or is_plain_tool(call.tool)):
            # something done: a result its call had not returned before, a successful change,
            # or a call whose result is unknown (absent is not the same: even the same call
            # again may have brought something new), so no ping-pong is known; not a call of
            # a handoff tool (ADK's transfer_to_agent without its arguments), which only hands
            # control over
            self.handoffs.progress(run.handoff_state)
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

    def set_template(self, run: RunState, template: str | None) -> None:
        """Record the prompt template of ``run`` (``name@version``, ``name`` or ``tpl-…``).

        The template's budgets (``LoopGuardConfig.templates``) apply from the run's next tool
        call; callers may learn the template after the first calls. Nothing is kept per
        template name beyond the run itself. Hold the run's lock.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            check_reentry(run)
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

    def _step(  # noqa: C901, PLR0912 - one frame per call, as its docstring says
            self, run: RunState, call: ToolCall) -> tuple[Step, bool]:
        """Return the step of ``call`` and whether it repeats its call's previous outcome.

        Advances the run's counters and records the call's outcome (``record_outcome``).
        Besides the result's analysis, the call's signature and the outcome, the helpers it
        calls are those of a failure, a hook, a new tool or a new state change (a user's
        reply to a tool that asked them among them).
        """
        index = run.calls = run.calls + 1
        has_result, tool, turn, result = call.has_result, call.tool, call.turn, call.result
        info = self._result_info(run, result) if has_result else _NO_RESULT
        if self.result_signature is not None and has_result:
            info = self._custom_result_info(tool, result, info)
        error, error_class, reason = record_failure(run, call, info) \
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
        if kind is None or kind is PER_CALL or (info.in_progress and kind == "default"):
            kind = self._tool_kinds.kind(tool, info, call.arguments)
        if has_result and kind != "default" and error is None:
            if kind == "mutating" and unchanged_words(result) is not None:
                error, error_class, reason = record_unchanged(run, result)  # it changed nothing
            elif turn_acknowledged(tool, result):  # a scroll's "Scrolled down": no page
                has_result, info = False, _NO_RESULT
        # a call not captured whole equals no other; a failed one keeps its identity, since the
        # failure ladders (and precheck's prediction of them) key on the call and its target
        # (most calls: a dict of arguments naming no query key, of a call that changes nothing,
        # of a tool the run already noted as called with arguments: one set test)
        known = ((tool in run.argued or _argued(run, tool)) and (
            (kind != "mutating" and QUERY_KEYS.isdisjoint(args))
            or arguments_known(kind, args, tool))
            if type(args) is dict and args
            else _known(run, tool, kind, args, has_result, kinds=self._tool_kinds)
        ) or error is not None
        if not known:
            call_sig = digest(call_sig + "\x00opaque:" + str(index))
        result_sig = info.digest
        outcome = call_sig + ":" + result_sig if has_result else call_sig
        if tool in self._ask_tools and error is None:
            if not has_result:  # a reply not captured: absent, so never the same reply
                heard(run, "\x00absent:" + str(index), reply=True)
            elif result_sig and not info.empty:
                heard(run, result_sig, reply=True)  # the user's reply, as a tool's result
        version = run.version
        if kind == "mutating":
            if error is not None:
                run.mutation_failed = True
            elif outcome not in run.mutations:
                version = changed(run, outcome)
        # a successful mutation's target only ends a failure streak on it: none is open in a
        # run before a mutating call failed, so until then it is not looked for (see Step.target)
        target = self._tool_kinds.target(tool, kind, error, args, call.arguments) \
            if error is not None or run.mutation_failed else None
        world = run.world  # in_world, inline: two keys per call
        if world:
            pair, call_key = outcome + world, call_sig + world
        else:
            pair, call_key = outcome, call_sig
        unchanged, repeat = record_outcome(run, call_sig, (result_sig, error, kind, info.empty),
                                           version)
        if unchanged >= self._no_effect_check and kind == "default" and error is None \
                and has_result and self._no_effect_near(tool, unchanged) \
                and not reads_as_failure(result):
            unchanged = restart_unchanged(run, call_sig)  # passing output: not without effect
        # arguments captured: not when none were sent, nor an empty object that lost them (an
        # export lost them, as ``_known`` reads it)
        captured = True if args else call.arguments is not None \
            and not (args == {} and _lost(run, tool, self._tool_kinds))
        # Positional, in Step's field order: with keyword arguments, building it costs about
        # 2 us more in CPython 3.11 (benchmarks/bench_step.py).
        return _NEW_STEP(index, tool, kind, call_sig, has_result, result_sig,
                    error, error_class, reason, info.empty, call.span_id, call.start_time_ns,
                    call.end_time_ns, new_batch, pair,
                    args if self._near_duplicates and known else None,  # arguments
                    turn or 0, call_key, outcome, version, target, unchanged,
                    # sequence_key: unknown outcome, mutation in any version, else the pair
                    f"\x00absent:{index}" if not has_result and error is None
                    else outcome if kind == "mutating" else pair,
                    captured), repeat

    def _no_effect_near(self, tool: str, unchanged: int) -> bool:
        """Return whether ``unchanged`` is just below ``tool``'s own ``NO_EFFECT`` threshold.

        ``_no_effect_check`` is the lowest over every tool: one tool set low must not make the
        results of every other tool be read for failure words.
        """
        warn = self.config.threshold(tool, "stagnation_no_effect_warn")
        return warn is not None and unchanged >= warn - 1

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
                  arguments: Any = NO_ARGUMENTS) -> str:
        """Return the kind of a call: ``read``, ``mutating``, ``poll``, ``exempt`` or ``default``.

        The configured kind of the tool wins; a shell or editor tool's call gets the kind of
        what it does (:mod:`otel_loopguard.kinds`; without ``arguments``, or without command
        text in them, the kind its name gives); other tools get the kind their name gives,
        cached. A ``default`` call whose result is in progress counts as ``poll``.
        """
        return self._tool_kinds.kind(tool, info, arguments)

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
