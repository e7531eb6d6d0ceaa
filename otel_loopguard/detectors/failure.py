"""Detectors of repeated failures: any tool failing the same way, and failing mutations."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

from otel_loopguard.detectors._base import DetectorBase, ladder, occurrence_details
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Evidence

__all__ = ["FailureDetector", "MutatingFailureDetector", "classify_error"]

_CODE_RE: Final = re.compile(r"(?<![\d.])([45]\d\d)(?![\d.])")
_PERMANENT_RE: Final = re.compile(
    r"unauthori[sz]ed|unauthenticated|authenticat|\bauth\b|forbidden|permission[ _]?denied|"
    r"permission[ _]?error|access[ _]?denied|eacces|eperm|enoent|invalid|schema|"
    r"validation[ _]?error|unprocessable|not[ _]?found|no[ _]?such[ _]?file|unknown[ _]?tool|"
    r"does not exist|bad[ _]?request|not allowed|key[ _]?error|type[ _]?error|value[ _]?error",
    re.IGNORECASE)
_RETRYABLE_RE: Final = re.compile(
    r"rate.?limit|too[ _]?many[ _]?requests|time.?out|timed out|temporar|unavailable|"
    r"try again|overloaded|connection[ _]?(?:reset|refused|error|aborted)|econnreset|"
    r"etimedout|busy",
    re.IGNORECASE)


def classify_error(text: str) -> tuple[str, str]:
    """Return (``permanent`` | ``retryable``, reason) for an error message.

    HTTP-like codes win: 408, 429 and 5xx are retryable, other 4xx permanent. Then phrases:
    authentication, permission, validation and not-found errors are permanent; rate limits,
    timeouts and unavailability retryable. Anything else counts as retryable (the lenient ladder).
    """
    code = _CODE_RE.search(text)
    if code is not None:
        value = int(code.group(1))
        kind = "retryable" if value in (408, 429) or value >= 500 else "permanent"
        return kind, code.group(1)
    hit = _PERMANENT_RE.search(text)
    if hit is not None:
        return "permanent", hit.group(0).lower()
    hit = _RETRYABLE_RE.search(text)
    if hit is not None:
        return "retryable", hit.group(0).lower()
    return "retryable", "error"


class _ToolFailures:
    __slots__ = ("by_call", "by_error", "by_target")

    def __init__(self) -> None:
        self.by_error: dict[str, tuple[int, list[tuple[int, str]]]] = {}
        """Error → (failures with it, recent occurrences), any arguments."""
        self.by_call: dict[str, int] = {}
        """Call (in its world version) and error → failures."""
        self.by_target: dict[str, int] = {}
        """Target (path, URL, id) and error → failures."""

    def copy(self) -> _ToolFailures:
        other = _ToolFailures()
        other.by_error = self.by_error.copy()
        other.by_call = self.by_call.copy()
        other.by_target = self.by_target.copy()
        return other


def _bump(counts: dict[str, int], key: str) -> int:
    """Add one to ``counts[key]`` (at most 256 keys, oldest dropped) and return it."""
    count = counts[key] = counts.get(key, 0) + 1
    if len(counts) > 256:
        del counts[next(iter(counts))]
    return count


class FailureDetector(DetectorBase):
    """A tool failing the same way again; a success of that tool resets its counts.

    Permanent errors: identical arguments stop at 2; the same error with other arguments on the
    same target (path, URL, id, see ``call_target``) warns at 3 and stops at 4; on other targets
    (the agent trying the user's alternatives) it warns at 5 and never stops by itself.
    Retryable errors with identical arguments warn at 3 and stop at 5; retries of other calls do
    not add up. Identical arguments count within the run's world version: the same call failing
    again after a different successful state change is a new attempt.
    """

    name: ClassVar[str] = "failure"
    quiet_until_failure: ClassVar[bool] = True

    def new_state(self) -> dict[str, _ToolFailures]:
        """Return the run's failures since each tool's last success."""
        return {}

    def fork(self, state: dict[str, _ToolFailures], step: Step) -> dict[str, _ToolFailures]:
        """Return a table holding a copy of the failures of ``step``'s tool only."""
        failures = state.get(step.tool)
        return {} if failures is None else {step.tool: failures.copy()}

    def observe(self, state: dict[str, _ToolFailures], step: Step) -> Evidence | None:
        """Count this failure, or reset the tool on success."""
        if step.error is None:
            if state:  # a run with no failure open has nothing to reset
                state.pop(step.tool, None)
            return None
        if step.kind == "exempt":
            return None
        failures = state.get(step.tool)
        if failures is None:
            if len(state) >= 256:
                del state[next(iter(state))]
            failures = state[step.tool] = _ToolFailures()
        key = (step.error_class or "") + ":" + step.error
        count, occ = failures.by_error.get(key) or (0, [])
        occ = [*occ[-9:], (step.index, step.span_id)]  # a new list: forks share the old one
        failures.by_error[key] = (count + 1, occ)
        if len(failures.by_error) > 256:
            del failures.by_error[next(iter(failures.by_error))]
        same_call = _bump(failures.by_call, step.call_key + "\x00" + key)
        same_target = 0 if step.target is None else _bump(failures.by_target,
                                                           step.target + "\x00" + key)
        details = occurrence_details(occ, error_class=step.error_class,
                                     error_reason=step.error_reason, same_arguments=same_call,
                                     same_target=same_target)
        if step.error_class == "permanent":
            return self._permanent(step, count + 1, same_call, same_target, details)
        cfg, tool = self.config, step.tool
        action = ladder(same_call, cfg.threshold(tool, "failure_retryable_warn"), None,
                        cfg.threshold(tool, "failure_retryable_stop"))
        return self.evidence("REPEATED_FAILURE", action, tool, same_call, details)

    def _permanent(self, step: Step, count: int, same_call: int,
                   same_target: int, details: dict[str, Any]) -> Evidence | None:
        """Return the strongest of the three permanent ladders, with the count that reached it."""
        cfg, tool = self.config, step.tool
        found = [(ladder(same_call, None, None,
                         cfg.threshold(tool, "failure_permanent_same_args_stop")), same_call,
                  "same_arguments"),
                 (ladder(same_target, cfg.threshold(tool, "failure_permanent_warn"), None,
                         cfg.threshold(tool, "failure_permanent_stop")), same_target,
                  "same_target"),
                 (ladder(count, cfg.threshold(tool, "failure_permanent_any_target_warn")),
                  count, "any_target")]
        action, reached, scope = max(found, key=lambda item: item[0])  # the first strongest
        details["ladder"] = scope
        return self.evidence("PERMANENT_FAILURE", action, tool, reached, details)


class MutatingFailureDetector(DetectorBase):
    """A mutating call failing with the same error on the same target, with no success between.

    Keyed by target (the file, path or id the call changes; the call itself when it names
    none): the same error again counts whether or not the content tried changed (an edit
    re-indented each time and rejected each time is the same mistake). A success on that target
    ends its streak; a success elsewhere does not. Warns at ``mutating_failure_warn`` (3), stops
    at ``mutating_failure_stop`` (4): two rejected attempts followed by a change of approach
    are ordinary.
    """

    name: ClassVar[str] = "mutating_failure"
    observed_kinds: ClassVar[frozenset[str] | None] = frozenset({"mutating"})
    quiet_until_failure: ClassVar[bool] = True

    def new_state(self) -> dict[str, tuple[str, int, list[tuple[int, str]]]]:
        """Return, per target, its current streak of failures with one error."""
        return {}

    def fork(self, state: dict[str, tuple[str, int, list[tuple[int, str]]]],
             step: Step) -> dict[str, tuple[str, int, list[tuple[int, str]]]]:
        """Return a table holding only the streak of ``step``'s target."""
        key = step.target or step.call_sig
        streak = state.get(key)
        return {} if streak is None else {key: streak}

    def observe(self, state: dict[str, tuple[str, int, list[tuple[int, str]]]],
                step: Step) -> Evidence | None:
        """Count the same error again on the target; another error restarts, a success ends."""
        if step.kind != "mutating":
            return None
        key = step.target or step.call_sig
        if step.error is None:
            state.pop(key, None)
            return None
        previous = state.pop(key, None)
        count, streak = (previous[1], previous[2]) if previous and previous[0] == step.error \
            else (0, [])
        streak = [*streak[-9:], (step.index, step.span_id)]  # a new list: forks share the old
        state[key] = (step.error, count + 1, streak)
        if len(state) > 256:
            del state[next(iter(state))]
        cfg, tool = self.config, step.tool
        action = ladder(count + 1, cfg.threshold(tool, "mutating_failure_warn"), None,
                        cfg.threshold(tool, "mutating_failure_stop"))
        return self.evidence("MUTATING_FAILURE", action, tool, count + 1, occurrence_details(
            streak, error_class=step.error_class, error_reason=step.error_reason))
