"""Model spans without content are kept aside until their trace shows a run, and change nothing.

``LoopGuardSpanProcessor`` keeps a blank model span of a trace with no run aside on the thread
that ends it (``otel_loopguard.processor._deferred``): its check is queued only when the trace's
next span goes to the worker, or dropped with the trace's root. Generated traces, mostly blank
model spans, are run through one processor that keeps them aside and one that does not, and
must give the same evidence on the same spans, the same metrics and the same run summaries.

Every test runs twice: with the C accelerator of the processor's ``span.end()``
(``otel_loopguard/_span_end.c``: the span's reading, the key test, and a blank span kept aside
in one step) and with the Python path it follows, which a build without a compiler uses.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _compiled import compiled
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

import otel_loopguard.processor as processor_module
import otel_loopguard.processor._deferred as deferred_module
from otel_loopguard import adapters
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.processor._deferred import _MAX_SPANS, _MAX_TRACES, BLANK_TURN_KEYS


@pytest.fixture(autouse=True, params=["accelerated", "python"])
def _path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
          tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run with the C accelerator (installed, else built here) or with the Python path."""
    if request.param == "python":
        monkeypatch.setattr(deferred_module, "_KEEP_ASIDE", None)
        monkeypatch.setattr(processor_module, "span_reading", adapters.python_span_reading)
        monkeypatch.setattr(deferred_module, "_keys_test", lambda keys: keys.issuperset)
        return
    module = compiled("otel_loopguard/_span_end.c", tmp_path_factory)
    adapters._set_up_reading(module)
    module.setup_kept(collections.deque, collections.OrderedDict, _MAX_TRACES, _MAX_SPANS)
    monkeypatch.setattr(deferred_module, "_KEEP_ASIDE", module.keep_aside)
    monkeypatch.setattr(processor_module, "span_reading", module.span_reading)
    monkeypatch.setattr(deferred_module, "_keys_test",
                        lambda keys: functools.partial(module.keys_within, keys))


_CHAT = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
         "gen_ai.request.model": "m1", "gen_ai.response.model": "m1",
         "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}
_CONTENT = {"gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", '
                                     '"content": "Your answer was not valid."}]}]'}
_IGNORED_METRICS = ("loopguard_open_runs", "loopguard_skipped_spans")
"""A trace with model spans alone opens no run while they are kept aside; nothing is skipped."""


class _Ids(IdGenerator):
    """Span and trace ids from a seeded generator: both processors see the same ids."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


class _Tracer:
    """A tracer whose spans start and end at the ticks of one clock: the same times each run."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.ticks = itertools.count(1_000_000, 1_000)

    @contextmanager
    def start_as_current_span(self, name: str, attributes: Any = None) -> Iterator[Any]:
        with self.tracer.start_as_current_span(name, attributes=attributes,
                                               start_time=next(self.ticks),
                                               end_on_exit=False) as span:
            yield span
        span.end(end_time=next(self.ticks))


def _chat(rng: random.Random) -> dict[str, Any]:
    attrs = dict(_CHAT)
    pick = rng.random()
    if pick < 0.3:
        # an answer (``stop``) makes its next turn follow new input, a change of the run's
        # world: the tool calls after it start counting again
        attrs["gen_ai.response.finish_reasons"] = (rng.choice(["stop", "tool_calls",
                                                               "tool_calls"]),)
    elif pick < 0.4:
        attrs.update(_CONTENT)
    elif pick < 0.45:
        attrs["gen_ai.prompt.name"] = "p1"
    return attrs


def _caught_up(processor: LoopGuardSpanProcessor) -> None:
    """Wait until the worker has checked every span queued (as a model call's latency lets it)."""
    assert processor._worker is not None
    assert processor._worker.flush(5.0)


