"""Metrics: loop-detected hints per prompt template, runs, enforcement, self-health.

Prometheus metrics on a registry, and, with a ``MeterProvider``, the same counters through the
OpenTelemetry metrics API (``metrics._otel``). Label values are bounded: ``prompt_template``,
``tool`` and (``serve`` only) ``service_name`` keep at most ``max_prompt_templates``,
``max_tools`` and ``max_services`` distinct values (default 200 each); later values are counted
under ``other`` and in ``loopguard_label_overflow_total``. A missing value is ``unknown``. Run
ids, trace ids, arguments and results never become labels.
"""

from __future__ import annotations

import os
import platform
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from otel_loopguard._findings import budget_part, loop_action, loop_detector
from otel_loopguard.metrics._labels import MAX_LABEL_CHARS, OTHER, LabelCap, uncapped_label
from otel_loopguard.metrics._names import (
    BUDGET_EXCEEDED,
    BUDGETS,
    BUILD_INFO,
    ENFORCED,
    EVICTED_RUNS,
    INTERNAL_ERRORS,
    LABEL_OVERFLOW,
    LOOP_DETECTED,
    METRIC_NAMES,
    OPEN_RUNS,
    RUNS,
    RUNS_FLAGGED,
    SKIPPED_SPANS,
    TOOL_CALLS,
    UNPARENTED_TOOL_CALLS,
    WASTED_COST,
    WASTED_TOKENS,
    WASTED_TOOL_CALLS,
    WASTED_TOOL_SECONDS,
)
from otel_loopguard.metrics._open_runs import OpenRunsCollector, multiprocess_mode, total_of
from otel_loopguard.types import Action, Decision
from otel_loopguard.waste import Waste

__all__ = ["METRIC_NAMES", "LabelCap", "LoopGuardMetrics", "start_metrics_server",
           "uncapped_label"]

_ACTIONS: Final = (Action.WARN, Action.REPLAN, Action.STOP)
_MAX_CACHED: Final = 4096
"""Labelled ``tool_calls`` children kept per (template, tool) value pair, at most."""


def _base(name: str) -> str:
    return name.removesuffix("_total")


