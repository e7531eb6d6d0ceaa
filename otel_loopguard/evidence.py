"""The ``loopguard.*`` attributes that describe a decision, for spans, events and logs.

Built in one place for every path (the live processor, ``serve``'s forwarded spans, the
enforce-mode guard and the framework integrations). Never raw arguments or results.
"""

from __future__ import annotations

from typing import Any, Final

from otel_loopguard.types import Decision

__all__ = ["EVENT_NAME", "evidence_attributes"]

EVENT_NAME: Final = "loopguard.loop_detected"
"""Name of the span event (and log event) that carries a finding."""


def evidence_attributes(decision: Decision, run_id: str, mode: str) -> dict[str, Any]:
    """Return the ``loopguard.*`` attributes describing a decision (no raw payloads)."""
    top = decision.evidence[0] if decision.evidence else None
    attrs: dict[str, Any] = {
        "loopguard.action": decision.action.label, "loopguard.code": decision.code,
        "loopguard.detector": decision.detector, "loopguard.run_id": run_id,
        "loopguard.hint": decision.hint, "loopguard.mode": mode,
        "loopguard.call_index": decision.call_index,
        "loopguard.escalated": decision.escalated,
    }
    if top is not None:
        attrs["loopguard.count"] = top.count
        repeats = top.details.get("repeats_span_ids")
        if repeats:
            attrs["loopguard.repeats_span_ids"] = [str(s) for s in repeats]
        for key in ("call", "result"):
            if key in top.details:
                attrs[f"loopguard.{key}_signature"] = str(top.details[key])
    return attrs