def _work(tracer: Any, rng: random.Random, processor: LoopGuardSpanProcessor,
          summaries: list[Any], depth: int) -> None:
    """Model turns (some inside a chain span), tool calls that repeat, sub-agents."""
    for _ in range(rng.randint(1, 10)):
        pick = rng.random()
        if pick < 0.45:
            if rng.random() < 0.7:  # the model takes its time: the worker catches up
                _caught_up(processor)
            if rng.random() < 0.3:  # a framework's step around the model call
                with tracer.start_as_current_span("step"), \
                        tracer.start_as_current_span("chat m1", attributes=_chat(rng)):
                    pass
            else:
                with tracer.start_as_current_span("chat m1", attributes=_chat(rng)):
                    pass
        elif pick < 0.8:
            tool = rng.choice(["search", "fetch"])
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": f'{{"q": {rng.randint(1, 2)}}}',
                    "gen_ai.tool.call.result": "same"}) as span:
                if rng.random() < 0.2:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
        elif pick < 0.88 and depth < 2:
            with tracer.start_as_current_span(f"invoke_agent {rng.choice('ab')}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}):
                _work(tracer, rng, processor, summaries, depth + 1)
        elif pick < 0.94:
            summaries.append(processor.run_summary())
        else:
            processor.force_flush()


def _run(seed: int, *, keep_aside: bool) -> tuple[dict[int, Any], dict[Any, float], list[Any],
                                                   list[Any], int]:
    """Generated traces through the processor: evidence by span, metrics, summaries, what the
    engine was given in each run with tool calls, and the spans kept aside."""
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=_Ids(seed))
    registry = CollectorRegistry()
    config = LoopGuardConfig.create(prices={
        "m1": {"input_per_million": 1000.0, "output_per_million": 2000.0}})
    processor = LoopGuardSpanProcessor(config, downstream=SimpleSpanProcessor(exporter),
                                       registry=registry, raise_internal_errors=True,
                                       background=True)
    processor._defers = keep_aside
    kept = 0
    original = processor._set_aside

    def counted(*args: Any) -> bool:
        nonlocal kept
        taken = original(*args)
        kept += taken
        return taken

    processor._set_aside = counted  # type: ignore[method-assign]
    runs: dict[int, list[tuple[str, str, int | None]]] = {}
    _record(processor.engine, runs)
    provider.add_span_processor(processor)
    tracer = _Tracer(provider.get_tracer("kept-aside"))
    summaries: list[Any] = []
    for _ in range(rng.randint(1, 4)):
        root = rng.random()
        if rng.random() < 0.5:
            _caught_up(processor)
        if root < 0.2:  # a chat application: each model call its own trace
            with tracer.start_as_current_span("chat m1", attributes=_chat(rng)):
                pass
            continue
        if root < 0.4:  # a RAG pipeline: model calls, no tool
            with tracer.start_as_current_span("POST /ask"):
                for _ in range(rng.randint(1, 6)):
                    with tracer.start_as_current_span("chat m1", attributes=_chat(rng)):
                        pass
                summaries.append(processor.run_summary())
            continue
        name, attrs = ("POST /chat", {}) if root < 0.6 else ("invoke_agent a", {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
        with tracer.start_as_current_span(name, attributes=attrs):
            _work(tracer, rng, processor, summaries, 0)
            summaries.append(processor.run_summary())
    provider.shutdown()
    evidence = {span.context.span_id: sorted((key, str(value)) for key, value in
                                             (span.attributes or {}).items()
                                             if key.startswith("loopguard."))
                for span in exporter.get_finished_spans()}
    metrics = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for metric in registry.collect() for s in metric.samples
               if not s.name.startswith(_IGNORED_METRICS) and not s.name.endswith("_created")}
    events = sorted(tuple(run) for run in runs.values() if any(e[0] == "call" for e in run))
    return evidence, metrics, summaries, events, kept


def _record(engine: Any, runs: dict[int, list[tuple[str, str, int | None]]]) -> None:
    """Note what the engine is given, per run and in order: each call with its model turn."""
    process, turn, blank = engine.process, engine.process_model_turn, engine.process_blank_turn
    alive: list[Any] = []  # every run stays alive: its id is never another's

    def note(run: Any, event: tuple[str, str, int | None]) -> None:
        if id(run) not in runs:
            alive.append(run)
        runs.setdefault(id(run), []).append(event)

    def called(run: Any, call: Any) -> Any:
        note(run, ("call", call.span_id, call.turn))
        return process(run, call)

    def turned(run: Any, model_turn: Any) -> Any:
        note(run, ("turn", model_turn.span_id, model_turn.index))
        return turn(run, model_turn)

    def blanked(run: Any, span_id: int, *args: Any, **kwargs: Any) -> Any:
        note(run, ("blank", format(span_id, "016x"), None))
        return blank(run, span_id, *args, **kwargs)

    engine.process, engine.process_model_turn = called, turned
    engine.process_blank_turn = blanked


@pytest.mark.parametrize("block", range(4))
def test_kept_aside_model_spans_change_no_finding_metric_or_summary(block: int) -> None:
    findings = kept = 0
    for seed in range(block * 40, block * 40 + 40):
        evidence, metrics, summaries, events, taken = _run(seed, keep_aside=True)
        assert _run(seed, keep_aside=False)[:4] == (evidence, metrics, summaries, events), seed
        findings += sum(bool(v) for v in evidence.values())
        kept += taken
    assert kept > 60  # many model spans were kept aside
    assert findings > 5  # and the traces loop often enough to compare


def test_a_chat_application_opens_no_run_and_its_spans_go_on_at_once() -> None:
    """A trace of model spans alone: every span handed on inside ``span.end()``, no run made."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(),
                                       downstream=SimpleSpanProcessor(exporter),
                                       registry=None, background=True)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("chat-app")
    processor.force_flush()
    with tracer.start_as_current_span("POST /ask"):
        for _ in range(5):
            with tracer.start_as_current_span("chat m1", attributes=_CHAT):
                pass
        assert len(exporter.get_finished_spans()) == 5  # handed on, not queued
        assert len(processor._deferred) == 1
    assert not processor._deferred and len(processor.store) == 0
    assert not processor._open
    provider.shutdown()


def test_a_kept_aside_turn_counts_before_the_tool_call_after_it() -> None:
    """The turns kept aside are checked before the trace's next tool span: they number it."""
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(),
                                       downstream=SimpleSpanProcessor(InMemorySpanExporter()),
                                       registry=None, background=True)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        for _ in range(3):
            with tracer.start_as_current_span("chat m1", attributes=_CHAT):
                pass
        parent = trace.get_current_span().get_span_context()
        run_id = format(parent.trace_id, "032x")
        assert processor.store.get(run_id) is None  # kept aside: no run yet
        entry = processor.run_under(parent)  # a reader of the run: they are checked first
        assert entry is not None and entry.model_turns == 3
    provider.shutdown()


