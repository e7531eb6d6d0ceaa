"""The normalised view of one tool call that every detector reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CountingWindow", "Step"]


@dataclass(slots=True)
class Step:
    """One tool call as the detectors see it: digests and facts, no raw payloads."""

    index: int
    """1-based position in the run (end-time order)."""
    tool: str
    kind: str
    """``read``, ``mutating``, ``poll``, ``exempt`` or ``default``."""
    call_sig: str
    """Digest of tool name + canonical arguments."""
    has_result: bool
    result_sig: str
    """Digest of the result (volatile fields stripped); ``""`` when not captured."""
    error: str | None
    """Normalised error text when the call failed (span status or structured error)."""
    error_class: str | None
    """``permanent`` or ``retryable`` (unknown errors count as retryable)."""
    error_reason: str
    """The code or phrase that classified the error, e.g. ``401`` or ``permission denied``."""
    empty: bool
    span_id: str
    start_time_ns: int
    end_time_ns: int
    new_batch: bool
    """True when this call starts a new model turn (batch)."""
    pair: str
    """The key of (call, outcome): ``call_sig:result_sig``, the call alone without a result."""
    arguments: Any = None
    """Parsed arguments, kept only while the call is being observed (near-duplicates)."""
    turns: int = 0
    """Model turns of the run before this call (0 when unknown), for the step budget."""


class CountingWindow:
    """The keys of the last ``size`` calls with, per key, the (index, span id) of each occurrence.

    Not thread-safe: used under the run's lock. Memory is O(size).
    """

    __slots__ = ("_members", "_order", "_size")

    def __init__(self, size: int) -> None:
        """Create an empty window of ``size`` entries."""
        self._order: list[str] = []  # a short list: far smaller than a deque per run
        self._size = size
        self._members: dict[str, list[tuple[int, str]]] = {}  # lists: far smaller than deques

    def push(self, key: str, index: int, span_id: str) -> list[tuple[int, str]]:
        """Add an occurrence and return every occurrence of ``key`` still in the window.

        ``index`` is the call's position in the run: the window is the last ``size`` positions,
        so a call that takes part in no key needs no entry (positions stay aligned).
        """
        order, members = self._order, self._members
        limit = index - self._size
        while order:
            oldest = members[order[0]]
            if oldest[0][0] > limit:  # the oldest entry's position is still in the window
                break
            del oldest[0]
            if not oldest:
                del members[order[0]]
            del order[0]
        order.append(key)
        occurrences = members.get(key)
        if occurrences is None:
            occurrences = members[key] = []
        occurrences.append((index, span_id))
        return occurrences
