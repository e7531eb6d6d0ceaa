"""Model spans without content, left unchecked until their trace shows it is an agent's run.

Most model spans carry no content (it is opt-in) and most traces with model spans call no tool:
a chat application, a RAG pipeline, a summary of documents. Checked as it ends, each such span
would make a run, count a turn and restart the idle-turns streak of a run that its root's end
drops again; none of it can be a finding. So a blank model span of a trace with no run yet is
kept aside instead, on the thread that ends it, and handed on at once:

* the trace's next span that goes to the worker (a tool call, a handoff, an agent's start, any
  span ending under an open ancestor) first queues the spans kept aside, in the order they
  ended, so the worker checks them exactly as if they had been queued when they ended (they stay
  in the open-span table until then: a tool span under one still finds it open);
* the trace's root span drops them with the run they would make (unless a span of the trace
  that ended at the same time on another thread made it a run, or the root is checked itself, a
  tool call or a turn with content: then they are checked first);
* ``force_flush``, ``shutdown`` and the readers of a run (the guard, ``run_under``,
  ``run_summary``) queue them first.

A blank span is a model span whose every attribute is one a turn without content carries
(``BLANK_TURN_KEYS``: model, usage, request parameters, finish reasons, server, and what
instrumentations add that a turn's check does not read): one set test; any other key (its
messages, a prompt template) sends it to the worker as before.
It is kept aside only while the worker has nothing queued (so no span of its trace waits to be
checked before it), in the background mode with ``run_key = "trace"``; bounded (``_MAX_TRACES``
traces, past that the oldest trace's spans are queued; ``_MAX_SPANS`` spans each, past that the
trace's spans are queued).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_loopguard._native import load
from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters import _keys_test
from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor._worker import SpanWorker
from otel_loopguard.state import after_fork_in_child

__all__ = ["BLANK_TURN_KEYS", "DeferredTurns"]

BLANK_TURN_KEYS: Final = frozenset({
    # OTel GenAI: the model call itself, its usage and request parameters
    k.GEN_AI_OPERATION_NAME, k.GEN_AI_SYSTEM, k.GEN_AI_PROVIDER_NAME, k.GEN_AI_REQUEST_MODEL,
    k.GEN_AI_RESPONSE_MODEL, "gen_ai.response.id", k.GEN_AI_RESPONSE_FINISH_REASONS,
    k.GEN_AI_USAGE_INPUT_TOKENS, k.GEN_AI_USAGE_OUTPUT_TOKENS, k.GEN_AI_USAGE_PROMPT_TOKENS,
    k.GEN_AI_USAGE_COMPLETION_TOKENS, "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.request.temperature",
    "gen_ai.request.top_p", "gen_ai.request.top_k", "gen_ai.request.max_tokens",
    "gen_ai.request.frequency_penalty", "gen_ai.request.presence_penalty",
    "gen_ai.request.stop_sequences", "gen_ai.request.seed", "gen_ai.request.choice.count",
    "gen_ai.output.type", "gen_ai.openai.request.service_tier",
    "gen_ai.openai.response.service_tier", "gen_ai.openai.response.system_fingerprint",
    "gen_ai.openai.api_base",
    "server.address", "server.port", "error.type", "gen_ai.usage.total_tokens",
    # what instrumentations add without content, none of it read by a turn's check: the
    # system instructions and tool definitions (never a turn's input or output), the agent
    # and conversation they name (a trace's run is the trace), Strands' event times,
    # pydantic-ai's request parameters and Logfire's own keys
    "gen_ai.system_instructions", "gen_ai.tool.definitions", k.GEN_AI_AGENT_NAME,
    "gen_ai.agent.id", "gen_ai.agent.call.id", k.GEN_AI_CONVERSATION_ID, "session.id",
    "gen_ai.event.start_time", "gen_ai.event.end_time", "model_request_parameters",
    "operation.cost", "logfire.json_schema", "logfire.msg", "logfire.span_type",
    "logfire.level_num",
    # OpenLLMetry: the span kind and its own request and usage keys
    k.TL_SPAN_KIND, "llm.request.type", "llm.is_streaming", "llm.usage.total_tokens",
    # OpenInference: the span kind, the model and its token counts
    k.OI_SPAN_KIND, "llm.model_name", "llm.provider", "llm.system",
    k.OI_TOKEN_COUNT_PROMPT, k.OI_TOKEN_COUNT_COMPLETION, "llm.token_count.total",
    "llm.invocation_parameters", "input.mime_type", "output.mime_type",
})
"""What a model span without content carries, and nothing a turn's check reads beyond its
model, usage and finish reasons: a span with only these keys is a blank turn. No key of a
message, prompt or completion, and no key a template is read from (``_defer_turns`` takes out
those the configuration names); a conversation's keys only matter with ``run_key =
"conversation"``, where nothing is kept aside."""

_MAX_TRACES: Final = 256
"""Traces with spans kept aside; a blank span of a further trace queues the oldest trace's.