def test_blank_keys_name_no_content_or_template() -> None:
    from otel_loopguard.adapters import template_key_roots
    from otel_loopguard.adapters._turns import _CONTENT_KEYS

    config = LoopGuardConfig.create()
    assert BLANK_TURN_KEYS.isdisjoint(_CONTENT_KEYS)
    assert BLANK_TURN_KEYS.isdisjoint(template_key_roots(config.prompt_name_keys))
    assert not any(key.startswith(("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages",
                                   "llm.output_messages")) for key in BLANK_TURN_KEYS)


_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
         "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "same"}


def _background(downstream: Any = None) -> tuple[TracerProvider, LoopGuardSpanProcessor, Any]:
    """A processor in the background mode on a provider of its own, its worker caught up."""
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig.create(), registry=None, background=True,
        downstream=downstream or SimpleSpanProcessor(InMemorySpanExporter()))
    provider.add_span_processor(processor)
    _caught_up(processor)
    return provider, processor, provider.get_tracer("kept-aside")


@pytest.mark.parametrize("root", [
    pytest.param(("execute_tool search", _TOOL), id="tool"),
    pytest.param(("chat m1", {**_CHAT, **_CONTENT}), id="model-with-content"),
])
def test_a_root_checked_itself_counts_the_turns_kept_aside_under_it(root: Any) -> None:
    """A root the worker checks (a tool call, a turn with content) makes a run of its own.

    The blank turns that ended under it belong to that run and are checked before it, as
    when each was queued as it ended: the tool call is the second turn's (an MCP server's tool
    span, whose remote parent makes it a root, calling a model), the turn with content the
    same model call as the turns inside it.
    """
    provider, processor, tracer = _background()
    runs: dict[int, list[tuple[str, str, int | None]]] = {}
    _record(processor.engine, runs)
    name, attrs = root
    with tracer.start_as_current_span(name, attributes=attrs) as span:
        for _ in range(2):
            with tracer.start_as_current_span("chat m1", attributes=_CHAT):
                pass
        root_id = format(span.get_span_context().span_id, "016x")
    provider.shutdown()
    (events,) = runs.values()
    assert [event[0] for event in events] == ["blank", "blank", events[-1][0]]
    assert events[-1][1] == root_id
    if name.startswith("execute_tool"):
        assert events[-1] == ("call", root_id, 2)


class _FailsOnce(SimpleSpanProcessor):
    """A downstream processor whose first ``on_end`` of a model span raises."""

    def __init__(self) -> None:
        super().__init__(InMemorySpanExporter())
        self.ended: list[str] = []

    def on_end(self, span: Any) -> None:
        self.ended.append(span.name)
        if self.ended.count("chat m1") == 1 and span.name == "chat m1":
            raise RuntimeError("exporter down")
        super().on_end(span)


