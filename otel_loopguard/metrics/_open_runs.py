"""``loopguard_open_runs``: the runs held in memory, summed over the processors that hold them.

Read at scrape time from each holder's size callback; in prometheus-client's multiprocess mode,
where a collector of one process cannot be read by the one serving ``/metrics``, a gauge each
holder sets instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from otel_loopguard.metrics._names import OPEN_RUNS

__all__ = ["OpenRunsCollector", "multiprocess_mode", "total_of"]

logger = logging.getLogger("otel_loopguard.metrics")


class OpenRunsCollector(Collector):
    """Reports ``loopguard_open_runs`` at scrape time from a size callback."""

    def __init__(self, sizes: list[Callable[[], int]]) -> None:
        self._sizes = sizes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(OPEN_RUNS, "Runs currently held in memory.",
                                value=total_of(self._sizes))


def multiprocess_mode() -> bool:
    """Return True when prometheus-client keeps this process's values in multiprocess files.

    prometheus-client chooses when it is first imported, from ``PROMETHEUS_MULTIPROC_DIR`` then:
    a variable set later changes nothing, and the values stay in memory, where a
    ``MultiProcessCollector`` never sees them. That is logged, once per metrics.
    """
    from prometheus_client import values

    in_files = values.ValueClass is not values.MutexValue
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR") and not in_files:
        logger.warning("otel-loopguard: PROMETHEUS_MULTIPROC_DIR is set, but prometheus_client "
                       "was imported before it was, so this process's metrics stay in memory "
                       "and a multiprocess /metrics does not show them; set the variable "
                       "before the process starts")
    return in_files


def total_of(sizes: list[Callable[[], int]]) -> int:
    """Return the sum of the size callbacks that answer (one that raises counts as nothing)."""
    total = 0
    for size in list(sizes):
        try:
            total += size()
        except Exception:
            continue
    return total
