"""Idle turns: model turns of one agent invocation in a row that call no tool."""

from __future__ import annotations

from typing import ClassVar

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import _MAX_LISTED, DetectorBase
from otel_loopguard.types import REPLY_MARK, Action, Evidence, ModelTurn

__all__ = ["IdleTurnsDetector"]

_MAX_INPUTS = 32
"""Input digests an output-repeating streak keeps; past them, a user's message is new."""


class _IdleState:
    __slots__ = ("acted", "agent", "armed", "count", "end_ns", "feedback", "inputs", "output",
                 "pending", "same_feedback", "same_output", "span_ids")

    def __init__(self) -> None:
        self.count = 0
        """Idle turns in a row, the pending one excluded."""
        self.span_ids: list[str | int] = []
        """Span ids of the latest idle turns of the streak (at most ``_MAX_LISTED``): hex, or
        the number of a blank turn's (``observe_blank``), formatted only if a finding lists it."""
        self.pending: ModelTurn | None = None
        """The latest turn when it asked for tools and none has run yet."""
        self.feedback: set[str] = set()
        """The input digests of the streak's turns (at most ``_MAX_INPUTS``), while
        ``same_feedback``: its first turn's input and the feedback to each of its turns."""
        self.output = ""
        """The output digest of the streak's first turn."""
        self.same_feedback = False
        """Every turn after the streak's first got captured feedback the streak had seen: the
        same message each time, or the same few in turn (a harness that rejects answers with
        one of a few messages, by what each answer held)."""
        self.same_output = False
        """Every turn of the streak gave the same captured output."""
        self.inputs: set[str] = set()
        """The input digests of the streak's turns (at most ``_MAX_INPUTS``), while
        ``same_output``: a user's message among them is no new input when it comes again."""
        self.acted = 0
        """The run's tool calls and handoffs when the latest turn ended."""
        self.agent: str | None = None
        self.armed = False
        """True once the run is known to be an agent (agent span, tool call or tool request)."""
        self.end_ns = 0
        """When the latest turn ended."""


