"""Every exception otel-loopguard raises on purpose."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_loopguard.types import Decision

__all__ = ["ConfigError", "LoopGuardError", "ToolLoopError", "TraceFileError"]


class LoopGuardError(Exception):
    """Base class of otel-loopguard's exceptions."""


class ConfigError(LoopGuardError, ValueError):
    """A configuration value is unknown, malformed or out of range; the message names it."""


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


class ToolLoopError(LoopGuardError):
    """Raised by enforce mode to abort a tool call that would continue a loop.

    Attributes:
        tool_name: the tool that was about to run.
        repeats: how many times the repeated element has occurred, this call included.
        decision: the policy's decision, with code, evidence and hint.
    """

    def __init__(self, decision: Decision, message: str | None = None) -> None:
        """Build the error from the decision that stopped the call."""
        self.decision = decision
        self.tool_name = decision.tool
        self.repeats = decision.evidence[0].count if decision.evidence else 0
        super().__init__(message or _message(decision, self.tool_name, self.repeats))


def _message(decision: Decision, tool: str, repeats: int) -> str:
    code = decision.code
    if code in ("STAGNANT_RESULT", "POLL_STAGNANT", "REPEATED_CALL"):
        what = f"was called {repeats} times with identical arguments"
    elif code in ("PERMANENT_FAILURE", "REPEATED_FAILURE", "MUTATING_FAILURE"):
        what = f"failed {repeats - 1} times with the same error and would be retried again"
    elif code == "BUDGET_EXHAUSTED":
        what = f"would exceed the run's tool-call budget ({repeats} calls)"
    else:
        what = f"would continue a loop ({code}, {repeats} repeats)"
    return f'Tool "{tool}" {what} - aborting to prevent a loop'