def test_a_downstream_error_on_a_kept_span_neither_counts_it_twice_nor_hands_it_on_again() -> None:
    """The span is kept aside before it is handed on: an error there must not queue it too."""
    downstream = _FailsOnce()
    provider, processor, tracer = _background(downstream)
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        with contextlib.suppress(RuntimeError), \
                tracer.start_as_current_span("chat m1", attributes=_CHAT):
            pass
        entry = processor.run_under(trace.get_current_span().get_span_context())
        assert entry is not None and entry.model_turns == 1
    provider.shutdown()
    assert downstream.ended.count("chat m1") == 1


def test_model_spans_that_outlive_their_root_give_their_room_to_newer_traces() -> None:
    """A streamed answer's span can end after its request's root: no root drops it then.

    Such kept spans go to the worker, checked as they were before they were kept aside, once
    newer traces need their room: they do not hold it for good, and model spans go on being
    kept aside.
    """
    provider, processor, tracer = _background()
    opened = []
    get_or_create = processor.store.get_or_create

    def noting(run_id: str) -> Any:
        opened.append(run_id)
        return get_or_create(run_id)

    processor.store.get_or_create = noting  # type: ignore[method-assign]
    stranded = []
    for _ in range(_MAX_TRACES + 8):
        root = tracer.start_span("POST /stream")
        model = tracer.start_span("chat m1", context=trace.set_span_in_context(root),
                                  attributes=_CHAT)
        root.end()
        model.end()
        stranded.append(model.get_span_context().trace_id)
    _caught_up(processor)
    with tracer.start_as_current_span("POST /ask") as span:
        with tracer.start_as_current_span("chat m1", attributes=_CHAT):
            pass
        assert span.get_span_context().trace_id in processor._deferred
    _caught_up(processor)
    assert len(processor._deferred) <= _MAX_TRACES
    run_id = format(stranded[0], "032x")
    assert run_id in opened  # checked, as it was before it was kept aside
    assert processor.store.get(run_id) is None  # its root had ended: no run is left open
    provider.shutdown()


def test_release_run_of_an_id_of_32_characters_that_is_no_trace_id() -> None:
    """Only a trace's run (32 hex digits) has model spans kept aside: any other id is dropped."""
    provider, processor, tracer = _background()
    with tracer.start_as_current_span("POST /ask"):
        with tracer.start_as_current_span("chat m1", attributes=_CHAT):
            pass
        assert processor._deferred
        processor.release_run("session-of-thirty-two-characters")
        assert processor._deferred  # another run's: the trace's spans stay kept aside
    provider.shutdown()


class _TakenMeanwhile(dict):  # type: ignore[type-arg]
    """The kept spans' table, where another thread queues a trace's spans (a tool span's
    ``on_end``) just after ``_set_aside`` looked its deque up, before it appended to it."""

    def __init__(self, processor: LoopGuardSpanProcessor) -> None:
        super().__init__()
        self.processor = processor
        self.armed = False

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key, default)
        if self.armed and found is not None:
            self.armed = False
            self.processor._release_kept(key)  # taken out of the table, drained and queued
        return found


def test_a_span_added_to_spans_another_thread_just_took_is_checked_once() -> None:
    """Without a lock, a span appended to a trace's spans after another thread took them is
    set aside again by the thread that appended it: counted once, after the spans taken."""
    provider, processor, tracer = _background()
    processor._deferred = table = _TakenMeanwhile(processor)
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        for _ in range(2):
            with tracer.start_as_current_span("chat m1", attributes=_CHAT):
                pass
        table.armed = True
        with tracer.start_as_current_span("chat m1", attributes=_CHAT):
            pass
        parent = trace.get_current_span().get_span_context()
        assert not table.armed  # the two taken; the third kept aside again, alone
        assert [len(spans) for spans in processor._deferred.values()] == [1]
        _caught_up(processor)
        entry = processor.store.get(format(parent.trace_id, "032x"))
        assert entry is not None and entry.model_turns == 2
        entry = processor.run_under(parent)  # queues the third
        assert entry is not None and entry.model_turns == 3
    _caught_up(processor)
    assert not processor._open
    provider.shutdown()