class IdleTurnsDetector(DetectorBase):
    """Warn when the model answers turn after turn without calling a tool, and repeats.

    A turn is idle when no tool call or handoff of the run follows it before the next model
    turn. A turn that asked for no tool call (its finish reasons or output messages say so),
    or whose span does not say, counts as idle from its end; a turn that asked for tools
    counts only once the next turn shows that none ran (the harness rejected the call). A tool
    call or a handoff ends the streak, and so does a turn of another agent invocation. Only
    agent runs count: a turn inside an agent span, or in a run that has called or requested
    tools, so a chain of plain model calls (summaries of chunks, say) stays quiet.

    The idle turns must also repeat, which needs their content (input and output messages):
    the same feedback comes back to the model each time (a harness rejecting its answer with
    the same message; the feedback to a turn is the next turn's last input message), or the
    model gives the same output each time, with no new message of the user's between (the
    same answer to each new question is an answer; a message the streak has seen before, the
    same notice or error again, is not new). A turn that breaks the repetition (a user's new
    reply, a new answer) starts a new streak, so an agent answering its user turn after turn
    is not idle, whatever it answers, and turns without content never reach the threshold.
    Warns at ``idle_turns_warn`` (4) repeating idle turns in a row and at every one after it,
    never more than warn (a model turn cannot be blocked).

    Not a tool-call ``Detector``: the engine calls ``observe_turn`` once per model turn, under
    the run's lock.
    """

    name: ClassVar[str] = "idle_turns"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config`` (``idle_turns_warn``)."""
        super().__init__(config)
        self.warn: int | None = self.config.idle_turns_warn

    def new_state(self) -> _IdleState:
        """Return the run's streak."""
        return _IdleState()

    def observe_turn(self, state: _IdleState, turn: ModelTurn, acted: int) -> Evidence | None:
        """Take one model turn; ``acted`` is the run's tool calls and handoffs so far.

        A turn that overlaps the one before it, with nothing in between, is the same model call
        seen twice (a framework's span around the SDK's span) or a parallel call: not a turn of
        its own.
        """
        if acted == state.acted and 0 < turn.start_time_ns < state.end_ns:
            state.end_ns = max(state.end_ns, turn.end_time_ns)
            return None
        counted = state.count
        state.end_ns = turn.end_time_ns
        if acted != state.acted or (turn.agent_span_id is not None
                                    and turn.agent_span_id != state.agent):
            state.count, state.span_ids, state.pending = 0, [], None  # the streak ended
            state.armed = state.armed or acted > 0
        elif state.pending is not None:  # the turn before this one was idle after all
            self._add(state, state.pending)
        state.acted, state.pending = acted, None
        if turn.agent_span_id is not None:
            state.agent = turn.agent_span_id
            state.armed = True
        if turn.requested_tools:  # idle only if no call follows it: known at the next turn
            state.armed = True
            state.pending = turn
        else:  # asked for none, or the span does not say: idle until a tool call follows
            self._add(state, turn)
        if not state.armed or self.warn is None or state.count < self.warn \
                or state.count == counted:  # a turn that waits adds nothing to report yet
            return None
        return self.evidence("IDLE_TURNS", Action.WARN, "", state.count, {
            "idle_turns": state.count,
            "turn_span_ids": [s if type(s) is str else format(s, "016x") for s in state.span_ids],
            "limit": self.warn})

    def observe_blank(self, state: _IdleState, span_id: int, start_ns: int, end_ns: int,
                      agent_span_id: str | None, *, acted: int, requested: bool = False) -> bool:
        """``observe_turn`` of a blank turn: no content; return False when it cannot be one.

        Most model spans (content is opt-in). A blank turn repeats nothing, so whatever came
        before (a pending turn too), the streak restarts with it alone: one turn, below any
        ``idle_turns_warn`` (at least 2), never a finding. Only what a later turn reads is
        kept: its end, the run's actions, its agent invocation, and its span id, a number
        formatted only if a finding lists it (``span_id``: the span's id, ``start_ns`` and
        ``end_ns`` its times, as ``ModelTurn`` has them).

        ``requested``: the turn asked for tools (by its finish reasons). It waits for the next
        turn to show whether a call followed, and then restarts the streak all the same; in
        the meantime it leaves the streak as it was. So it is a blank turn unless that streak
        still matters: a turn before it is pending (it would count now), or the streak already
        warns (it waits, as a turn with content would). Then nothing is changed and False
        returned: ``observe_turn`` takes the turn.
        """
        if acted == state.acted and 0 < start_ns < state.end_ns:  # the same call seen twice
            state.end_ns = max(state.end_ns, end_ns)
            return True
        if requested and acted == state.acted and (
                agent_span_id is None or agent_span_id == state.agent) and (
                state.pending is not None or (self.warn is not None and state.count >= self.warn)):
            return False  # the streak goes on through this turn: observe_turn's to judge
        state.end_ns, state.acted, state.pending = end_ns, acted, None
        if agent_span_id is not None:
            state.agent = agent_span_id
        # armed as observe_turn arms it: a run's actions arm it when they change, so
        # ``state.acted > 0`` already means armed
        state.armed = state.armed or requested or acted > 0 or agent_span_id is not None
        state.count, state.span_ids = 1, [span_id]
        state.output, state.same_output = "", False
        state.feedback.clear()
        return True

    @staticmethod
    def _add(state: _IdleState, turn: ModelTurn) -> None:
        """Add an idle turn to the streak if it repeats it, else start a new streak with it."""
        feedback = turn.input_sig
        if state.count == 1:
            # a user's short reply (``y``, ``next``) answers the model: the same one again is
            # no harness repeating its feedback
            state.same_feedback = bool(feedback) and not feedback.startswith(REPLY_MARK)
        elif state.count:
            state.same_feedback = state.same_feedback and feedback in state.feedback
        if state.count:  # an answer in words repeats only when what reached the model is
            # known: without its input, a user's new message may have come (absent is not the
            # same); a request for tools that never ran repeats whatever came; and after the
            # first feedback, a message of the user's that the streak has not seen is new
            # input: the same answer to it is an answer (an agent answering its user is not
            # idle), while the same notice or error sent again is nothing new
            state.same_output = state.same_output and turn.output_sig == state.output and (
                bool(turn.input_sig) or turn.requested_tools is True) and (
                state.count == 1 or not turn.user_input or turn.input_sig in state.inputs)
        if not state.count or not (state.same_feedback or state.same_output):
            state.count, state.span_ids = 0, []
            state.output, state.same_output = turn.output_sig, bool(turn.output_sig)
            state.inputs.clear()
            state.feedback.clear()
        if state.same_output and len(state.inputs) < _MAX_INPUTS:
            state.inputs.add(turn.input_sig)
        if (state.same_feedback or not state.count) and feedback \
                and not feedback.startswith(REPLY_MARK) and len(state.feedback) < _MAX_INPUTS:
            state.feedback.add(feedback)
        state.count += 1
        state.span_ids.append(turn.span_id)
        if len(state.span_ids) > _MAX_LISTED:
            del state.span_ids[0]
