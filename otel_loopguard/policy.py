"""The policy: combine the detectors' evidence on one call into a decision with a hint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from otel_loopguard.detectors.failure import UNCLASSIFIED
from otel_loopguard.types import Action, Decision, Evidence

__all__ = ["NO_PROGRESS_DETECTORS", "PATTERN_DETECTORS", "Policy", "render_hint"]

PATTERN_DETECTORS: Final = frozenset({"repeat", "cycle", "near_duplicate"})
"""Evidence that the agent repeats a pattern."""
NO_PROGRESS_DETECTORS: Final = frozenset({"stagnation", "failure", "mutating_failure"})
"""Evidence that the agent makes no progress."""
_PRIORITY: Final = ("handoff", "failure", "mutating_failure", "stagnation", "cycle",
                    "near_duplicate", "repeat", "reread", "batch", "idle_turns", "budget")

_ADVICE: Final = {
    Action.WARN: "Consider a different approach.",
    Action.REPLAN: "Stop and re-plan: change the arguments, use a different tool or source, "
                   "or report what is blocking you.",
    Action.STOP: "Do not call it again: answer with what you have, or report the blocker.",
}


def _tools(details: Any) -> str:
    tools = list(dict.fromkeys(details.get("cycle_tools", [])))
    return " -> ".join(tools) if tools else "tools"


def _spent(evidence: Evidence) -> str:
    """Return what a budget warning counts: tool calls, steps or seconds, and the budget."""
    budget, limit = evidence.details.get("budget"), evidence.details.get("limit")
    if budget == "steps":
        return f"taken {evidence.count} steps, tool calls and model turns (step budget {limit})"
    if budget == "seconds":
        return f"run for {evidence.details.get('seconds')} s (budget {limit} s)"
    if budget == "tool":
        return f'called "{evidence.tool}" {evidence.count} times (per-tool budget {limit})'
    return f"used {evidence.count} tool calls ({budget} budget {limit})"


def _exhausted(evidence: Evidence) -> str:
    """Return the hint of a stop budget: which budget, and to stop calling tools (or that one)."""
    budget, limit, tool = evidence.details.get("budget"), evidence.details.get("limit"), \
        evidence.tool
    if budget == "tool":
        return (f'This run has used its budget of {limit} calls of "{tool}". Do not call '
                f'"{tool}" again: answer with what you have, or use another tool.')
    what = {"run": f"{limit} tool calls", "steps": f"{limit} steps (tool calls and model turns)",
            "seconds": f"{limit} s"}.get(str(budget), f"{budget} {limit}")
    return (f"This run has used its budget of {what}. Make no more tool calls: answer with "
            "what you have, or report the blocker.")


def _compared(evidence: Evidence) -> bool:
    """Return False when the evidence compared calls alone (results were not captured)."""
    return bool(evidence.details.get("outcomes_compared", True))


_TEMPLATES: Final[dict[str, Callable[[Evidence], str]]] = {
    "STAGNANT_RESULT": lambda e: (
        f'You have called "{e.tool}" with the same arguments {e.count} times and got the same '
        "result each time; repeating it will not change the result."),
    "NO_EFFECT": lambda e: (
        f'"{e.tool}" has returned the identical result after each of your last '
        f'{e.details.get("state_changes")} changes; they have not changed its outcome. Re-read '
        "the output before the next change."),
    "STALLED_RESULT": lambda e: (
        f"Your last {e.count} tool calls, with different arguments, all returned the identical "
        "result; changing the query this way learns nothing new. Use what you already have, "
        "or report what is blocking you."),
    "POLL_STAGNANT": lambda e: (
        f'"{e.tool}" has reported the same state {e.count} times in a row; the job may be stuck. '
        "Wait longer between checks or report that it is not progressing."),
    "REPEATED_CALL": lambda e: (
        f'You have made the same change with "{e.tool}" {e.count} times in a row; each call '
        "applies it again. Check the current state instead of repeating it."
        if e.details.get("back_to_back") else
        f'You have called "{e.tool}" with identical arguments {e.count} times in the last '
        f'{e.details.get("window", "few")} calls.'),
    "CYCLE_DETECTED": lambda e: (
        f"You have repeated the same sequence of {e.details.get('cycle_length')} steps "
        f"({_tools(e.details)}) {e.count} times in a row"
        + (" with the same results" if _compared(e) else "")
        + "; break the cycle."),
    "REPEATED_BLOCK": lambda e: (
        f"You have repeated the same {e.details.get('cycle_length')} calls ({_tools(e.details)}) "
        f"{e.count} times with the same results, with other calls in between; break the loop."),
    "PERMANENT_FAILURE": lambda e: (
        f'"{e.tool}" failed {e.count} times with the same permanent error '
        f'({e.details.get("error_reason")}), each time with other input; more alternatives '
        "are unlikely to help. Confirm the input with the user, or report the blocker."
        if e.details.get("ladder") == "any_target" else
        f'"{e.tool}" failed {e.count} times with the same permanent error '
        f'({e.details.get("error_reason")}); retrying will fail again. Fix the arguments or '
        "permissions, or use another tool."),
    "REPEATED_FAILURE": lambda e: (
        f'"{e.tool}" keeps failing with the same error, {e.count} times now; called the same '
        "way it will fail the same way. Read the error and change the arguments or the "
        "approach; if it persists, report the blocker."
        if e.details.get("error_reason") == UNCLASSIFIED else
        f'"{e.tool}" keeps failing with the same error ({e.details.get("error_reason")}), '
        f"{e.count} times now. Wait before retrying or use another source; if it persists, "
        "report that the service is unavailable."),
    "MUTATING_FAILURE": lambda e: (
        f'"{e.tool}" failed {e.count} times on the same target with the same error; the '
        "change cannot apply as written. Re-read the current state before trying a different "
        "change."),
    "REPEATED_READ": lambda e: (
        f'You have read the same {"unchanged content" if _compared(e) else "thing"} with '
        f'"{e.tool}" {e.count} times in this run; use what you already read instead of reading '
        "it again."),
    "REPEATED_BATCH": lambda e: (
        f"You issued the same {e.details.get('batch_size')} parallel tool calls in {e.count} "
        "recent turns with unchanged results; change the calls or proceed with what you have."),
    "HANDOFF_LOOP": lambda e: (
        f"The task has been handed around {' -> '.join(e.details.get('cycle', []))} "
        f"{e.count} times without progress; the current agent should finish it or report "
        "what is missing."),
    "NEAR_DUPLICATE": lambda e: (
        f'You have called "{e.tool}" {e.count} times with reworded arguments'
        + (" that return nothing new" if _compared(e) else "")
        + "; rewording will not help. Use what you already have, try a different tool or "
        "source, or report that the information is not available."),
    "IDLE_TURNS": lambda e: (
        f"You have answered {e.count} times in a row without calling a tool, and nothing "
        "changed in between. If your replies are being rejected, follow the required format "
        "exactly (call a tool the way the instructions say); otherwise give your final answer "
        "or report what is blocking you."),
    "BUDGET_WARNING": lambda e: f"This run has {_spent(e)}; wrap up soon.",
    "BUDGET_EXHAUSTED": _exhausted,
}
_ADVISED: Final = frozenset({"BUDGET_EXHAUSTED"})
"""Codes whose hint says what to do itself: the action's advice is not added."""


