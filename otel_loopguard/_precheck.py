"""Enforce mode's look-ahead: what running a call again would lead to, before it runs.

``LoopEngine`` inherits :class:`Prechecks`: ``precheck`` runs the detectors on copies of a
run's states with the call it predicts, and ``call_started`` counts the guarded calls that are
running, so that 32 parallel calls meet the budgets and the ladders as 32 calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard._run_state import RunState, check_reentry
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._step import Step, in_world
from otel_loopguard.detectors.failure import classify_error
from otel_loopguard.kinds._tools import ToolKinds
from otel_loopguard.policy import Policy
from otel_loopguard.signature import ResultInfo, call_signature, digest
from otel_loopguard.types import Action, Decision, Evidence

__all__ = ["Prechecks"]

_RUNNING_RESULT: Final = digest("\x00running")
"""The result ``precheck`` assumes for a call still running when no identical call has ended:
the same for every identical call, as a loop's repeated answers are."""


class Prechecks:
    """``LoopEngine``'s enforce-mode methods (a base class: they share the engine's state)."""

    config: LoopGuardConfig
    policy: Policy
    signature: Callable[[str, Any], str] | None
    _observers: tuple[Callable[[Any, Step], Evidence | None], ...]
    _forks: tuple[Callable[[Any, Step], Any], ...]
    _whole_forks: tuple[bool, ...]
    _max_chars: int
    _near_duplicates: bool
    _tool_kinds: ToolKinds

    if TYPE_CHECKING:  # LoopEngine's, which the predicted step is made with
        def tool_kind(self, tool: str, info: ResultInfo = ..., arguments: Any = ...) -> str: ...

        def _custom_call_sig(self, tool: str, arguments: Any, builtin: str) -> str: ...

    def precheck(self, run: RunState, tool: str, arguments: Any) -> Decision:
        """Return what running this call *again* would lead to, before it runs (enforce mode).

        Assumes the call repeats its latest outcome in this run (the same result, or the same
        error; a call not seen yet has an unknown, uncaptured result) and runs the detectors on
        copies of their states with that hypothetical call, so the prediction is what detection
        would decide: a call whose next identical outcome would reach a threshold gets that
        action now, and a guard can block the call that would be one too many. Budgets count
        this call. Does not change the run's state. The call is taken to be of the model turn
        of the run's latest call: a call issued with a failing one, in the same reply, is no
        retry of it (``failure``); that a new turn has begun is not known before its calls.

        Calls still running (``call_started``) count as if they had ended first, as predicted:
        identical ones as repeats of the same outcome (of a repeated result, when none is known
        yet and their results are captured), in every detector; the others in the detectors
        that copy their whole state (the budgets), since the narrower copies hold only what
        this call's signature touches.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            check_reentry(run)
        running = self._running(run)
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
        running = self._running(run)
        step = self._hypothetical(run, tool, arguments, running, captured=captured)
        step.arguments = None  # kept for as long as the call runs: only its digests
        run.in_flight.add(key, step)

    @staticmethod
    def _running(run: RunState) -> list[Step]:
        """Return the predicted steps of the calls still running, as the run now stands.

        A call that started before any identical call had ended was predicted with a result
        not known yet (``_RUNNING_RESULT``); once one of them has ended, the others repeat its
        outcome. Kept as predicted, they differed from it, so each call that ended restarted
        the count: with 32 threads, 4 or 5 identical calls ran where ``stagnation_stop = 4``
        lets 3.
        """
        if not run.in_flight.calls:
            return []
        running = list(run.in_flight.steps())
        outcomes = run.outcomes
        for at, step in enumerate(running):
            if step.result_sig is _RUNNING_RESULT and step.call_sig in outcomes:
                running[at] = replace(step, **_repeat_of(step.call_sig, outcomes[step.call_sig],
                                                         step.version))
        return running

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
        _, error, kind, _, unchanged, seen_in = outcome
        return Step(**common, **_repeat_of(call_sig, outcome, version),
                    target=self._tool_kinds.target(tool, kind, error, args, arguments),
                    unchanged=unchanged + (seen_in != version))


def _repeat_of(call_sig: str, outcome: tuple[Any, ...], version: int) -> dict[str, Any]:
    """Return the fields of a step that repeats ``outcome``, the latest of ``call_sig``."""
    result, error, kind, empty, _, _ = outcome
    error_class, reason = classify_error(error) if error else (None, "")
    key = call_sig + ":" + result if result else call_sig
    return {"kind": kind, "has_result": bool(result), "result_sig": result, "error": error,
            "error_class": error_class, "error_reason": reason, "empty": empty,
            "pair": in_world(key, version), "outcome": key}