def test_blank_spans_ended_on_many_threads_are_each_counted_once() -> None:
    """Threads end blank model spans of one trace while another queues the trace's spans kept
    aside again and again (as its tool spans do): every turn is counted exactly once."""
    import sys
    import threading

    provider, processor, tracer = _background()
    threads, per_thread = 4, 150
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter lets them
    try:
        with tracer.start_as_current_span("invoke_agent a", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}) as root:
            context = trace.set_span_in_context(root)
            trace_id = root.get_span_context().trace_id
            done = threading.Event()

            def turns() -> None:
                for _ in range(per_thread):
                    tracer.start_span("chat m1", context=context, attributes=_CHAT).end()

            def releases() -> None:
                while not done.is_set():
                    processor._release_kept(trace_id)

            workers = [threading.Thread(target=turns) for _ in range(threads)]
            releaser = threading.Thread(target=releases)
            releaser.start()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            done.set()
            releaser.join()
            entry = processor.run_under(root.get_span_context())  # queues what is left first
            _caught_up(processor)
            assert entry is not None and entry.model_turns == threads * per_thread
    finally:
        sys.setswitchinterval(switch)
    _caught_up(processor)
    assert not processor._open and not processor._deferred
    provider.shutdown()


class _ShutDownMeanwhile(dict):  # type: ignore[type-arg]
    """The kept spans' table, where another thread shuts the processor down just after
    ``on_end`` found setting aside on, before ``_set_aside`` added the span to the table."""

    def __init__(self, processor: LoopGuardSpanProcessor) -> None:
        super().__init__()
        self.processor = processor
        self.armed = False

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if self.armed:
            self.armed = False
            self.processor.shutdown()  # finds nothing kept aside: the span is not added yet
        return super().setdefault(key, default)


def test_a_span_set_aside_as_the_processor_shuts_down_does_not_stay_aside() -> None:
    """A model span that outlived its root, set aside while another thread shuts the processor
    down, is counted as skipped like any span ending once shutdown has begun: it does not stay
    kept aside (and open) for good, neither checked nor counted."""
    registry = CollectorRegistry()
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig.create(), registry=registry, background=True,
        downstream=SimpleSpanProcessor(InMemorySpanExporter()))
    provider.add_span_processor(processor)
    _caught_up(processor)
    tracer = provider.get_tracer("kept-aside")
    processor._deferred = table = _ShutDownMeanwhile(processor)
    root = tracer.start_span("POST /stream")
    model = tracer.start_span("chat m1", context=trace.set_span_in_context(root),
                              attributes=_CHAT)
    root.end()
    table.armed = True
    model.end()
    assert not table.armed  # shut down between on_end's test and the span's addition
    assert not processor._deferred
    assert model.get_span_context().span_id not in processor._open
    assert registry.get_sample_value("loopguard_skipped_spans_total",
                                     {"reason": "shutdown"}) == 1


class _TakenPartly(dict):  # type: ignore[type-arg]
    """The kept spans' table, where another thread (a tool span's ``on_end``) takes a trace's
    deque out of the table and its first span out of the deque, and is switched out there,
    just after ``_set_aside`` added a span to that deque and before it looked the table up
    again."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.lookups = 0
        self.taken: tuple[int, Any, list[Any]] | None = None

    def get(self, key: Any, default: Any = None) -> Any:
        if self.armed:
            self.lookups += 1
            if self.lookups == 2:  # the lookup after the append
                self.armed = False
                kept = super().pop(key)
                self.taken = key, kept, [kept.popleft()]
        return super().get(key, default)


def test_a_span_added_to_spans_another_thread_is_taking_is_checked_after_them() -> None:
    """Spans that ended before are checked before it, as with a lock around the deque: the
    taker queues what it takes first; the span set aside meanwhile is checked after them."""
    from otel_loopguard.processor._deferred import _drained

    provider, processor, tracer = _background()
    runs: dict[int, list[tuple[str, str, int | None]]] = {}
    _record(processor.engine, runs)
    processor._deferred = table = _TakenPartly()
    ended = []
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}) as root:
        for index in range(4):
            table.armed = index == 3
            with tracer.start_as_current_span("chat m1", attributes=_CHAT) as span:
                pass
            ended.append(format(span.get_span_context().span_id, "016x"))
        assert table.taken is not None
        trace_id, kept, spans = table.taken  # the other thread goes on: drains and queues
        processor._queue_kept(spans + _drained(kept), trace_id, at_root=False)
        entry = processor.run_under(root.get_span_context())
        assert entry is not None and entry.model_turns == 4
    provider.shutdown()
    (events,) = runs.values()
    assert [event[1] for event in events] == ended
    assert not processor._open
