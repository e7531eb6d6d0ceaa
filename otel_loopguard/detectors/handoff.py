"""Detector of agent handoff ping-pong: the same directed cycle of agents closing twice.

Every convention feeds it the same way: explicit handoff spans, handoff tools (ADK's
``transfer_to_agent``, LlamaIndex's ``handoff``, Strands' ``handoff_to_agent``) and, when a
run has neither, changes of the agent that invokes tools. The rule:

- keep the sequence of agents control passed through (a handoff's source starts it; each
  handoff appends its target);
- collapse an agent following itself (a handoff reported twice, a handoff to the agent already
  in control);
- when a handoff leaves from an agent other than the one in control (a supervisor handing work
  out again after a worker returned to it unseen), start a new sequence there;
- fire when the latest agents are the same directed cycle closed twice, back to back
  (triage → billing → triage → billing → triage): a single handoff and a single there-and-back
  stay quiet;
- forget the sequence (keeping the agent in control) when a tool call brings something new (a
  result its call had not returned before, or a successful change), a model turn says
  something the run has not said before (content captured), or a handoff tool hands over a
  message the run has not handed over before (Strands' ``message`` and ``context``): agents
  that do new work between handoffs are delegating or discussing, not handing the task back
  and forth.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from otel_loopguard.detectors._base import DetectorBase
from otel_loopguard.types import Action, Evidence, Handoff

__all__ = ["HandoffDetector"]

_MAX_OUTPUTS = 256
"""Model outputs a run remembers for telling a new contribution from a repeated one."""


class _HandoffState:
    __slots__ = ("agents", "said", "size", "span_ids")

    def __init__(self, window: int) -> None:
        self.said: dict[str, None] = {}
        """Digests of the model outputs the run has produced (bounded): a new one is work."""
        self.size = window + 1
        self.agents: deque[str] | tuple[str, ...] = ()
        """Agents in control, oldest first, no agent twice in a row; a deque from the run's
        first handoff (most runs have none, and an empty deque holds ~0.75 KB)."""
        self.span_ids: deque[str] | tuple[str, ...] = ()
        """Span id of the handoff that reached each agent (``""`` for the first)."""


class HandoffDetector(DetectorBase):
    """The same directed cycle of agents closed twice in a row: stop (see the module rule).

    Looks at the last ``handoff_window`` handoffs, cycles of 2 to ``handoff_max_cycle`` agents;
    stops at ``handoff_stop`` closures. Not thread-safe: called under the run's lock.
    """

    name: ClassVar[str] = "handoff"

    def new_state(self) -> _HandoffState:
        """Return the run's sequence of agents."""
        return _HandoffState(self.config.handoff_window)

    def observe(self, state: _HandoffState, step: Handoff) -> Evidence | None:
        """Add one handoff and report a cycle closed again."""
        agents, source, target = state.agents, step.from_agent, step.to_agent
        if not target or (agents and target == agents[-1]):
            return None  # an agent following itself
        if not isinstance(agents, deque):
            agents = state.agents = deque(maxlen=state.size)
            state.span_ids = deque(maxlen=state.size)
        span_ids = state.span_ids
        assert isinstance(span_ids, deque)  # made with agents
        if step.note:  # what it hands over: new, it is work done (a draft, new feedback)
            self.said(state, step.note)
        if source and agents and source != agents[-1]:
            agents.clear()  # control came back to the source by a path we did not see
            span_ids.clear()
        if not agents and source and source != target:
            agents.append(source)
            span_ids.append("")
        agents.append(target)
        span_ids.append(step.span_id)
        period, closures = self._closures(agents)
        if not period:
            return None
        action = Action.STOP if closures >= self.config.handoff_stop else Action.CONTINUE
        cycle = list(agents)[-period - 1:]
        spans = [s for s in list(span_ids)[-period * closures:] if s]
        return self.evidence("HANDOFF_LOOP", action, "handoff", closures, {
            "cycle": cycle, "cycles": closures, "repeats_span_ids": spans})

    @staticmethod
    def progress(state: _HandoffState) -> None:
        """Forget the handoffs before a tool call that brought something new.

        Agents handing a task back and forth is a loop only when nothing is done in between:
        an orchestrator that delegates to one agent and then another, each doing new work, is
        delegation, however often control comes back. The agent in control stays.
        """
        agents, span_ids = state.agents, state.span_ids
        if len(agents) > 1 and isinstance(agents, deque) and isinstance(span_ids, deque):
            last_agent, last_span = agents[-1], span_ids[-1]
            agents.clear()
            span_ids.clear()
            agents.append(last_agent)
            span_ids.append(last_span)

    def said(self, state: _HandoffState, output_sig: str) -> None:
        """Note a model turn's output; something new said is work done.

        A group chat's next contribution counts as a tool call's new result does
        (``progress``); the same output again does not.
        """
        if output_sig in state.said:
            return
        state.said[output_sig] = None
        if len(state.said) > _MAX_OUTPUTS:
            del state.said[next(iter(state.said))]
        self.progress(state)

    def _closures(self, agents: deque[str]) -> tuple[int, int]:
        """Return (cycle length, closures in a row) of the cycle closed most often, or (0, 0).

        A cycle of ``p`` agents has closed ``c`` times in a row when the last ``p * c + 1``
        agents repeat with period ``p``; of equal counts, the shortest cycle wins.
        """
        seq = list(agents)
        best = (0, 0)
        for period in range(2, min(self.config.handoff_max_cycle, len(seq) - 1) + 1):
            closures = (_periodic_suffix(seq, period) - 1) // period
            if closures > best[1]:
                best = (period, closures)
        return best


def _periodic_suffix(seq: list[str], period: int) -> int:
    """Return the length of the longest suffix of ``seq`` with period ``period``."""
    size = len(seq)
    length = period  # any ``period`` items are periodic
    while length < size and seq[size - 1 - length] == seq[size - 1 - length + period]:
        length += 1
    return min(length, size)
