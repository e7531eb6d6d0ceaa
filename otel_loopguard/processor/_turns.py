"""How the processor counts and judges a run's model turns (its chat spans)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_loopguard.adapters import _keys as keys
from otel_loopguard.adapters import usage_of
from otel_loopguard.adapters._turns import (
    NO_TURN,
    has_content,
    request_by_reason,
    turn_of,
    user_input_of,
)
from otel_loopguard.adapters._usage import TokenUsage
from otel_loopguard.assembly import template_in
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.processor._report import FindingReports, hex_trace
from otel_loopguard.processor._runs import SpanRuns
from otel_loopguard.state import InMemoryRunStateStore, RunEntry
from otel_loopguard.types import Action, Decision, ModelTurn
from otel_loopguard.waste import RunWaste, Waste

__all__ = ["ModelTurns"]

_NO_USAGE: Final[TokenUsage] = (0, 0, ())
_FINISH_REASONS: Final = keys.GEN_AI_RESPONSE_FINISH_REASONS


class ModelTurns(FindingReports):
    """``LoopGuardSpanProcessor``'s model turns: counted per run, and judged.

    A mixin: the attributes it declares are the processor's.

    A model span often carries the prompt template (``gen_ai.prompt.name``, Langfuse's and
    Traceloop's keys) that the tool spans after it lack; it becomes the run's template.
    Only what the run needs is read: with the ``idle_turns`` detector on, the turn's agent
    invocation, tool request and content (one set test when it has none, and the finish
    reasons; a blank turn, without content, only restarts the idle streak: the engine's
    ``process_blank_turn`` builds neither the turn nor a decision); its usage
    (tokens, models) only once the run's waste counts (``_feed``), which in most runs never
    happens: until then the run keeps a reference to the latest turn's attributes, which
    its trace's end releases (a conversation's run, which outlives its traces, reads the
    usage of every turn instead).
    """

    config: LoopGuardConfig
    engine: LoopEngine
    store: InMemoryRunStateStore
    _runs: SpanRuns
    _lazy_usage: bool
    """Keep a run's latest model turn's attributes for its usage (``_model_turn``): not for
    a conversation's run, which outlives its traces (up to the run TTL) and would keep
    them, prompts and all, that long."""
    _template_roots: frozenset[str]
    """Keys of which a span names a template only if it has one (``template_in``)."""

    def _model_turn(self, span: ReadableSpan, attrs: Mapping[str, Any], context: SpanContext,
                    parent: SpanContext | None) -> ReadableSpan | None:
        """Count a model turn of the span's run (the turns make batches) and judge it."""
        run_id = self._runs.run_id(span, attrs, context[0])
        entry, _ = self.store.get_or_create(run_id)
        state = entry.state
        if state.notifying and state.in_callback():
            return None  # ended inside this run's on_decision, which holds its lock
        idle = self.engine.idle
        agent_span = None
        requested, last_input, output, from_user = NO_TURN
        if idle is not None:  # idle_turns: the turn, with its agent invocation
            agent_span = self.live.agent_span_id(parent[1] if parent is not None else None)
            if has_content(attrs):
                requested, last_input, output, from_user = turn_of(attrs)
            elif _FINISH_REASONS in attrs:  # no content: only the finish reasons say anything
                requested = request_by_reason(attrs)  # (an answer: new input follows it)
        else:  # a user's new message changes the run's world (``heard``) all the same
            last_input = user_input_of(attrs)
            from_user = bool(last_input)
        with state.lock:
            index = entry.model_turns = entry.model_turns + 1
            entry.seen_model = True
            if entry.template is None and not self._template_roots.isdisjoint(attrs):
                self._learn_template(entry, template_in(attrs, self.config))
            waste = state.waste
            if self._lazy_usage and not waste.found:  # usage counts after a loop finding
                entry.unfed = (waste, index, attrs)
                if idle is None and not from_user:
                    return None
                if not last_input and not output and self.engine.process_blank_turn(
                        state, context[1], span.start_time or 0, span.end_time or 0,
                        agent_span, requested=requested is True, answered=requested is False):
                    return None
                usage: TokenUsage = _NO_USAGE
                numbered = None
            else:
                entry.unfed = None
                usage, numbered = usage_of(attrs), index
            turn = ModelTurn(format(context[1], "016x"), span.start_time or 0,
                             span.end_time or 0, requested, agent_span, numbered, *usage,
                             last_input, output, from_user)
            judged = self._judge_turn(entry, turn, waste)
        return None if judged is None else self._turn_finding(span, run_id, judged)

    def _judge_turn(self, entry: RunEntry, turn: ModelTurn, waste: RunWaste
                    ) -> tuple[Decision, Action, str | None, Waste | None] | None:
        """Run a turn that counts through the engine (hold the run's lock); None: nothing to report.

        ``waste``: the run's, as it was before the engine's call (what the turn's usage went to).
        """
        decision = self.engine.process_model_turn(entry.state, turn)
        if not decision.flagged and turn.index is None:
            return None  # nothing to count: no finding, and the waste took no usage
        previous = entry.note_loop(decision)
        template = entry.template
        wasted = waste.take()
        return decision, previous, template, wasted

    def _turn_finding(self, span: ReadableSpan, run_id: str,
                      judged: tuple[Decision, Action, str | None, Waste | None]
                      ) -> ReadableSpan | None:
        """Count what a judged turn wasted, and report its finding (outside the run's lock)."""
        decision, previous, template, wasted = judged
        if wasted is not None and self.metrics is not None:
            self.metrics.record_waste(template, wasted, hex_trace(span))
        return self._finding(span, decision, previous, template, run_id)

    def _feed(self, entry: RunEntry) -> None:
        """Give the run's waste the usage of its latest model turn, once it counts (hold the lock).

        After the run's first loop finding a wasted call adds the tokens of the turn that
        issued it, the latest one: ``_model_turn`` left its attributes in ``entry.unfed``. The
        same ``RunWaste.turn`` the engine calls for a numbered turn, later, with the same
        figures: only for the waste it was left for (``LoopEngine.reset`` makes a new one).
        """
        waste, index, attrs = entry.unfed  # type: ignore[misc]  # the caller checked it
        entry.unfed = None
        if waste is entry.state.waste:
            tokens_in, tokens_out, models = usage_of(attrs)
            config = self.engine.config
            waste.turn(index, tokens_in, tokens_out,
                       config.price(models) if config.prices else None)

    def _learn_template(self, entry: RunEntry, template: str | None) -> None:
        """Make ``template`` the run's (hold its lock): labels, and the template's budgets."""
        if template is not None and entry.template is None:
            entry.template = template
            self.engine.set_template(entry.state, template)
