"""Value objects and extension-point protocols shared by every part of otel-loopguard.

The value objects are read-only by convention, not frozen (and so not hashable): one or more
of them is built for every span and tool call, and a plain slotted dataclass is built several
times faster than a frozen one, whose ``__init__`` sets each field through
``object.__setattr__``. Never change one that loopguard handed you (a ``Decision`` given to
``on_decision`` is also the run's); ``ToolCall.in_context`` makes a changed copy.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

__all__ = [
    "Action",
    "Clock",
    "Decision",
    "Detector",
    "Evidence",
    "Handoff",
    "ModelTurn",
    "SpanAdapter",
    "SpanRecord",
    "ToolCall",
]


class Action(enum.IntEnum):
    """What the policy recommends for a tool call, ordered by severity."""

    CONTINUE = 0
    WARN = 1
    REPLAN = 2
    STOP = 3

    @property
    def label(self) -> str:
        """Return the lower-case name used in JSON, metrics and span attributes."""
        return self.name.lower()

    def __str__(self) -> str:
        """Return the label (``print(decision.action)`` says ``stop``, not ``3``)."""
        return self.label

    def __format__(self, spec: str) -> str:
        """Format as the label (``f"{action}"``); with a format spec, as the number."""
        return self.label if not spec else format(self.value, spec)

    @classmethod
    def parse(cls, value: str) -> Action:
        """Return the action named ``value`` (case-insensitive).

        Raises:
            ValueError: if ``value`` names no action.
        """
        try:
            return cls[value.strip().upper()]
        except KeyError:
            allowed = tuple(a.label for a in cls)
            raise ValueError(f"action must be one of {allowed}, got {value!r}") from None


STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2


@dataclass(slots=True)
class SpanRecord:
    """A finished span in a neutral shape, whatever produced it (SDK, OTLP/JSON, OTLP protobuf).

    Every decoder builds one per span.
    """

    trace_id: str
    """32 lower-case hex digits."""
    span_id: str
    """16 lower-case hex digits."""
    parent_span_id: str | None
    """16 hex digits, or None for a root span."""
    name: str
    start_time_ns: int
    end_time_ns: int
    attributes: Mapping[str, Any]
    status_code: int = STATUS_UNSET
    """0 unset, 1 ok, 2 error (the OTLP numbering)."""
    status_message: str = ""
    scope_name: str = ""
    resource: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """(name, attributes) of each span event, e.g. ``exception``."""
    parent_is_remote: bool = False
    """True when the parent span belongs to another process (a propagated context): this span
    is then the local root of its service's part of the trace. From OTLP ``Span.flags`` (both
    ``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`` and ``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` set) or
    the SDK parent's ``is_remote``; False when unknown (exporters older than mid-2024 leave the
    bits unset)."""


@dataclass(slots=True)
class ToolCall:
    """One tool span, normalised by an adapter."""

    tool: str
    arguments: Any = None
    """Real arguments (unwrapped from instrumentation envelopes), or None when not captured."""
    result: Any = None
    """Real result, or None when ``has_result`` is False."""
    has_result: bool = False
    """True when the instrumentation captured a result (even an empty one)."""
    error: bool = False
    """True when the span status is ERROR."""
    error_message: str = ""
    """Status description, ``error.type`` or exception message, when the span failed."""
    agent: str | None = None
    """Name of the agent that invoked the tool, when known."""
    span_id: str = ""
    trace_id: str = ""
    start_time_ns: int = 0
    end_time_ns: int = 0
    turn: int | None = None
    """Model turn that issued the call (calls of one turn form a batch); None when unknown."""

    def in_context(self, agent: str | None, turn: int | None) -> ToolCall:
        """Return this call with the agent and model turn the span assembly found for it.

        A plain constructor call: ``dataclasses.replace`` re-reads the class's fields on every
        call, and the assembly places every tool call it reads.
        """
        return ToolCall(self.tool, self.arguments, self.result, self.has_result, self.error,
                        self.error_message, agent, self.span_id, self.trace_id,
                        self.start_time_ns, self.end_time_ns, turn)


@dataclass(slots=True)
class Handoff:
    """Control passing from one agent to another."""

    from_agent: str
    to_agent: str
    span_id: str = ""
    end_time_ns: int = 0
    explicit: bool = True
    """False when inferred from a change of the agent invoking tools."""
    note: str = ""
    """A digest of what a handoff tool's call carries besides its target (Strands'
    ``message`` and ``context``), ``""`` when nothing: a new one is work done, as a model
    output the run has not said before is."""


@dataclass(slots=True)
class ModelTurn:
    """One model call (a chat span) of a run: the turn that may request tool calls."""

    span_id: str = ""
    start_time_ns: int = 0
    end_time_ns: int = 0
    requested_tools: bool | None = None
    """True when the span says the model asked for tool calls, False when it says the model
    answered without any, None when the span does not say (finish reasons and output messages
    not captured)."""
    agent_span_id: str | None = None
    """The agent invocation (agent span) the turn belongs to, when known."""
    index: int | None = None
    """The turn's number in its run: the ``ToolCall.turn`` of the calls it issued (None when
    the caller does not number turns)."""
    input_tokens: int = 0
    """``gen_ai.usage.input_tokens`` (or its convention's equivalent); 0 when not recorded."""
    output_tokens: int = 0
    """``gen_ai.usage.output_tokens`` (or its convention's equivalent); 0 when not recorded."""
    models: tuple[str, ...] = ()
    """The model names the span gives, the response model first, then the request model (for
    prices)."""
    input_sig: str = ""
    """Digest of the turn's last input message, what reached the model since its previous turn
    (a tool result, the harness's feedback, a user's reply); ``""`` when content is not
    captured. A user's message of a few words (``y``, ``next``, ``go on``) has the prefix
    ``REPLY_MARK``: an answer to the model, not a harness's feedback."""
    output_sig: str = ""
    """Digest of the turn's output messages; ``""`` when content is not captured."""
    user_input: bool = False
    """True when the turn's last input message is the user's (a reply in a conversation)."""


REPLY_MARK: Final = "reply:"
"""Prefix of a ``ModelTurn.input_sig`` that is a user's reply of a few words (``y``, ``next``,
``go on``). A harness that rejects an answer says what is wrong (a format error, an
instruction); three words or fewer from the user answer the model, so the same short reply
each time is no repeated feedback (``idle_turns``)."""


BUDGET_DETECTOR: Final = "budget"
"""The detector whose findings are budgets, not loops (``Decision.loop``)."""


@dataclass(slots=True)
class Evidence:
    """What one detector saw on one tool call or handoff."""

    detector: str
    code: str
    action: Action
    tool: str
    count: int
    """Count of the repeated element, this one included."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """JSON-ready facts (call indices, hashes, thresholds). Never raw arguments or results."""


@dataclass(slots=True)
class Decision:
    """The policy's verdict on one tool call or handoff."""

    action: Action
    code: str = "OK"
    evidence: tuple[Evidence, ...] = ()
    """All evidence on this call, strongest first."""
    hint: str = ""
    """Message phrased for the model: what it repeats and what to do instead."""
    call_index: int = 0
    """1-based position of the call within its run (end-time order)."""
    tool: str = ""
    span_id: str = ""
    escalated: bool = False
    """True when the policy raised the action one level for pattern + no-progress evidence."""

    @property
    def detector(self) -> str:
        """Return the detector of the strongest evidence, or ``""`` for a clean call."""
        return self.evidence[0].detector if self.evidence else ""

    @property
    def flagged(self) -> bool:
        """Return True when the action is above ``continue``."""
        return self.action > Action.CONTINUE

    @property
    def loop(self) -> bool:
        """Return True when a loop detector flagged this call (any detector but ``budget``).

        A budget finding (calls, calls of one tool, steps, wall-clock) is acted on like any
        finding but is a limit, not a loop: it does not mark its run as looping.
        """
        return self.action > Action.CONTINUE and any(
            e.action > Action.CONTINUE and e.detector != BUDGET_DETECTOR for e in self.evidence)


class Clock(Protocol):
    """**Protocol:** a monotonic clock in nanoseconds, called on any thread."""

    def __call__(self) -> int:
        """Return the current time in nanoseconds."""
        ...


@runtime_checkable
class Detector(Protocol):
    """**Protocol:** one loop detector.

    The engine calls ``new_state`` once per run and ``observe`` once per tool call of that run,
    on the thread that ends the span, while it holds the run's lock; ``observe`` mutates only the
    state it is given and must not block or call out.

    The enforce-mode precheck also calls ``observe`` with a hypothetical step, on a copy of the
    run's state: ``fork(state, step)`` when the detector has that method (``DetectorBase``
    gives one), else ``copy.deepcopy(state)``.

    A detector class may set ``observed_kinds``, the call kinds (``read``, ``mutating``,
    ``poll``, ``exempt``, ``default``) whose steps its ``observe`` looks at: the engine then
    does not call it for a tool call of another kind. It may set ``quiet_until_failure`` to
    True when its ``observe`` returns None and changes nothing on every call of a run before
    the run's first failed call (a success matters only after a failure): the engine then calls
    it from that failure on. A subclass that overrides ``observe`` is called for every kind and
    every call unless it sets these attributes itself.
    """

    @property
    def name(self) -> str:
        """The detector's name (a class attribute in the built-in ones), as in evidence."""
        ...

    def new_state(self) -> Any:
        """Return fresh, bounded per-run state."""
        ...

    def observe(self, state: Any, step: Any) -> Evidence | None:
        """Update ``state`` with one normalised step and return evidence, if any."""
        ...


class SpanAdapter(Protocol):
    """**Protocol:** turns spans of one instrumentation convention into tool calls and handoffs.

    Called on the thread that ends the span (processor) or on the reader thread (``check``,
    ``serve``); must never raise on odd attribute values.
    """

    name: str

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff this span stands for, or None."""
        ...