class LoopGuardMetrics:
    """All of loopguard's Prometheus metrics on one registry.

    Thread-safe. Counters are updated on the thread that ends a span, outside every loopguard
    lock; the open-runs gauge is computed at scrape time (or, under
    ``PROMETHEUS_MULTIPROC_DIR``, kept as a ``livesum`` gauge).

    Args:
        registry: where metrics are registered; default ``prometheus_client.REGISTRY``. Tests
            pass a fresh ``CollectorRegistry()``.
        max_prompt_templates: distinct ``prompt_template`` values before ``other`` (200).
        max_tools: distinct ``tool`` values before ``other`` (200).
        meter_provider: an OpenTelemetry ``MeterProvider``: every counter is also recorded
            there, under the same name and attributes (see ``export_to``). Default None.
        service_label: give every series labelled by ``prompt_template`` a ``service_name``
            label too (the sending service's ``service.name``), as ``serve`` does: it receives
            the spans of many services. Default False: a process is one service, and its
            scrape target already says which.
        max_services: distinct ``service_name`` values before ``other`` (200).
    """

    @classmethod
    def shared(cls, registry: CollectorRegistry | None = REGISTRY, *,
               max_prompt_templates: int = 200, max_tools: int = 200,
               meter_provider: Any = None) -> LoopGuardMetrics:
        """Return the metrics of ``registry``, created on first use and shared afterwards.

        Several processors in one process (``install()`` twice, or a processor built by the
        application beside the one ``opentelemetry-instrument`` installed) then count into the
        same series instead of failing to register them twice. The caps of the first one apply,
        and its ``meter_provider`` (a later one is used only when the first had none). With
        ``registry=None`` the metrics are shared per ``meter_provider``.
        """
        key = registry if registry is not None else meter_provider
        if key is None:
            raise ValueError("shared metrics need a registry or a meter provider")
        with _SHARED_LOCK:
            metrics = _SHARED.get(key)
            if metrics is None:
                metrics = _SHARED[key] = cls(registry, max_tools=max_tools,
                                             max_prompt_templates=max_prompt_templates,
                                             meter_provider=meter_provider)
            elif meter_provider is not None and metrics.meter_provider is None:
                metrics.export_to(meter_provider)
            return metrics

    def __init__(self, registry: CollectorRegistry | None = REGISTRY, *,
                 max_prompt_templates: int = 200, max_tools: int = 200,
                 meter_provider: Any = None, service_label: bool = False,
                 max_services: int = 200) -> None:
        """Create and register every metric: all of them, or none.

        Raises:
            ValueError: when a metric of the same name is already on ``registry`` (another
                ``LoopGuardMetrics`` there: share one with :meth:`shared`); the metrics
                registered before it are removed again.
        """
        reg: Any = None if registry is None else _Registering(registry)
        try:
            self._create(reg, registry, max_prompt_templates=max_prompt_templates,
                         max_tools=max_tools, meter_provider=meter_provider,
                         service_label=service_label, max_services=max_services)
        except ValueError as exc:
            if reg is not None:
                reg.undo()
                raise ValueError(f"otel-loopguard cannot register its metrics on this "
                                 f"registry: {exc} (is another LoopGuardMetrics on it? share "
                                 f"one with LoopGuardMetrics.shared(registry))") from exc
            raise

    def _create(self, reg: Any, registry: CollectorRegistry | None, *,
                max_prompt_templates: int, max_tools: int, meter_provider: Any,
                service_label: bool, max_services: int) -> None:
        self.registry = registry
        """The Prometheus registry the metrics are on (None: the metrics API only)."""
        self.multiprocess = multiprocess_mode()
        self.service_label = service_label
        tpl = ["prompt_template", "service_name"] if service_label else ["prompt_template"]
        self.tool_calls = Counter(_base(TOOL_CALLS), "Tool calls seen.",
                                  [*tpl, "tool"], registry=reg)
        self.loop_detected = Counter(_base(LOOP_DETECTED),
                                     "Loop-detected hints (findings), one per flagged tool call.",
                                     [*tpl, "detector", "action", "mode"],
                                     registry=reg)
        self.budget_exceeded = Counter(_base(BUDGET_EXCEEDED),
                                       "Budget findings (not loops): a warn budget once per run "
                                       "(per tool for calls of one tool), a stop budget on every "
                                       "call from the one that reached it.",
                                       [*tpl, "budget", "action", "mode"], registry=reg)
        self.runs = Counter(_base(RUNS), "Runs seen (counted at their first tool call).",
                            tpl, registry=reg)
        self.runs_flagged = Counter(_base(RUNS_FLAGGED),
                                    "Runs whose loop findings reached at least this action "
                                    "(once per run and action).",
                                    [*tpl, "action"], registry=reg)
        self.enforced = Counter(_base(ENFORCED), "Enforcement actions taken (abort, hint).",
                                [*tpl, "enforcement"], registry=reg)
        self.evicted = Counter(_base(EVICTED_RUNS), "Runs dropped before their root span "
                               "ended.", ["reason"], registry=reg)
        self.internal_errors = Counter(_base(INTERNAL_ERRORS), "Errors inside loopguard that "
                                       "were contained.", ["kind"], registry=reg)
        self.label_overflow = Counter(_base(LABEL_OVERFLOW), "Counter updates whose label "
                                      "value was folded into 'other' because the label's cap "
                                      "was full.", ["label"], registry=reg)
        self.skipped = Counter(_base(SKIPPED_SPANS), "Ended spans passed on unchecked.",
                               ["reason"], registry=reg)
        self.unparented = Counter(_base(UNPARENTED_TOOL_CALLS), "Tool calls with no parent span "
                                  "and no conversation id (no loop can be detected across "
                                  "them).", ["run_key"], registry=reg)
        self.wasted_tool_calls = Counter(_base(WASTED_TOOL_CALLS), "Tool calls that continued a "
                                         "loop after the run's first finding.",
                                         tpl, registry=reg)
        self.wasted_tokens = Counter(_base(WASTED_TOKENS), "Tokens of the model turns that "
                                     "issued wasted tool calls.", [*tpl, "type"],
                                     registry=reg)
        self.wasted_tool_seconds = Counter(_base(WASTED_TOOL_SECONDS), "Seconds the wasted "
                                           "tool calls ran.", tpl, registry=reg,
                                           unit="seconds")
        self.wasted_cost = Counter(_base(WASTED_COST), "What the tokens of the model turns that "
                                   "issued wasted tool calls cost, for models with configured "
                                   "prices.", [*tpl, "currency"], registry=reg)
        self._build_info(reg)
        # The series of known label values exist from the start, at 0: one first seen at n reads
        # as no increase to rate() and increase(), so a panel missed the first burst.
        for reason in ("capacity", "ttl"):
            self.evicted.labels(reason)
        for reason in ("queue_full", "shutdown"):
            self.skipped.labels(reason)
        for run_key in ("trace", "conversation", "agent"):
            self.unparented.labels(run_key)
        for label in ("prompt_template", "tool", *(("service_name",) if service_label else ())):
            self.label_overflow.labels(label)
        self._sizes: list[Callable[[], int]] = []
        self._open_gauge: Gauge | None = None
        if self.multiprocess:
            self._open_gauge = Gauge(OPEN_RUNS, "Runs currently held in memory.",
                                     registry=reg, multiprocess_mode="livesum")
        elif reg is not None:
            reg.register(OpenRunsCollector(self._sizes))
        self.template = LabelCap("prompt_template", max_prompt_templates, self._overflow)
        self.tool = LabelCap("tool", max_tools, self._overflow)
        self.service = LabelCap("service_name", max_services, self._overflow)
        self._calls: dict[tuple[str | None, str, str | None], tuple[Any, tuple[str, ...]]] = {}
        """(template, tool, service) → (labelled ``tool_calls`` child, template labels):
        ``labels()`` costs more than the increment. Only keys none of whose labels were folded
        into ``other``."""
        self.meter_provider: Any = None
        if meter_provider is not None:
            self.export_to(meter_provider)

    def _build_info(self, registry: Any) -> None:
        """Set ``loopguard_build_info{version, python}`` to 1 (dashboards count the versions)."""
        import otel_loopguard

        info = Gauge(BUILD_INFO, "The otel-loopguard version and the Python version, always 1.",
                     ["version", "python"], registry=registry, multiprocess_mode="max")
        info.labels(otel_loopguard.__version__, platform.python_version()).set(1)

    def export_to(self, meter_provider: Any) -> None:
        """Report every counter through the OpenTelemetry metrics API too, on ``meter_provider``.

        Each Prometheus counter gets an observable counter of the same series name
        (``loopguard_tool_calls_total``) that reads its series, labels as attributes, when the
        provider collects; the open-runs gauge becomes an observable gauge. Recording costs
        nothing more.
        """
        from otel_loopguard.metrics._otel import observe_metrics

        observe_metrics(self, meter_provider, lambda: total_of(self._sizes))
        self.meter_provider = meter_provider

    def _overflow(self, label: str) -> None:
        self.label_overflow.labels(label).inc()

    def track_open_runs(self, size: Callable[[], int]) -> None:
        """Report ``size()`` as (part of) ``loopguard_open_runs`` at scrape time."""
        self._sizes.append(size)

    def untrack_open_runs(self, size: Callable[[], int]) -> None:
        """Stop reporting ``size()`` (a processor shut down: its runs are no longer open)."""
        if size in self._sizes:
            self._sizes.remove(size)
        self.refresh_open_runs()

    def set_open_runs(self, value: int) -> None:
        """Set the open-runs gauge directly (multiprocess mode only; no-op otherwise)."""
        if self._open_gauge is not None:
            self._open_gauge.set(value)

    def refresh_open_runs(self) -> None:
        """Set the open-runs gauge to the sum of every tracked holder (multiprocess mode only).

        A holder whose run count changed calls this, not ``set_open_runs`` with its own count:
        the processors sharing these metrics (and ``serve`` beside them) write one gauge per
        process, which must be their sum, as the scrape-time gauge of single-process mode is.
        """
        if self._open_gauge is not None:
            self._open_gauge.set(total_of(self._sizes))

    def _key(self, template: str | None, service: str | None,
             uses: int = 1) -> tuple[str, ...]:
        """Return the leading labels of a template's series: the template, then the service."""
        if self.service_label:
            return self.template(template, uses=uses), self.service(service, uses=uses)
        return (self.template(template, uses=uses),)

    def record_call(self, template: str | None, tool: str, *, first: bool,
                    service: str | None = None) -> None:
        """Count one tool call, and the run when it is the run's first call."""
        self.record_calls(template, tool, 1, runs=1 if first else 0, service=service)

    def record_calls(self, template: str | None, tool: str, calls: int, *, runs: int = 0,
                     service: str | None = None) -> None:
        """Count ``calls`` tool calls of one tool, and ``runs`` runs they were the first of.

        The same series and overflow counts as ``calls`` calls of ``record_call``: ``serve``
        counts the calls of a batch of traces at once.
        """
        cached = self._calls.get((template, tool, service))
        if cached is None:
            cached = self._call_child(template, tool, service, calls)
        child, key = cached
        child.inc(calls)
        if runs:
            self.runs.labels(*key).inc(runs)

    def _call_child(self, template: str | None, tool: str, service: str | None,
                    uses: int) -> tuple[Any, tuple[str, ...]]:
        """Return the ``tool_calls`` child and template labels, cached when nothing was folded.

        A folded value is not cached: ``loopguard_label_overflow_total`` counts every call.
        """
        key, tool_label = self._key(template, service, uses), self.tool(tool, uses=uses)
        cached = (self.tool_calls.labels(*key, tool_label), key)
        raws = (*(template, service)[:len(key)], tool)
        folded = any(label == OTHER != raw
                     for label, raw in zip((*key, tool_label), raws, strict=True))
        if not folded and len(self._calls) < _MAX_CACHED and len(tool) <= MAX_LABEL_CHARS \
                and len(template or "") <= MAX_LABEL_CHARS:  # keys keep the raw values
            self._calls[(template, tool, service)] = cached
        return cached

    def record_decision(self, template: str | None, decision: Decision, mode: str,
                        previous: Action, *, trace_id: str | None = None,
                        service: str | None = None) -> str:
        """Count a flagged decision: its loop part as a finding, its budget part as a budget.

        ``previous`` is the highest action of the run's loop findings before this one
        (``loop_action``): budget findings never make a run count as flagged. ``trace_id``
        (32 hex digits) becomes the finding's exemplar.

        Returns:
            The ``prompt_template`` label it was counted under (``unknown``, ``other``...).
        """
        action = loop_action(decision)
        if action is not Action.CONTINUE:
            self.record_finding(template, loop_detector(decision), action, mode, previous,
                                trace_id=trace_id, service=service)
        budget = budget_part(decision)
        if budget is not None:
            self.record_budget(template, str(budget.details.get("budget")), budget.action, mode,
                               service=service)
        return self.template(template, uses=0)  # counted above: no second overflow

    def record_budget(self, template: str | None, budget: str, action: Action,
                      mode: str, *, service: str | None = None) -> None:
        """Count one budget finding (``budget`` outside ``BUDGETS`` counts as ``other``)."""
        self.budget_exceeded.labels(*self._key(template, service),
                                    budget if budget in BUDGETS else OTHER, action.label,
                                    mode).inc()

    def record_finding(self, template: str | None, detector: str, action: Action,
                       mode: str, previous: Action, *, trace_id: str | None = None,
                       service: str | None = None) -> None:
        """Count one loop-detected hint, and the run's new highest action if it rose.

        ``trace_id`` (32 hex digits), when given, is the hint's exemplar: OpenMetrics
        exposition shows the latest one of each series, so a spike on the dashboard links to
        a trace that made it. It is never a label.
        """
        key = self._key(template, service)
        self.loop_detected.labels(*key, detector, action.label, mode).inc(
            exemplar=_exemplar(trace_id))
        for level in _ACTIONS:
            if previous < level <= action:
                self.runs_flagged.labels(*key, level.label).inc()

    def record_waste(self, template: str | None, waste: Waste,
                     trace_id: str | None = None, *, service: str | None = None) -> None:
        """Count what a run wasted since it was last counted (``RunWaste.take``).

        ``trace_id``, when given, is the exemplar of every counter it increments.
        """
        key, exemplar = self._key(template, service), _exemplar(trace_id)
        if waste.tool_calls:
            self.wasted_tool_calls.labels(*key).inc(waste.tool_calls, exemplar)
        if waste.tool_seconds:
            self.wasted_tool_seconds.labels(*key).inc(waste.tool_seconds, exemplar)
        if waste.input_tokens:
            self.wasted_tokens.labels(*key, "input").inc(waste.input_tokens, exemplar)
        if waste.output_tokens:
            self.wasted_tokens.labels(*key, "output").inc(waste.output_tokens, exemplar)
        for currency, amount in waste.cost.items():
            if amount:
                self.wasted_cost.labels(*key, currency).inc(amount, exemplar)

    def record_enforcement(self, template: str | None, enforcement: str, *,
                           service: str | None = None) -> None:
        """Count one enforcement action (``abort`` or ``hint``)."""
        self.enforced.labels(*self._key(template, service), enforcement).inc()

    def record_eviction(self, reason: str, count: int = 1) -> None:
        """Count runs dropped for ``reason`` (``capacity`` or ``ttl``)."""
        self.evicted.labels(reason).inc(count)

    def record_skipped(self, reason: str) -> None:
        """Count one span passed on unchecked for ``reason`` (``queue_full``, ``shutdown``)."""
        self.skipped.labels(reason).inc()

    def record_unparented(self, run_key: str, count: int = 1) -> None:
        """Count tool calls that have no parent span and no conversation id."""
        self.unparented.labels(run_key).inc(count)

    def record_internal_error(self, kind: str) -> None:
        """Count one contained internal error of ``kind``."""
        self.internal_errors.labels(kind).inc()


