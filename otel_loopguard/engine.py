"""The detection engine: per-run state, tool calls in, decisions out.

The engine is shared by the span processor, ``check`` and ``serve``. It holds no runs itself:
callers keep one :class:`RunState` per run and serialise calls on it (``RunState.lock``).
"""

from __future__ import annotations

import fnmatch
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors import HandoffDetector, make_default_detectors
from otel_loopguard.detectors._base import ladder
from otel_loopguard.detectors._step import Step
from otel_loopguard.detectors.failure import classify_error
from otel_loopguard.exceptions import LoopGuardError
from otel_loopguard.policy import Policy
from otel_loopguard.signature import (
    ResultInfo,
    VolatileMatcher,
    analyze_result,
    canonical_args,
    digest,
)
from otel_loopguard.types import Action, Decision, Detector, Evidence, Handoff, ToolCall

__all__ = ["InFlight", "LoopEngine", "RunState"]

_MASK_RE: Final = re.compile(r"\b[0-9a-f]{12,}\b|\d{5,}|\d{4}-\d{2}-\d{2}[T ][\d:.]+\S*",
                             re.IGNORECASE)
_NO_RESULT: Final = ResultInfo(digest="")
_CONTAINED: Final = (Exception, SystemExit)
"""What a user callback may raise without it reaching the app: a ``sys.exit()`` in a callback
called from ``span.end()`` must not end the span's thread or skip the downstream processor
(KeyboardInterrupt still goes through)."""
_RESULT_CACHE_MAX: Final = 16
"""Most recent result texts per run whose analysis is reused (a loop repeats its results)."""


_MAX_IN_FLIGHT: Final = 1024
"""Guarded calls a run counts as running at once; past it the oldest is forgotten."""


class InFlight:
    """The guarded calls of one run that have started and not yet been processed.

    Enforce mode lets a call run only after ``precheck``; while it runs it is not in the run's
    counters yet, so the guard registers it here (``LoopEngine.call_started``) and ``precheck``
    counts it: 32 parallel calls then meet the budget and the repetition ladders as 32 calls.
    Calls are registered under a key, the span id of their tool span (or of the span the guard
    saw, which parallel calls may share); ``process`` of a call with that span id, or
    ``LoopEngine.call_finished``, takes one call of the key out. Guarded by the run's lock, like
    the rest of ``RunState``.
    """

    __slots__ = ("by_key", "calls", "captured", "per_signature", "per_tool")

    def __init__(self) -> None:
        self.calls = 0
        """Calls running now."""
        self.by_key: dict[str, list[tuple[str, str, bool]]] = {}
        """Key → (tool, call signature, results captured) of each call running under it."""
        self.per_tool: dict[str, int] = {}
        self.per_signature: dict[str, int] = {}
        """Call signature → running calls with it."""
        self.captured: dict[str, int] = {}
        """Call signature → running calls with it whose result will be captured."""

    def tool(self, tool: str) -> int:
        """Return how many calls of ``tool`` are running."""
        return self.per_tool.get(tool, 0)

    def signature(self, call_sig: str) -> int:
        """Return how many calls with this call signature are running."""
        return self.per_signature.get(call_sig, 0)

    def add(self, key: str, tool: str, call_sig: str, captured: bool) -> None:
        """Count one more call running under ``key``."""
        if self.calls >= _MAX_IN_FLIGHT:
            self.remove(next(iter(self.by_key)))
        self.by_key.setdefault(key, []).append((tool, call_sig, captured))
        self.calls += 1
        _bump(self.per_tool, tool, 1)
        _bump(self.per_signature, call_sig, 1)
        if captured:
            _bump(self.captured, call_sig, 1)

    def remove(self, key: str) -> None:
        """Stop counting one call running under ``key`` (nothing when there is none)."""
        entries = self.by_key.get(key)
        if not entries:
            return
        tool, call_sig, captured = entries.pop()
        if not entries:
            del self.by_key[key]
        self.calls -= 1
        _bump(self.per_tool, tool, -1)
        _bump(self.per_signature, call_sig, -1)
        if captured:
            _bump(self.captured, call_sig, -1)


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value:
        counts[key] = value
    else:
        counts.pop(key, None)


