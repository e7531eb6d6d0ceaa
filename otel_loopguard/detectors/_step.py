"""The normalised view of one tool call that every detector reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CountingWindow", "Step", "in_world", "sequence_key"]


def in_world(key: str, version: int) -> str:
    """Return ``key`` (a call, or a call and its outcome) as seen in world ``version``.

    The world version of a run advances on each successful mutating call that differs from the
    run's earlier ones (see ``LoopEngine``). A call made after such a change is a new
    observation, so the repetition detectors count repeats of its key within one version. A
    mutation is keyed by the version it leaves, so applying it again with the same result, with
    no other change between, repeats its key, and applying it again after another change does
    not (``git add`` after each edit).
    """
    return f"{key}@{version}" if version else key


def sequence_key(step: Step) -> str:
    """Return the key of ``step`` as a member of a repeating sequence (cycle, batch).

    A read or plain call is its ``pair`` (in its world version). A mutation is its call and
    outcome in any version: a block that rebuilds the same file with the same commands repeats
    even though its first run changed the world. A call whose result was not captured (and
    that did not fail) has an unknown outcome, equal to no other: a key of its own.
    """
    if not step.has_result and step.error is None:
        return f"\x00absent:{step.index}"
    return step.outcome if step.kind == "mutating" else step.pair


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
    """The key of (call, outcome): ``call_sig:result_sig``, the call alone without a result; in
    the run's current world version (``in_world``), so repeats count within one version."""
    arguments: Any = None
    """Parsed arguments, kept only while the call is being observed (near-duplicates)."""
    turns: int = 0
    """Model turns of the run before this call (0 when unknown), for the step budget."""
    call_key: str = ""
    """The call alone (``call_sig``) in the run's current world version (``in_world``)."""
    outcome: str = ""
    """The key of (call, outcome) in no particular world version (``pair`` without it)."""
    version: int = 0
    """The run's world version after this call: how many distinct successful state changes
    (mutating calls with a new call or result) the run has seen up to and including it."""
    target: str | None = None
    """What a failed call acted on (a path, URL or id from its arguments), or what a mutating
    call changes once a mutating call of the run has failed (a success then ends the failure
    streak on its target); else None."""
    unchanged: int = 1
    """In how many world versions in a row this call got this same outcome, this one's
    included: the state changes its identical outcome survived, plus one."""
    sequence: str = ""
    """``sequence_key`` of this step as ``make_step`` gives it, so the detectors that compare
    sequences (cycle, batch) do not derive it each; ``""`` in a step built otherwise."""
    arguments_captured: bool = True
    """False when the span carried no arguments at all: then no two calls are known to be
    identical (the failure ladder's stop at the second identical call does not apply)."""


class CountingWindow:
    """The keys of the last ``size`` calls with, per key, the (index, span id) of each occurrence.

    Occurrences that left the window are dropped lazily: a key's own when it comes again, and
    the others a generation at a time. Keys live in two tables, the current generation (keys
    pushed since the latest turnover) and the previous one; the first push ``size`` positions
    or more after a turnover starts a new generation and forgets the previous one whole, whose
    keys were last pushed before the latest turnover and so have all left the window. A push
    touches no other key, a turnover loops over none, and the window holds at most
    ``3 * size`` occurrences.

    Not thread-safe: used under the run's lock. Memory is O(size).
    """

    __slots__ = ("_expiry", "_members", "_previous", "_size")

    def __init__(self, size: int) -> None:
        """Create an empty window of ``size`` entries."""
        self._size = size
        self._members: dict[str, list[tuple[int, str]]] = {}  # lists: far smaller than deques
        """The current generation: key → its occurrences, oldest first."""
        self._previous: dict[str, list[tuple[int, str]]] = {}
        """The previous generation, whose keys move to the current one when pushed again."""
        self._expiry = size
        """The position at which the next push starts a new generation."""

    def push(self, key: str, index: int, span_id: str) -> list[tuple[int, str]]:
        """Add an occurrence and return every occurrence of ``key`` still in the window.

        ``index`` is the call's position in the run: the window is the last ``size`` positions,
        so a call that takes part in no key needs no entry (positions stay aligned).
        """
        if index >= self._expiry:  # a new generation; the one before the previous has left
            self._previous, self._members = self._members, {}
            self._expiry = index + self._size
        members = self._members
        occurrences = members.get(key)
        if occurrences is None:
            occurrences = self._previous.pop(key, None)
            if occurrences is None:
                occurrences = members[key] = [(index, span_id)]
                return occurrences
            members[key] = occurrences
        limit = index - self._size
        while occurrences and occurrences[0][0] <= limit:  # left the window
            del occurrences[0]
        occurrences.append((index, span_id))
        return occurrences

    def copy(self) -> CountingWindow:
        """Return an independent copy (``push`` on it leaves this window as it is)."""
        other = CountingWindow(self._size)
        other._members = {key: occ.copy() for key, occ in self._members.items()}
        other._previous = {key: occ.copy() for key, occ in self._previous.items()}
        other._expiry = self._expiry
        return other

    def only(self, key: str, after: int = 0) -> CountingWindow:
        """Return an independent window holding only the occurrences of ``key``.

        ``push(key, ...)`` on it returns what it would return on this window: the other keys
        never change the occurrences of ``key`` (positions, not entries, bound the window).
        With ``after``, only the occurrences after that position.
        """
        other = CountingWindow(self._size)
        occurrences = self._members.get(key) or self._previous.get(key)
        if occurrences:
            other._members = {key: [item for item in occurrences if item[0] > after]
                                   if after else occurrences.copy()}
        other._expiry = self._expiry
        return other

    def occurrences(self, key: str, index: int) -> list[tuple[int, str]]:
        """Return the occurrences of ``key`` in the window that ends at ``index`` (a copy)."""
        limit = index - self._size
        found = self._members.get(key) or self._previous.get(key) or ()
        return [item for item in found if item[0] > limit]

    def first_since(self, prefix: str, key: str, after: int, index: int) -> int:
        """Return the latest first occurrence after ``after`` of a key starting with ``prefix``.

        Keys other than ``key`` only, first occurrences within the window that ends at
        ``index``; 0 when there is none. A loop over the window's keys: for a count that
        reached a threshold, not for every push.
        """
        limit = index - self._size
        latest = 0
        for table in (self._members, self._previous):
            for name, occurrences in table.items():
                if name == key or not name.startswith(prefix):
                    continue
                for position, _ in occurrences:
                    if position > limit:  # the first one still in the window
                        if position > after and position > latest:
                            latest = position
                        break
        return latest
