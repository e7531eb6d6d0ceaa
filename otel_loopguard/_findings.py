"""A finding's two parts: the loop it reports and the budget it hits.

Budgets are not loops (docs/detectors.md): a budget finding is reported and acted on like any
finding, but it does not mark a run as looping. A decision can carry both kinds of evidence on
one call; metrics and ``check`` count each part in its own place, so a run over budget never
counts as a looping run, and a loop found on the call that also hit a budget still does.
"""

from __future__ import annotations

from otel_loopguard.types import BUDGET_DETECTOR, Action, Decision, Evidence

__all__ = ["BUDGET_DETECTOR", "budget_part", "loop_action", "loop_detector"]


def loop_action(decision: Decision) -> Action:
    """Return the action ``decision`` takes on loop evidence alone (``continue``: none).

    The policy's escalation (a repeating pattern and no progress on the same call) comes from
    loop evidence, so it applies to this part, never past ``stop``.
    """
    found = [e.action for e in decision.evidence if e.detector != BUDGET_DETECTOR]
    if not found or not decision.flagged:
        return Action.CONTINUE
    return Action(min(max(found) + decision.escalated, Action.STOP))


def loop_detector(decision: Decision) -> str:
    """Return the detector of the strongest loop evidence of ``decision`` (``""``: none)."""
    return next((e.detector for e in decision.evidence if e.detector != BUDGET_DETECTOR), "")


def budget_part(decision: Decision) -> Evidence | None:
    """Return the budget evidence of ``decision``, if a budget was reached on this call."""
    return next((e for e in decision.evidence if e.detector == BUDGET_DETECTOR), None)