class RunState:
    """Everything the engine remembers about one run. Bounded; guarded by ``lock``."""

    __slots__ = ("calls", "explicit_handoffs", "handoff_state", "highest", "hinted",
                 "in_flight", "last_agent", "last_end_ns", "last_turn", "lock", "notifying",
                 "outcomes", "per_tool", "results", "states", "stopped")

    def __init__(self, states: tuple[Any, ...], handoff_state: Any) -> None:
        """Hold fresh detector states."""
        self.lock = threading.Lock()
        self.states = states
        self.handoff_state = handoff_state
        self.calls = 0
        self.highest = Action.CONTINUE
        self.stopped: Decision | None = None
        self.last_end_ns = -1
        self.last_turn: int | None = None
        self.last_agent: str | None = None
        self.explicit_handoffs = False
        self.outcomes: dict[str, _Outcome] = {}
        """Call signature → its latest outcome streak, for ``precheck`` (bounded)."""
        self.per_tool: dict[str, int] = {}
        self.results: dict[tuple[int, int], ResultInfo] = {}
        """(length, hash) of the run's latest result texts → their analysis (bounded)."""
        self.hinted = False
        """Enforce mode, ``hint_then_abort``: a hint was already given in this run."""
        self.notifying = 0
        """The id of the thread running ``on_decision`` for this run (0: none)."""
        self.in_flight = InFlight()
        """Guarded calls that started and have not been processed yet (enforce mode)."""

    def in_callback(self) -> bool:
        """Return True on the thread that is running ``on_decision`` for this run.

        Whoever holds the run's ``lock`` to call the engine checks this first: the callback runs
        under that lock, so taking it again on that thread would deadlock.
        """
        return self.notifying == threading.get_ident()


_RESET_SLOTS: Final = tuple(n for n in RunState.__slots__ if n not in ("lock", "notifying"))
"""What ``LoopEngine.reset`` replaces: everything but the lock and the callback marker."""


class _Outcome:
    """The streak of identical outcomes of one call signature (successes or failures)."""

    __slots__ = ("error_class", "error_key", "result", "streak")

    def __init__(self, result: str, error_key: str | None, error_class: str | None) -> None:
        self.result, self.error_key, self.error_class, self.streak = (
            result, error_key, error_class, 1)

    def same_as(self, result: str, error_key: str | None) -> bool:
        return self.result == result and self.error_key == error_key