def _exemplar(trace_id: str | None) -> dict[str, str] | None:
    """Return the exemplar labels of a trace id (None: no exemplar); never a series label.

    Only a W3C trace id (32 hex digits) is one: a coding agent's run is filed under
    ``<agent>:<session id>``, which no tracing backend can look up, a session id is no
    exemplar, and a long one would pass OpenMetrics' 128-character limit on exemplar labels.
    """
    if trace_id and len(trace_id) == _TRACE_ID_DIGITS and not trace_id.strip(_HEX_DIGITS):
        return {"trace_id": trace_id}
    return None


_TRACE_ID_DIGITS: Final = 32
_HEX_DIGITS: Final = "0123456789abcdefABCDEF"


_SHARED: weakref.WeakKeyDictionary[Any, LoopGuardMetrics] = weakref.WeakKeyDictionary()
"""Shared metrics by registry (or, without one, by meter provider)."""
_SHARED_LOCK = threading.Lock()


def _new_shared_lock() -> None:
    """Give a forked child an unheld ``_SHARED_LOCK`` (one held at the fork stays held)."""
    global _SHARED_LOCK  # noqa: PLW0603  # the module's one lock, replaced in a child only
    _SHARED_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_shared_lock)


def start_metrics_server(port: int = 9464, addr: str = "127.0.0.1",
                         registry: CollectorRegistry = REGISTRY) -> Any:
    """Serve ``/metrics`` on ``addr:port`` (127.0.0.1 by default, unlike prometheus-client).

    Under ``PROMETHEUS_MULTIPROC_DIR`` the served registry merges every process's files.
    ``GET`` gets the metrics (OpenMetrics when the scraper's ``Accept`` asks for it), ``HEAD``
    the same headers without the body, ``OPTIONS`` the methods it takes.

    Returns:
        The WSGI server; call ``.shutdown()`` to stop it. ``.server_port`` is the bound port.

    Raises:
        OSError: when ``addr:port`` cannot be bound, naming it:
            ``[Errno 98] cannot serve /metrics on 127.0.0.1:9464 (Address already in use)``.
    """
    from otel_loopguard.metrics._server import serve_metrics

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR") and registry is REGISTRY:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # untyped upstream
    return serve_metrics(port, addr, registry)


class _Registering:
    """A registry's ``register`` that remembers what it registered, to undo it as a whole."""

    __slots__ = ("done", "registry")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.done: list[Any] = []

    def register(self, collector: Any) -> None:
        self.registry.register(collector)
        self.done.append(collector)

    def undo(self) -> None:
        for collector in reversed(self.done):
            self.registry.unregister(collector)
        self.done.clear()
