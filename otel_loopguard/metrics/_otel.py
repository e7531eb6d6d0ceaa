"""The OpenTelemetry metrics backend: loopguard's counters through the OTel metrics API.

Built from the Prometheus counters ``LoopGuardMetrics`` already defines, so every counter it
has (and any added later) gets an OTel instrument with no code of its own. Each is an
asynchronous (observable) counter whose callback reads the Prometheus counter's series at
collection time: the ``record_*`` methods stay the one recording call site, a call costs
nothing more than it does for Prometheus alone, and the two backends cannot disagree. With
``metrics_exporter = otlp`` the Prometheus counters still count, on no registry.

Names: an OTel counter is named like its Prometheus series, ``_total`` included
(``loopguard_tool_calls_total``), and its attributes are the series' labels (capped and
cleaned as for Prometheus). Prometheus's OTLP translation removes a ``total`` word from a
counter's name and appends ``_total``, and the strategies without suffixes keep the name as it
is, so in Prometheus the series is called the same either way. Each instrument has its UCUM unit
(``OTEL_UNITS``): an annotation in braces (``{call}``) adds no suffix in that translation, and
``s`` adds none to ``loopguard_wasted_tool_seconds_total``, which has ``seconds`` already.

The SDK (1.45 on) keeps at most 2,000 attribute sets per metric and folds the others into one
point marked ``otel.metric.overflow``; loopguard caps its labels itself (the same series as
Prometheus, up to 40,804 for ``loopguard_tool_calls_total`` with the default caps), so the
provider it builds lifts that limit for its meter, and a provider of the user's that would fold
is named in a warning.
"""

from __future__ import annotations

import logging
import os
import platform
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from otel_loopguard.exceptions import ConfigError
from otel_loopguard.metrics._names import BUILD_INFO, OPEN_RUNS, OTEL_UNITS

__all__ = ["METER_NAME", "backends", "default_meter_provider", "observe_metrics"]

METER_NAME: Final = "otel_loopguard"
"""Instrumentation scope of every instrument (``otel_scope_name`` in Prometheus)."""
_PROTOCOLS: Final = ("http/protobuf", "grpc")
_BUILT: list[Any] = []
"""The ``MeterProvider`` built for ``otlp`` when none is configured (one per process)."""
_BUILT_LOCK = threading.Lock()
SDK_DEFAULT_LIMIT: Final = 2000
"""The SDK's default number of attribute sets per metric (``aggregation_cardinality_limit``)."""
_NO_LIMIT: Final = 2**31 - 1
"""The limit of the built provider's view: loopguard's own label caps bound the series."""

logger = logging.getLogger("otel_loopguard.metrics")


def _new_built_lock() -> None:
    """Give a forked child an unheld ``_BUILT_LOCK`` (one held at the fork stays held)."""
    global _BUILT_LOCK  # noqa: PLW0603  # the module's one lock, replaced in a child only
    _BUILT_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_built_lock)


class _Sources:
    """The metrics reporting through one meter provider, whose instruments add them up."""

    def __init__(self, *, limit_lifted: bool) -> None:
        self.metrics: list[tuple[Any, Callable[[], int]]] = []
        """(``LoopGuardMetrics``, its open-runs reader), in the order they were added."""
        self.warned: list[str] = ["no limit"] if limit_lifted else []
        """What the SDK-limit warning was given for (the built provider's view lifts it)."""


_SOURCES: weakref.WeakKeyDictionary[Any, _Sources] = weakref.WeakKeyDictionary()
"""Per meter provider, the metrics its instruments read (the SDK keeps one instrument per
name: a second ``create_observable_counter`` of that name does not add its callback)."""


def observe_metrics(metrics: Any, meter_provider: Any, open_runs: Callable[[], int]) -> None:
    """Give every Prometheus counter of ``metrics`` an observable OTel twin on the provider.

    Also adds ``loopguard_open_runs``, which reads ``open_runs()``: an observable up-down
    counter, as a count of things held is additive (the runs of two processes add up); a
    gauge in Prometheus all the same. And the observable gauge ``loopguard_build_info`` (1,
    the versions as attributes). Several metrics on one provider (two processors with
    registries of their own, or ``serve`` beside a processor) report through the same
    instruments, their series added up, as a Prometheus registry shared by them would.
    """
    with _BUILT_LOCK:
        sources = _SOURCES.get(meter_provider)
        first = sources is None
        if sources is None:
            sources = _SOURCES[meter_provider] = _Sources(
                limit_lifted=any(meter_provider is built for built in _BUILT))
        if any(known is metrics for known, _ in sources.metrics):
            return
        sources.metrics.append((metrics, open_runs))
    if first:
        _create_instruments(metrics, meter_provider, sources)


def _create_instruments(metrics: Any, meter_provider: Any, sources: _Sources) -> None:
    """Create the provider's instruments, each reading every metrics of ``sources``."""
    from opentelemetry.metrics import Observation

    import otel_loopguard

    meter = meter_provider.get_meter(METER_NAME, otel_loopguard.__version__)
    for attribute, prom in list(vars(metrics).items()):
        described = prom.describe() if hasattr(prom, "describe") else ()
        for family in described:
            if family.type == "counter":
                name = f"{family.name}_total"
                meter.create_observable_counter(
                    name, callbacks=[_reader(attribute, name, sources)],
                    unit=OTEL_UNITS.get(name, ""), description=family.documentation)

    def held(_options: Any) -> Iterable[Observation]:
        return [Observation(sum(size() for _, size in list(sources.metrics)))]

    meter.create_observable_up_down_counter(OPEN_RUNS, callbacks=[held],
                                            unit=OTEL_UNITS[OPEN_RUNS],
                                            description="Runs currently held in memory.")
    build = {"version": otel_loopguard.__version__, "python": platform.python_version()}
    meter.create_observable_gauge(
        BUILD_INFO, callbacks=[lambda _options: [Observation(1, build)]],
        description="The otel-loopguard version and the Python version, always 1.")