No root drops the spans of a trace whose root ended before them (a streamed answer's model
span ending after its request's span) or never ends here (a synthetic parent whose run is not
released, an unsampled root): they go to the worker once newer traces need their room."""
_MAX_SPANS: Final = 32
"""Spans kept aside per trace; the trace's next blank span queues them and itself."""
_SPAN_END: Final = load("otel_loopguard._span_end")
_KEEP_ASIDE: Final[Callable[[dict[int, Any], dict[int, Any], int, ReadableSpan], bool | None]
                   | None] = None if _SPAN_END is None else _SPAN_END.keep_aside
"""The optional C accelerator of ``_set_aside``'s common case (``_span_end.c``)."""
if _SPAN_END is not None:
    _SPAN_END.setup_kept(deque, OrderedDict, _MAX_TRACES, _MAX_SPANS)


class _Deferred:
    """Spans kept aside of one trace, queued for their check only: they were handed on.

    ``at_root``: queued as the trace's root ended; the worker drops them unless a span queued
    before them made the trace a run (``DeferredTurns._check_kept``).
    """

    __slots__ = ("at_root", "spans", "trace_id")

    def __init__(self, spans: list[ReadableSpan], trace_id: int, at_root: bool) -> None:
        self.spans = spans
        self.trace_id = trace_id
        self.at_root = at_root


