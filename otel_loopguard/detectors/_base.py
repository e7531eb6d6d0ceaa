"""Helpers shared by the detectors."""

from __future__ import annotations

import copy
import sys
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar, Final

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Action, Detector, Evidence

__all__ = ["DetectorBase", "copy_state", "declared", "deep_fork", "ladder", "lowest",
           "occurrence_details"]

_MAX_LISTED = 10
"""Call indices and span ids listed in evidence (the most recent ones)."""
_UNSET: Final = object()


def ladder(count: int, warn: int | None, replan: int | None = None,
           stop: int | None = None) -> Action:
    """Return the action that ``count`` reaches on a warn/replan/stop ladder (None = off)."""
    if stop is not None and count >= stop:
        return Action.STOP
    if replan is not None and count >= replan:
        return Action.REPLAN
    if warn is not None and count >= warn:
        return Action.WARN
    return Action.CONTINUE


def lowest(config: LoopGuardConfig, *names: str) -> int:
    """Return the lowest of thresholds ``names`` in ``config`` and all its tool overrides.

    A count below it reaches no action for any tool, so a detector can return before it looks
    up thresholds or builds details. Thresholds that are off (None) are ignored.
    """
    found = [config.values[name] for name in names]
    for override in config.tools.values():
        found.extend(override.thresholds.get(name) for name in names)
    values = [value for value in found if value is not None]
    return min(values) if values else sys.maxsize


def occurrence_details(occurrences: Iterable[tuple[int, str]], **extra: Any) -> dict[str, Any]:
    """Return evidence details listing the call indices and the earlier calls' span ids."""
    items = list(occurrences)[-_MAX_LISTED:]
    return {"call_indices": [i for i, _ in items],
            "repeats_span_ids": [s for _, s in items[:-1] if s], **extra}


_CONTAINERS: Final = (dict, list, set, deque)


_SLOTS: dict[type, tuple[str, ...] | None] = {}
"""Class → its slots (None: its instances have a ``__dict__``), for ``copy_state``."""


def _slots(cls: type) -> tuple[str, ...] | None:
    """Return every slot of ``cls``, or None when its instances have a ``__dict__``."""
    if cls not in _SLOTS:
        names = [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())]
        dicts = "__dict__" in names or any("__dict__" in vars(klass) for klass in cls.__mro__
                                           if klass is not object)
        _SLOTS[cls] = None if dicts else tuple(names)
    return _SLOTS[cls]


def copy_state(state: Any) -> Any:
    """Return a copy of a detector state one level deeper than ``copy.copy``.

    A container (dict, list, set, deque) is copied; an object with ``__slots__`` is copied and
    so is each container it holds. Values inside those containers are shared, so this suits a
    state whose ``observe`` replaces nested values instead of changing them in place.
    """
    if isinstance(state, _CONTAINERS):
        return state.copy()
    names = _slots(type(state))
    if names is None:  # not slotted: copy.copy, then its containers
        other = copy.copy(state)
        for name, value in vars(other).items():
            if isinstance(value, _CONTAINERS):
                setattr(other, name, value.copy())
        return other
    other = object.__new__(type(state))
    for name in names:
        value = getattr(state, name, _UNSET)
        if value is not _UNSET:
            setattr(other, name, value.copy() if isinstance(value, _CONTAINERS) else value)
    return other


class DetectorBase:
    """Common constructor: a detector reads its thresholds from a ``LoopGuardConfig``."""

    name: ClassVar[str] = ""
    observed_kinds: ClassVar[frozenset[str] | None] = None
    """The call kinds whose steps ``observe`` looks at (None: all): the engine does not call
    it for a step of another kind, on which it would return None and change nothing."""
    quiet_until_failure: ClassVar[bool] = False
    """True when ``observe`` returns None and changes nothing on every call of a run until one
    of the run's calls has failed (successes matter only after a failure, as in the failure
    detectors, which on a success only forget the failures seen): the engine then does not
    call it for the calls before the run's first failure."""

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind the detector to ``config`` (defaults when None)."""
        self.config = config or LoopGuardConfig()

    def fork(self, state: Any, step: Any) -> Any:
        """Return a copy of ``state`` for one hypothetical ``step`` (the enforce-mode precheck).

        ``observe(fork, step)`` must give what ``observe(state, step)`` would, and change
        nothing in ``state``. The default is ``copy_state``; a detector whose ``observe``
        changes nested containers in place, or that can copy only the part ``step`` touches,
        overrides it.
        """
        return copy_state(state)

    def evidence(self, code: str, action: Action, tool: str, count: int,
                 details: dict[str, Any]) -> Evidence | None:
        """Return evidence, or None when ``action`` is continue."""
        if action is Action.CONTINUE:
            return None
        return Evidence(detector=self.name, code=code, action=action, tool=tool, count=count,
                        details=details)


def declared(detector: Detector, name: str, default: Any) -> Any:
    """Return what ``detector``'s class says of its ``observe`` in attribute ``name``.

    ``observed_kinds`` (the call kinds whose steps it looks at) or ``quiet_until_failure``
    (whether it can skip the calls before a run's first failure); ``default`` (every kind,
    every call) for a detector that does not say, or that inherits the attribute from a class
    whose ``observe`` it overrides (the new ``observe`` may look at more).
    """
    cls = type(detector)
    value = getattr(cls, name, None)
    if value is None:
        return default
    owner = next(k for k in cls.__mro__ if name in vars(k))
    observing = next((k for k in cls.__mro__ if "observe" in vars(k)), owner)
    return value if issubclass(owner, observing) else default


def deep_fork(state: Any, step: Step) -> Any:
    """Return a deep copy of ``state``: the fork of a detector that has no ``fork`` method."""
    return copy.deepcopy(state)
