"""The ten loop detectors and ``make_default_detectors``."""

from __future__ import annotations

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors.budget import BudgetDetector
from otel_loopguard.detectors.cycle import CycleDetector
from otel_loopguard.detectors.failure import FailureDetector, MutatingFailureDetector
from otel_loopguard.detectors.handoff import HandoffDetector
from otel_loopguard.detectors.near_duplicate import NearDuplicateDetector
from otel_loopguard.detectors.repetition import (
    BatchDetector,
    RepeatDetector,
    RereadDetector,
    StagnationDetector,
)
from otel_loopguard.types import Detector

__all__ = [
    "BatchDetector",
    "BudgetDetector",
    "CycleDetector",
    "FailureDetector",
    "HandoffDetector",
    "MutatingFailureDetector",
    "NearDuplicateDetector",
    "RepeatDetector",
    "RereadDetector",
    "StagnationDetector",
    "make_default_detectors",
]

_ALL = (StagnationDetector, RepeatDetector, CycleDetector, FailureDetector,
        MutatingFailureDetector, RereadDetector, BatchDetector, NearDuplicateDetector,
        BudgetDetector)


def make_default_detectors(config: LoopGuardConfig | None = None) -> tuple[Detector, ...]:
    """Return the tool-call detectors enabled in ``config`` (handoffs are handled apart)."""
    config = config or LoopGuardConfig()
    enabled = set(config.detectors)
    return tuple(cls(config) for cls in _ALL if cls.name in enabled)