class DeferredTurns:
    """``LoopGuardSpanProcessor``'s blank model spans kept aside (see the module docstring).

    A mixin: the attributes it declares are the processor's. Thread-safe without a lock: a
    trace's spans kept aside are a deque, appended to by the threads that end them and taken
    (``popleft``, atomic) by the one that queues or drops them, so each is taken exactly once
    (``_drained``). A span added to a deque another thread has just taken out of the table is
    taken back (``remove``, atomic) by the thread that added it and set aside again, so it is
    queued after the spans that thread took, as with a lock; if the taker has it already, it
    is the taker's.
    """

    metrics: LoopGuardMetrics | None
    guard: InternalErrorGuard
    _downstream_end: Callable[[ReadableSpan], None] | None
    _worker: SpanWorker | None
    _pending: Sized
    _open: dict[int, Any]
    _traces: dict[int, Any]
    _deferred: dict[int, deque[ReadableSpan]]
    """Trace id → its blank model spans kept aside, oldest first."""
    _blank_keys: frozenset[str]
    """The keys of a blank turn (``BLANK_TURN_KEYS`` less those the configuration reads)."""
    _blank: Callable[[Any], bool]
    """Whether a span's attributes are those of a blank turn: ``_blank_keys.issuperset``, at
    C speed where the accelerator is built (``_keys_test``)."""

    if TYPE_CHECKING:  # the processor's
        def _ended(self, span: ReadableSpan, hand_on: bool = True) -> None: ...

    def _defer_turns(self, on: bool, blank_keys: frozenset[str]) -> None:
        """Set up keeping blank model spans aside (``on``: background mode, ``run_key = trace``).

        ``blank_keys``: ``BLANK_TURN_KEYS`` without the keys the configuration reads for a
        template.
        """
        self._deferred = {}
        self._defers = on
        self._blank_keys = blank_keys
        self._blank = _keys_test(blank_keys)
        after_fork_in_child(self._forget_deferred)

    def _forget_deferred(self) -> None:
        """In a forked child: nothing kept aside (the parent's spans)."""
        self._deferred.clear()

    def _set_aside(  # noqa: C901, PLR0911, PLR0912 - one frame per blank model span
            self, span: ReadableSpan, context: Any, parent: Any, attrs: Any) -> bool:
        """Keep a model span aside, and hand it on, if it is blank and its trace has no run.

        On the thread that ends it, while the worker has nothing queued (``on_end``);
        ``context``, ``parent`` and ``attrs`` are the SDK span's own. A root one ends its run at
        once: it only leaves the open spans. False: the caller queues it. Raises only what the
        downstream processor's ``on_end`` raises (the span is kept aside by then).
        """
        try:
            trace_id = context[0]
            if type(attrs) is not dict:
                return False
            kept: Any = None
            if _KEEP_ASIDE is not None and parent is not None and not parent[2]:
                # the common case in one step (``_span_end.keep_aside``); None leaves the
                # trace's first span past _MAX_TRACES, or one past _MAX_SPANS, to what follows
                if not self._blank(attrs):
                    return False
                kept = _KEEP_ASIDE(self._deferred, self._traces, trace_id, span)
                if kept is False:
                    return False
            if kept is None:
                if trace_id in self._traces or not self._blank_keys.issuperset(attrs):
                    return False
                deferred = self._deferred
                if parent is None or parent[2]:
                    if deferred and trace_id in deferred and not self._kept_at_root(trace_id):
                        return False  # a span under it made the trace a run: the worker's
                    self._open.pop(context[1], None)
                else:
                    while True:
                        kept = deferred.get(trace_id)
                        if kept is None:
                            if len(deferred) >= _MAX_TRACES:  # the oldest trace's go
                                self._release_oldest()
                            kept = deferred.setdefault(trace_id, deque())
                        elif len(kept) >= _MAX_SPANS:
                            self._release_kept(trace_id)
                            return False
                        kept.append(span)
                        if deferred.get(trace_id) is kept:
                            break
                        # taken meanwhile, on another thread, which may not have drained the
                        # spans before it yet: taken back, set aside again (after them, as if
                        # it had ended once they were taken), unless the taker has it already
                        try:
                            kept.remove(span)
                        except ValueError:
                            break
            if not self._defers:  # shutdown began meanwhile and may have emptied the table
                self._release_kept(trace_id)  # before the span was kept: nothing stays
        except Exception as exc:
            self.guard.handle("on_end", exc)
            return False
        # kept aside (or ended): an error of the downstream processor is its own, as for a span
        # no adapter reads, and must not send the span to the worker a second time
        if self._downstream_end is not None:
            self._downstream_end(span)
        return True

    def _release_kept(self, trace_id: int) -> None:
        """Queue the spans kept aside of ``trace_id`` (any), before a span of it is queued."""
        kept = self._deferred.pop(trace_id, None)
        if kept:
            self._queue_kept(_drained(kept), trace_id, at_root=False)

    def _release_oldest(self) -> None:
        """Queue the spans kept aside of the trace that has had them longest."""
        try:
            oldest = next(iter(self._deferred))
        except (RuntimeError, StopIteration):  # changed or emptied by another thread meanwhile
            return
        self._release_kept(oldest)

    def _kept_at_root(self, trace_id: int) -> bool:
        """The root of a trace with spans kept aside ended: True when they are dropped here.

        Dropped when the worker has nothing queued and the trace has no run: the run they
        would make ends with the root, and a turn without content is never a finding. Else
        queued for the worker to decide once the spans queued before them are checked: the
        caller must then queue the root after them.
        """
        kept = self._deferred.pop(trace_id, None)
        if not kept:
            return True
        if self._pending or trace_id in self._traces:
            self._queue_kept(_drained(kept), trace_id, at_root=True)
            return False
        self._forget_kept(_drained(kept))
        return True

    def _release_all_kept(self) -> None:
        """Queue every span kept aside (``force_flush``, and ``shutdown`` before it stops)."""
        for trace_id in list(self._deferred):
            self._release_kept(trace_id)

    def _queue_kept(self, kept: list[ReadableSpan], trace_id: int, *, at_root: bool) -> None:
        """Queue spans kept aside for their check, in order."""
        if not kept:
            return
        worker = self._worker
        if worker is None or not worker.submit(_Deferred(kept, trace_id, at_root)):
            self._forget_kept(kept)
            if self.metrics is not None:
                for _ in kept:
                    self.metrics.record_skipped("shutdown" if worker is None or worker.stopped
                                                else "queue_full")

    def _check_kept(self, item: _Deferred) -> None:
        """Check spans kept aside, on the worker, as if each had been queued when it ended.

        At the trace's root, only if a span checked before them made the trace a run.
        """
        if item.at_root and item.trace_id not in self._traces:
            self._forget_kept(item.spans)
            return
        for span in item.spans:
            self._ended(span, hand_on=False)

    def _forget_kept(self, kept: list[ReadableSpan]) -> None:
        """Take spans kept aside out of the open-span table: they will not be checked."""
        spans = self._open
        for span in kept:  # SDK spans (``_set_aside``): their context tuple, without a call
            spans.pop(span._context[1], None)  # type: ignore[index]


def _drained(kept: deque[ReadableSpan]) -> list[ReadableSpan]:
    """Take every span out of ``kept``, oldest first.

    Each span is taken once, whichever thread takes it: ``deque.popleft`` is atomic, and a
    span added after its deque left the table is taken back by the thread that added it unless
    this took it first (``DeferredTurns._set_aside``).
    """
    spans: list[ReadableSpan] = []
    try:
        while True:
            spans.append(kept.popleft())
    except IndexError:
        return spans