def _samples(prom: Any, name: str) -> list[Any]:
    return [sample for family in prom.collect() for sample in family.samples
            if sample.name == name]


def _reader(attribute: str, name: str, sources: _Sources) -> Callable[[Any], Iterable[Any]]:
    """Return the callback that reports the samples ``name`` of each metrics' ``attribute``.

    Samples of equal labels from several metrics are added up. The first time a metric has
    more series than the SDK keeps by default, a warning says how to keep them all.
    """
    from opentelemetry.metrics import Observation

    def read(_options: Any) -> Iterable[Observation]:
        every = list(sources.metrics)
        if len(every) == 1:
            observations = [Observation(sample.value, sample.labels)
                            for sample in _samples(getattr(every[0][0], attribute), name)]
        else:
            totals: dict[frozenset[tuple[str, str]], tuple[dict[str, str], float]] = {}
            for metrics, _ in every:
                for sample in _samples(getattr(metrics, attribute), name):
                    key = frozenset(sample.labels.items())
                    total = totals.get(key, (sample.labels, 0.0))[1]
                    totals[key] = (sample.labels, total + sample.value)
            observations = [Observation(value, labels) for labels, value in totals.values()]
        if len(observations) > SDK_DEFAULT_LIMIT and not sources.warned:
            sources.warned.append(name)
            logger.warning(
                "otel-loopguard: %s has %d series, more than the %d attribute sets the "
                "OpenTelemetry SDK keeps per metric by default; unless the MeterProvider has "
                "views=[View(meter_name=%r, aggregation_cardinality_limit=...)] with a higher "
                "limit, the rest arrive as one point marked otel.metric.overflow",
                name, len(observations), SDK_DEFAULT_LIMIT, METER_NAME)
        return observations
    return read


def backends(exporter: str, registry: Any, meter_provider: Any = None) -> tuple[Any, Any]:
    """Return the (Prometheus registry, MeterProvider) that ``metrics_exporter`` asks for.

    ``prometheus``: the registry alone; ``otlp``: no registry, the meter provider (default
    ``default_meter_provider()``); ``both``: the two.
    """
    if exporter == "prometheus":
        if meter_provider is not None:  # the setting decides: a provider alone would go unused
            logger.warning("otel-loopguard: the meter_provider passed is not used: "
                           "metrics_exporter is 'prometheus'; set it to 'otlp' or 'both' "
                           "(LOOPGUARD_METRICS_EXPORTER) to record metrics there")
        return registry, None
    return (None if exporter == "otlp" else registry), (
        meter_provider if meter_provider is not None else default_meter_provider())


def default_meter_provider() -> Any:
    """Return the global ``MeterProvider`` if one is set, else one built for OTLP export.

    The built one exports every ``OTEL_METRIC_EXPORT_INTERVAL`` (60 s by default) with the
    OTLP exporter that ``OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`` (or ``OTEL_EXPORTER_OTLP_PROTOCOL``)
    names, ``http/protobuf`` by default, configured by the standard ``OTEL_EXPORTER_OTLP_*``
    variables; it is shut down (a last export) when the process exits.

    Raises:
        ConfigError: when the protocol is unknown or the exporter package is not installed.
    """
    from opentelemetry import metrics as metrics_api

    provider = metrics_api.get_meter_provider()
    if not isinstance(provider, metrics_api.NoOpMeterProvider) and \
            type(provider).__name__ != "_ProxyMeterProvider":  # the API's "none set yet"
        return provider
    with _BUILT_LOCK:
        if not _BUILT:
            _BUILT.append(_build_otlp_provider())
        return _BUILT[0]


def _build_otlp_provider() -> Any:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL must be one of {_PROTOCOLS} for "
                          f"LOOPGUARD_METRICS_EXPORTER=otlp, got {protocol!r}")
    try:
        exporter_class = _exporter_class(protocol)
    except ImportError:
        raise ConfigError("LOOPGUARD_METRICS_EXPORTER=otlp needs the opentelemetry-exporter-otlp "
                          "package (pip install opentelemetry-exporter-otlp), or a MeterProvider "
                          "set with opentelemetry.metrics.set_meter_provider") from None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    return MeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter_class())],
                         views=_unlimited_views())


def _unlimited_views() -> list[Any]:
    """Return a view lifting the SDK's attribute-set limit for loopguard's meter.

    An SDK before 1.45 has no such limit (nor the view setting): nothing to lift there.
    """
    from opentelemetry.sdk.metrics.view import View

    try:
        return [View(meter_name=METER_NAME, aggregation_cardinality_limit=_NO_LIMIT)]
    except TypeError:
        return []


def _exporter_class(protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as Grpc,
        )
        return Grpc
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter


def reset_built_provider() -> Sequence[Any]:
    """Forget the built provider (tests); return what was built so it can be shut down."""
    with _BUILT_LOCK:
        built = list(_BUILT)
        _BUILT.clear()
    return built