_RUNNING: Final = _Outcome("\x00running", None, None)
_RUNNING.streak = 0
"""The outcome ``precheck`` assumes for identical calls still running when none has ended."""


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
        self._in_callback = threading.local()
        self._near_duplicates = "near_duplicate" in self.config.detectors
        self._plain_policy = type(self.policy) is Policy
        self._result_cache_size = max(2, min(_RESULT_CACHE_MAX, self.config.cycle_max_length))
        self._observers = tuple(detector.observe for detector in self.detectors)
        self._max_chars = self.config.max_value_chars

    def new_run(self) -> RunState:
        """Return the state of a new run."""
        return RunState(tuple(d.new_state() for d in self.detectors),
                        self.handoffs.new_state() if self.handoffs else None)

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

    def summary(self, run: RunState) -> dict[str, Any]:
        """Return the counts of ``run`` (seed 004's ``summary()``), for logging at its end.

        ``tool_calls``; ``unique_call_signatures``, the distinct calls among the last 1,024
        kept; ``action``, the highest the run reached; ``max_tool_calls``, the run's tool-call
        budget (the stop limit, else the warn limit, else None) and ``budget_remaining``, the
        calls left before it (None without a budget).
        """
        cfg = self.config
        limit = cfg.max_tool_calls_stop if cfg.max_tool_calls_stop is not None \
            else cfg.max_tool_calls_warn
        return {"tool_calls": run.calls, "unique_call_signatures": len(run.outcomes),
                "action": run.highest.label, "max_tool_calls": limit,
                "budget_remaining": None if limit is None else max(0, limit - run.calls)}

    def process(self, run: RunState, call: ToolCall) -> Decision:
        """Observe one finished tool call of ``run`` and return the decision on it.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        if run.in_flight.calls:
            run.in_flight.remove(call.span_id)
        step = self.make_step(run, call)
        self._remember_outcome(run, step)
        evidence: list[Evidence] = []
        if call.agent and call.agent != run.last_agent:
            implicit = self._agent_change(run, call)
            if implicit is not None:
                evidence.append(implicit)
        for observe, state in zip(self._observers, run.states, strict=True):
            found = observe(state, step)
            if found is not None:
                evidence.append(found)
        if not evidence and run.stopped is None and self._plain_policy:
            # the common case, as Policy.decide and _finish would conclude it
            return Decision(Action.CONTINUE, "OK", (), "", step.index, step.tool, step.span_id)
        return self._finish(run, evidence, step.tool, step.index, step.span_id)

    def precheck(self, run: RunState, tool: str, arguments: Any) -> Decision:
        """Return what running this call *again* would lead to, before it runs (enforce mode).

        Assumes the call repeats its latest outcome (the same result, or the same error): a
        call whose next identical outcome would reach a threshold gets that action now, so a
        guard can block the call that would be one too many. Budgets count this call, and the
        ladders and budgets count the calls still running (``RunState.in_flight``): each running
        call of the same signature as one more repeat of its outcome (of a repeated result when
        none is known yet and results are captured). Does not change the run's state.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        call_sig = self.call_signature(tool, arguments)
        kind = self.tool_kind(tool)
        if kind == "exempt":
            return self.policy.decide((), tool=tool, call_index=run.calls + 1, span_id="")
        evidence = [e for e in (self._predict_outcome(run, tool, kind, call_sig),
                                self._predict_budget(run, tool)) if e is not None]
        decision = self.policy.decide(evidence, tool=tool, call_index=run.calls + 1,
                                      span_id="")
        if self.config.mode == "enforce" and run.stopped is not None and \
                decision.action < Action.STOP:
            prior = run.stopped
            decision = Decision(action=Action.STOP, code=prior.code, evidence=prior.evidence,
                                hint=prior.hint, call_index=run.calls + 1, tool=tool)
        return decision

    def call_signature(self, tool: str, arguments: Any) -> str:
        """Return what identifies a call of ``tool`` with ``arguments`` (its call signature).

        The ``signature`` hook's text when there is one, else the canonical arguments.
        """
        call_sig = digest(tool + "\x00" + self._canonical_args(arguments)[1])
        if self.signature is not None:
            call_sig = self._custom_call_sig(tool, arguments, call_sig)
        return call_sig

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
        run.in_flight.add(key, tool, self.call_signature(tool, arguments), captured)

    @staticmethod
    def call_finished(run: RunState, key: str) -> None:
        """Stop counting a call running under ``key`` (nothing if ``process`` already did)."""
        run.in_flight.remove(key)

    def _predict_outcome(self, run: RunState, tool: str, kind: str,
                         call_sig: str) -> Evidence | None:
        running = run.in_flight.signature(call_sig) if run.in_flight.calls else 0
        outcome = run.outcomes.get(call_sig)
        if outcome is None:
            if not run.in_flight.captured.get(call_sig):
                return None
            outcome = _RUNNING  # identical calls running: assume they return the same result
        cfg, count = self.config, outcome.streak + running + 1
        details: dict[str, Any] = {"call": call_sig[:8], "predicted": True}
        if outcome.error_key is not None:
            if kind == "mutating":
                action = ladder(count, cfg.threshold(tool, "mutating_failure_warn"), None,
                                cfg.threshold(tool, "mutating_failure_stop"))
                if action is Action.STOP:
                    return Evidence("mutating_failure", "MUTATING_FAILURE", action, tool, count,
                                    details)
            if outcome.error_class == "permanent":
                action = ladder(count, None, None,
                                cfg.threshold(tool, "failure_permanent_same_args_stop"))
                return Evidence("failure", "PERMANENT_FAILURE", action, tool, count,
                                {**details, "error_class": "permanent"}) if action else None
            action = ladder(count, cfg.threshold(tool, "failure_retryable_warn"), None,
                            cfg.threshold(tool, "failure_retryable_stop"))
            return Evidence("failure", "REPEATED_FAILURE", action, tool, count,
                            {**details, "error_class": "retryable"}) if action else None
        if not outcome.result:
            return None  # results not captured: repetition alone never stops
        if kind == "poll":
            action = ladder(count, cfg.threshold(tool, "poll_warn"), None,
                            cfg.threshold(tool, "poll_stop"))
            code = "POLL_STAGNANT"
        else:
            action = ladder(count, cfg.threshold(tool, "stagnation_warn"),
                            cfg.threshold(tool, "stagnation_replan"),
                            cfg.threshold(tool, "stagnation_stop"))
            code = "STAGNANT_RESULT"
        return Evidence("stagnation", code, action, tool, count, details) if action else None

    def _predict_budget(self, run: RunState, tool: str) -> Evidence | None:
        cfg = self.config
        limit = cfg.max_tool_calls_stop
        calls = run.calls + run.in_flight.calls + 1
        if limit is not None and calls >= limit:
            return Evidence("budget", "BUDGET_EXHAUSTED", Action.STOP, tool, calls,
                            {"budget": "run", "limit": limit, "predicted": True})
        limit = cfg.threshold(tool, "max_calls_per_tool_stop")
        count = run.per_tool.get(tool, 0) + run.in_flight.tool(tool) + 1
        if limit is not None and count >= limit:
            return Evidence("budget", "BUDGET_EXHAUSTED", Action.STOP, tool, count,
                            {"budget": "tool", "limit": limit, "predicted": True})
        return None

    @staticmethod
    def _remember_outcome(run: RunState, step: Step) -> None:
        run.per_tool[step.tool] = run.per_tool.get(step.tool, 0) + 1
        outcome = run.outcomes.pop(step.call_sig, None)
        error_key = step.error
        if outcome is not None and outcome.same_as(step.result_sig, error_key):
            outcome.streak += 1
        else:
            outcome = _Outcome(step.result_sig, error_key, step.error_class)
        run.outcomes[step.call_sig] = outcome
        if len(run.outcomes) > 1024:
            del run.outcomes[next(iter(run.outcomes))]
        if len(run.per_tool) > 1024:
            del run.per_tool[next(iter(run.per_tool))]

    def process_handoff(self, run: RunState, handoff: Handoff) -> Decision:
        """Observe one explicit handoff of ``run``.

        Raises:
            LoopGuardError: when called from ``on_decision`` for the same run.
        """
        if run.notifying:
            _check_reentry(run)
        run.explicit_handoffs = True
        run.last_agent = handoff.to_agent
        found = self.handoffs.observe(run.handoff_state, handoff) if self.handoffs else None
        return self._finish(run, [found] if found else [], "handoff", run.calls, handoff.span_id)

    def make_step(self, run: RunState, call: ToolCall) -> Step:
        """Return the normalised step of ``call`` and advance the run's counters."""
        run.calls += 1
        info = self._result_info(run, call.result) if call.has_result else _NO_RESULT
        if self.result_signature is not None and call.has_result:
            info = self._custom_result_info(call.tool, call.result, info)
        error = self._error_text(call, info) if call.error or info.error is not None else None
        error_class, reason = classify_error(error) if error is not None else (None, "")
        new_batch = self._new_batch(run, call)
        try:
            args, canonical = canonical_args(call.arguments, max_value_chars=self._max_chars)
        except (ValueError, TypeError, RecursionError) as exc:  # pathological values still sign
            args, canonical = None, "\x00unsignable:" + type(exc).__name__
        tool = call.tool
        call_sig = digest(tool + "\x00" + canonical)
        if self.signature is not None:
            call_sig = self._custom_call_sig(tool, call.arguments, call_sig)
        kind = self._kinds.get(tool)
        if kind is None or (info.in_progress and kind == "default"):
            kind = self.tool_kind(tool, info)
        # positional: keyword arguments cost a third more on this per-call path
        return Step(run.calls, tool, kind, call_sig, call.has_result,
                    info.digest, error, error_class, reason, info.empty, call.span_id,
                    call.start_time_ns, call.end_time_ns, new_batch,
                    call_sig + ":" + info.digest if call.has_result else call_sig,
                    args if self._near_duplicates else None, call.turn or 0)

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
        key = (len(result), hash(result))
        cache = run.results
        info = cache.get(key)
        if info is None:
            info = analyze_result(result, self._volatile_matcher, max_value_chars=self._max_chars)
            cache[key] = info
            if len(cache) > self._result_cache_size:
                del cache[next(iter(cache))]
        return info

    def tool_kind(self, tool: str, info: ResultInfo = _NO_RESULT) -> str:
        """Return ``read``, ``mutating``, ``poll``, ``exempt`` or ``default`` for ``tool``."""
        kind = self._kinds.get(tool)
        if kind is None:
            kind = self._infer_kind(tool)
            if len(self._kinds) < 4096:
                self._kinds[tool] = kind
        if kind == "default" and info.in_progress and self.config.tool_kind(tool) is None:
            return "poll"
        return kind

    def _infer_kind(self, tool: str) -> str:
        cfg = self.config
        configured = cfg.tool_kind(tool)
        if configured is not None:
            return configured
        base = tool.rsplit("__", 1)[-1]
        if tool in cfg.mutating_tools or base in cfg.mutating_tools:
            return "mutating"
        if tool in cfg.read_tools or base in cfg.read_tools:
            return "read"
        lowered = tool.lower()
        if any(fnmatch.fnmatchcase(lowered, p) for p in cfg.poll_tool_patterns):
            return "poll"
        return "default"

    def _canonical_args(self, arguments: Any) -> tuple[Any, str]:
        """``canonical_args`` that never raises (``make_step`` inlines it)."""
        try:
            return canonical_args(arguments, max_value_chars=self._max_chars)
        except (ValueError, TypeError, RecursionError) as exc:  # pathological values still sign
            return None, "\x00unsignable:" + type(exc).__name__

    @staticmethod
    def _error_text(call: ToolCall, info: ResultInfo) -> str | None:
        if call.error:
            text = call.error_message or (str(call.result)[:500] if call.has_result else "") or \
                "error"
        elif info.error is not None:
            text = info.error
        else:
            return None
        return " ".join(_MASK_RE.sub("#", text[:500]).split())

    @staticmethod
    def _new_batch(run: RunState, call: ToolCall) -> bool:
        if call.turn is not None:
            new = call.turn != run.last_turn
            run.last_turn = call.turn
        else:
            new = call.start_time_ns >= run.last_end_ns or call.start_time_ns == 0
        run.last_end_ns = max(run.last_end_ns, call.end_time_ns)
        return new

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


def _check_reentry(run: RunState) -> None:
    """Raise when this thread is inside ``on_decision`` for ``run`` (it holds the run's lock)."""
    if run.in_callback():
        raise LoopGuardError(
            "on_decision must not feed the run it was called for (process, precheck, "
            "process_handoff or a guarded tool call of that run inside the callback); do that "
            "work after the callback returns")
