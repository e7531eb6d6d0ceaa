"""Every exception otel-loopguard raises on purpose, and the guard that contains the rest.

What loopguard raises by mistake inside an application's span hooks is never raised there:
``InternalErrorGuard`` logs it once per kind and counts it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard._fork import after_fork_in_child

if TYPE_CHECKING:
    from otel_loopguard.types import Decision

__all__ = ["ConfigError", "InternalErrorGuard", "LoopGuardError", "ToolLoopError", "TraceFileError"]

logger = logging.getLogger("otel_loopguard")

_MAX_KINDS = 64


class LoopGuardError(Exception):
    """Base class of otel-loopguard's exceptions."""


class ConfigError(LoopGuardError, ValueError):
    """A configuration value is unknown, malformed or out of range; the message names it."""


class UnknownSettingError(ConfigError, KeyError):
    """A setting asked for by name (``config.threshold(tool, name)``) does not exist.

    A ``ConfigError`` that is also the ``KeyError`` these lookups raised before they named the
    setting; ``str()`` is the message, not its repr.
    """

    __str__ = ValueError.__str__


class TraceFileError(LoopGuardError):
    """A trace file (or one line of it) cannot be read.

    Attributes:
        path: the file, or ``"-"`` for standard input.
        line: the 1-based line number, or 0 when the whole file is at fault.
    """

    def __init__(self, path: str, line: int, message: str) -> None:
        """Build the error; ``str()`` gives ``path:line: message``."""
        self.path = path
        self.line = line
        self.reason = message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    def __reduce__(self) -> tuple[type[TraceFileError], tuple[str, int, str]]:
        """Pickle (and copy) from its parts: ``args`` holds only the whole message."""
        return type(self), (self.path, self.line, self.reason)


class ToolLoopError(LoopGuardError):
    """Raised by enforce mode to abort a tool call that would continue a loop.

    Attributes:
        tool_name: the tool that was about to run.
        repeats: how many times the repeated element has occurred, this call included; when
            the run was stopped on an earlier call (a stop is sticky for the run), that call's
            count (``decision.evidence[0].tool`` names its tool).
        decision: the policy's decision, with code, evidence and hint.
    """

    def __init__(self, decision: Decision, message: str | None = None) -> None:
        """Build the error from the decision that stopped the call."""
        self.decision = decision
        self.tool_name = decision.tool
        self.repeats = decision.evidence[0].count if decision.evidence else 0
        super().__init__(message or _message(decision, self.tool_name, self.repeats))

    def __reduce__(self) -> tuple[type[ToolLoopError], tuple[Decision, str], dict[str, object]]:
        """Pickle (and copy) with the decision: ``args`` holds only the message.

        A ``ToolLoopError`` raised in a process pool's worker reaches the caller whole, instead
        of failing to unpickle there (which breaks the pool).
        """
        return type(self), (self.decision, str(self)), self.__dict__


def _over_budget(details: Mapping[str, Any]) -> str:
    """Say which budget a call would exceed, with its limit (not the count of calls)."""
    budget, limit = details.get("budget"), details.get("limit")
    if budget == "tool":
        return f"would exceed its budget of {limit} calls per run"
    what = {"run": "tool calls", "steps": "steps", "seconds": "s"}.get(str(budget), "calls")
    return f"would exceed the run's budget of {limit} {what}"


_REPEATS: Final = frozenset({"STAGNANT_RESULT", "POLL_STAGNANT", "REPEATED_CALL"})
_FAILURES: Final = frozenset({"PERMANENT_FAILURE", "REPEATED_FAILURE", "MUTATING_FAILURE"})


def _message(decision: Decision, tool: str, repeats: int) -> str:
    code = decision.code
    looping = decision.evidence[0].tool if decision.evidence else tool
    if looping and looping != tool:  # the run stopped on another call, which ran: sticky
        what = _what(code, repeats, repeats, "", f"continued a loop ({code}, {repeats} repeats)")
        return (f'Tool "{tool}" not run: the run was stopped when "{looping}" {what} - '
                "aborting to prevent a loop")
    if code == "BUDGET_EXHAUSTED":
        what = _over_budget(decision.evidence[0].details if decision.evidence else {})
    else:
        what = _what(code, repeats, repeats - 1, " and would be retried again",
                     f"would continue a loop ({code}, {repeats} repeats)")
    return f'Tool "{tool}" {what} - aborting to prevent a loop'


def _what(code: str, repeats: int, failed: int, retried: str, other: str) -> str:
    """Say what the looping call did: ``repeats`` identical calls, ``failed`` failures."""
    if code in _REPEATS:
        return f"was called {repeats} times with identical arguments"
    if code in _FAILURES:
        return f"failed {failed} {'time' if failed == 1 else 'times'} with the same error{retried}"
    return other


class InternalErrorGuard:
    """Counts and logs (once per kind) errors raised inside loopguard's hooks.

    Thread-safe. With ``raise_errors=True`` (tests) errors propagate instead.
    """

    def __init__(self, count: Callable[[str], None] | None = None, *,
                 raise_errors: bool = False) -> None:
        """Build the guard; ``count(kind)`` is called for every contained error.

        ``kind`` is ``<where>:<exception type>`` (``on_end:KeyError``); past 64 distinct kinds
        a new one is counted as ``<where>:other``, so a stream of odd exceptions cannot grow the
        metric's series without bound.
        """
        self._count = count
        self.raise_errors = raise_errors
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        after_fork_in_child(self._new_lock)
        self.errors = 0

    def _new_lock(self) -> None:
        """Give a forked child an unheld lock.

        One held by another thread at the fork stays held there for ever, and the child's
        first contained error would hang it.
        """
        self._lock = threading.Lock()

    def handle(self, where: str, exc: BaseException) -> None:
        """Record ``exc`` raised in ``where``; re-raise it when ``raise_errors`` is set."""
        kind = f"{where}:{type(exc).__name__}"
        with self._lock:
            self.errors += 1
            first = kind not in self._logged
            if first and len(self._logged) >= _MAX_KINDS:  # past the cap: counted under other,
                kind = f"{where}:other"  # logged once as it, not once per occurrence
                first = kind not in self._logged
            if first:
                self._logged.add(kind)
            counted = kind
        if self._count is not None:
            with contextlib.suppress(Exception):  # counting must not fail the app either
                self._count(counted)
        if first:
            logger.exception("otel-loopguard: internal error in %s (logged once per kind; "
                             "counted in loopguard_internal_errors_total)", where, exc_info=exc)
        if self.raise_errors:
            raise exc
