"""The OpenTelemetry metrics backend: loopguard's counters through the OTel metrics API.

Built from the Prometheus metrics ``LoopGuardMetrics`` already defines, so every counter and
histogram it has (and any added later) gets an OTel instrument with no code of its own. Each one
is wrapped in a tee: the ``record_*`` methods stay the one recording call site, and every
``.labels(...).inc()`` adds to the Prometheus child and to the OTel instrument, with the same
capped and cleaned label values as attributes.

Names: an OTel counter is named like its Prometheus series, ``_total`` included
(``loopguard_tool_calls_total``). Prometheus's OTLP translation removes a ``total`` word from a
counter's name and appends ``_total``, and the strategies without suffixes keep the name as it
is, so in Prometheus the series is called the same either way. Instruments carry no unit: a unit
would add a suffix (``_seconds``) that the scraped series does not have.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from otel_loopguard.exceptions import ConfigError
from otel_loopguard.metrics._names import OPEN_RUNS

__all__ = ["METER_NAME", "default_meter_provider", "tee_metrics"]

METER_NAME: Final = "otel_loopguard"
"""Instrumentation scope of every instrument (``otel_scope_name`` in Prometheus)."""
_PROTOCOLS: Final = ("http/protobuf", "grpc")
_BUILT: list[Any] = []
"""The ``MeterProvider`` built for ``otlp`` when none is configured (one per process)."""
_BUILT_LOCK = threading.Lock()


class _Child:
    """One label set of a teed metric: ``inc`` and ``observe`` write to both backends."""

    __slots__ = ("_attrs", "_prom", "_record")

    def __init__(self, prom: Any, record: Callable[..., None], attrs: dict[str, str]) -> None:
        self._prom, self._record, self._attrs = prom, record, attrs

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` to the counter."""
        self._prom.inc(amount)
        self._record(amount, self._attrs)

    def observe(self, value: float) -> None:
        """Record ``value`` in the histogram."""
        self._prom.observe(value)
        self._record(value, self._attrs)


class _Tee:
    """A Prometheus counter or histogram whose children also record into an OTel instrument."""

    __slots__ = ("_names", "_prom", "_record")

    def __init__(self, prom: Any, record: Callable[..., None]) -> None:
        self._prom, self._record = prom, record
        self._names: tuple[str, ...] = tuple(prom._labelnames)

    def labels(self, *values: str, **named: str) -> _Child:
        """Return the child for these label values (positional, or by label name)."""
        attrs = dict(named) if named else dict(zip(self._names, values, strict=True))
        return _Child(self._prom.labels(*values, **named), self._record, attrs)

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` to an unlabelled counter."""
        self._prom.inc(amount)
        self._record(amount)

    def observe(self, value: float) -> None:
        """Record ``value`` in an unlabelled histogram."""
        self._prom.observe(value)
        self._record(value)


def tee_metrics(metrics: Any, meter_provider: Any, open_runs: Callable[[], int]) -> None:
    """Give every Prometheus counter and histogram of ``metrics`` an OTel twin on the provider.

    Replaces each such attribute of ``metrics`` with a tee, and adds an observable gauge
    ``loopguard_open_runs`` that reads ``open_runs()`` at collection time.
    """
    from opentelemetry.metrics import Observation

    from otel_loopguard import __version__

    meter = meter_provider.get_meter(METER_NAME, __version__)
    for attr, prom in list(vars(metrics).items()):
        kind = getattr(prom, "_type", None)
        if kind == "counter":
            instrument = meter.create_counter(f"{prom._name}_total",
                                              description=prom._documentation)
            setattr(metrics, attr, _Tee(prom, instrument.add))
        elif kind == "histogram":
            bounds = [b for b in prom._upper_bounds if b != float("inf")]
            instrument = meter.create_histogram(prom._name, description=prom._documentation,
                                                explicit_bucket_boundaries_advisory=bounds)
            setattr(metrics, attr, _Tee(prom, instrument.record))

    def observe(_options: Any) -> Iterable[Observation]:
        return [Observation(open_runs())]

    meter.create_observable_gauge(OPEN_RUNS, callbacks=[observe],
                                  description="Runs currently held in memory.")


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

    return MeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter_class())])


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