def render_hint(evidence: Evidence, action: Action) -> str:
    """Return the model-ready hint for ``evidence`` at ``action``: what repeats, what to do."""
    template = _TEMPLATES.get(evidence.code)
    text = template(evidence) if template else f'Loop detected on "{evidence.tool}".'
    if evidence.code in _ADVISED:
        return text
    return f"{text} {_ADVICE.get(action, '')}".strip()


def _rank(evidence: Evidence) -> tuple[int, int]:
    order = _PRIORITY.index(evidence.detector) if evidence.detector in _PRIORITY else 99
    return -int(evidence.action), order


def _escalates(evidence: Evidence) -> bool:
    """Whether ``evidence`` may take part in an escalation.

    Not a ``STALLED_RESULT`` (a warn only, its different calls are themselves the pattern), nor
    ``repeat``'s streak of one change applied back to back: the only such calls whose results
    ``stagnation`` also counts are browser actions (a scroll answered by the same
    acknowledgement each time), and then both count the same calls and the same outcome, one
    piece of evidence twice (as ``reread`` and ``batch`` are for ``stagnation``).
    """
    if evidence.code == "STALLED_RESULT":
        return False
    return not (evidence.detector == "repeat" and evidence.details.get("back_to_back"))


class Policy:
    """Combines evidence into a decision for one call.

    The strongest action wins, escalated one level when a repeating pattern and no progress are
    seen on the same call (``_escalates`` says which evidence does not count for it).

    Thread-safe: stateless.
    """

    def decide(self, evidence: Sequence[Evidence], *, tool: str, call_index: int,
               span_id: str) -> Decision:
        """Return the decision for one call (``continue`` when there is no evidence)."""
        evidence = [e for e in evidence if e.action > Action.CONTINUE]
        if not evidence:
            return Decision(action=Action.CONTINUE, call_index=call_index, tool=tool,
                            span_id=span_id)
        ranked = tuple(sorted(evidence, key=_rank))
        action = ranked[0].action
        detectors = {e.detector for e in ranked if _escalates(e)}
        escalated = bool(detectors & PATTERN_DETECTORS and detectors & NO_PROGRESS_DETECTORS
                         and action < Action.STOP)
        if escalated:
            action = Action(action + 1)
        return Decision(action=action, code=ranked[0].code, evidence=ranked,
                        hint=render_hint(ranked[0], action), call_index=call_index, tool=tool,
                        span_id=span_id, escalated=escalated)
