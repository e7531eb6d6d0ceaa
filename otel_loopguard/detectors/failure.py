"""Detectors of repeated failures: any tool failing the same way, and failing mutations."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

from otel_loopguard.detectors._base import DetectorBase, ladder, occurrence_details
from otel_loopguard.detectors._step import Step
from otel_loopguard.types import Action, Evidence

__all__ = ["DECLINED", "FailureDetector", "MutatingFailureDetector", "classify_error",
           "refusal_with_words", "unchanged_words"]

_CODE_RE: Final = re.compile(r"(?=[45])(?<![\d.])([45]\d\d)(?![\d.])")
"""A number of three digits that may be an HTTP status; the first test fails fast on the other
characters, where the look-behind alone was tried at every position."""
_NOT_A_CODE_BEFORE: Final = re.compile(
    r"(?:\bport\s*[=:]?\s*|\bline\s+|(?:\b[\w-]+\.)+[\w-]+:)\Z", re.IGNORECASE)
"""What stands before a number that is no HTTP status: a port (``port=443``,
``api.example.com:443``), a line (``line 412``, ``app.py:412``)."""
_NOT_A_CODE_AFTER: Final = re.compile(
    r"\s?(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|bytes?|[kmg]i?b"
    r"|passed|failed|tests?|lines?|items?|files?|%)(?!\w)", re.IGNORECASE)
"""What follows a number that is no HTTP status: a unit (``404 ms``, ``400ms``, ``413 bytes``)
or a count (``450 passed``)."""
_CONTEXT_CHARS: Final = 64
_DECLINED: Final = (
    (r"^\W*cancell?ed\W*$", "cancel"), (r"^\W*declined\W*$", "declined"),
    (r"\buser (?:rejected|declined|denied|cancell?ed|did not allow)\b", "user"),
    (r"\b(?:rejected|declined|denied|cancell?ed|interrupted) by (?:the )?user\b", "user"),
    ("doesn't want to proceed with this tool use", "proceed"),
    ("tell claude what to do differently", "claude"))
"""The words of a call the user declined or interrupted, not of a tool that failed, each with a
word every match contains: Claude Code's ``User rejected update to a.py``, ``The user doesn't
want to proceed with this tool use`` and ``Interrupted by user``; Gemini CLI's ``User did not
allow tool call``; a bare ``cancelled`` when the user turned the call down."""
_PERMANENT: Final = (
    ("unauthori[sz]ed", "auth"), ("unauthenticated", "auth"), ("authenticat", "auth"),
    (r"\bauth\b", "auth"), ("forbidden", "forbidden"), ("permission[ _]?denied", "permission"),
    ("permission[ _]?error", "permission"), ("access[ _]?denied", "acces"), ("eacces", "acces"),
    ("eperm", "eperm"), ("enoent", "enoent"), ("invalid", "invalid"), ("schema", "schema"),
    ("validation[ _]?error", "validation"), ("unprocessable", "unprocessable"),
    ("not[ _]?found", "found"), ("no[ _]?such[ _]?(?:file|function|tool|action|method)", "such"),
    ("unknown[ _]?(?:tool|function|action)", "unknown"), ("not[ _]?a[ _]?valid", "valid"),
    ("does[ _]?not[ _]?exist", "exist"),
    ("bad[ _]?request", "bad"), ("not[ _]?allowed", "allowed"), ("key[ _]?error", "key"),
    ("type[ _]?error", "type"), ("value[ _]?error", "value"), ("cannot unmarshal", "unmarshal"),
    ("syntax[ _]?error", "syntax"), ("could[ _]?not[ _]?find", "find"),
    (r"\bno[ _]?(?:exact[ _]?)?match", "match"),
    ("already being edited", "edited"),
    (r"missing[ _-]?required|required[ _](?:field|parameter|argument|property)"
     r"|(?:field|parameter|argument|property)s? (?:is |are )?required", "required"),
    (r"api[ _-]?key (?:is )?(?:required|missing|not (?:set|provided|configured))"
     r"|(?:missing|no) api[ _-]?key", "api"))
"""Phrases of permanent errors, in order of precedence, each with a word every match contains."""
_STEP_LIMIT: Final = "(?:round|step|iteration|turn)s?[ _]limit"
"""A limit of rounds, steps or iterations reached (``_timed_out``)."""
_RETRYABLE: Final = (
    ("rate.?limit", "limit"), ("too[ _]?many[ _]?requests", "many"), ("time.?out", "time"),
    ("timed[ _]?out", "timed"), ("temporar", "temporar"), ("unavailable", "unavailable"),
    ("try[ _]?again", "again"), ("overloaded", "overloaded"),
    ("connection[ _]?(?:reset|refused|error|aborted)", "connection"), ("econnreset", "econnreset"),
    ("etimedout", "etimedout"), ("busy", "busy"), (_STEP_LIMIT, "limit"))
"""Phrases of retryable errors, in order of precedence, each with a word every match contains."""


class _Phrases:
    """One list of error phrases, searched the cheap way where that gives the same answer.

    Python's ``re`` tries every alternative at every position of the text, and does it about
    three times slower with ``re.IGNORECASE``: classifying a failure of a few hundred characters
    took ~170 µs, a third of the engine's time per failing call on real coding-agent runs. For
    ASCII text, lower-casing it first and searching without the flag gives the same matches (the
    case folding of ASCII is ``str.lower``). Each phrase has a word every match of it contains:
    a phrase whose word is not in the text cannot match, so only the phrases whose words are
    there are searched, in their order (``_present``), and a text with none is not searched at
    all. Other text takes the case-insensitive search, so Unicode case folding (the Kelvin
    sign, the long s) is unchanged.
    """

    __slots__ = ("by_words", "folded", "phrases", "words")

    def __init__(self, phrases: tuple[tuple[str, str], ...]) -> None:
        self.phrases = phrases
        self.folded = re.compile("|".join(phrase for phrase, _ in phrases), re.IGNORECASE)
        self.words = tuple(dict.fromkeys(word for _, word in phrases))
        self.by_words: dict[tuple[str, ...], re.Pattern[str]] = {}
        """The words found in a text → the search of the phrases holding them (bounded)."""

    def search(self, text: str, lowered: str | None) -> str | None:
        """Return the first phrase found in ``text``, lower-cased, or None.

        ``lowered`` is ``text.lower()`` when ``text`` is ASCII, else None.
        """
        if lowered is None:
            hit = self.folded.search(text)
            return None if hit is None else hit.group(0).lower()
        found = tuple(word for word in self.words if word in lowered)
        if not found:
            return None
        hit = self._present(found).search(lowered)
        return None if hit is None else hit.group(0)

    def _present(self, words: tuple[str, ...]) -> re.Pattern[str]:
        """Return the search of the phrases whose words are ``words``, in the phrases' order.

        The leftmost match of an alternation is that of its first alternative matching there;
        dropping alternatives that cannot match anywhere in the text leaves it the same. On
        the failures of real coding-agent runs this halves the search
        (``benchmarks/bench_failure.py``). A few dozen word sets occur; the memo is bounded.
        """
        pattern = self.by_words.get(words)
        if pattern is None:
            if len(self.by_words) >= _MAX_WORD_SETS:
                self.by_words.clear()  # a race only compiles a pattern twice
            present = frozenset(words)
            pattern = self.by_words[words] = re.compile(
                "|".join(phrase for phrase, word in self.phrases if word in present))
        return pattern


_MAX_WORD_SETS: Final = 256


_DECLINED_PHRASES: Final = _Phrases(_DECLINED)
_PERMANENT_PHRASES: Final = _Phrases(_PERMANENT)
_RETRYABLE_PHRASES: Final = _Phrases(_RETRYABLE)


_UNCHANGED: Final = ("no changes were made", "no changes to make", "no replacement was performed",
                     "old_str and new_str are the same", "old_string and new_string are")
"""The words of an edit that changed nothing, which some harnesses return as a plain result:
Moatless's ``The old_str and new_str are the same. No changes were made.``, the text editor
tool's ``No replacement was performed``, Claude Code's ``No changes to make: old_string and
new_string are exactly the same.``"""
_UNCHANGED_CHARS: Final = 64
"""How much of a result is read for those words: editors begin with them (after ``Error:`` or
``The``), and the start of an edit's output is no place for them otherwise."""


def unchanged_words(result: Any) -> str | None:
    """Return the words of a mutating call's text result that say it changed nothing, or None.

    Such a call did not change the agent's world: it is a failed edit, not a success that
    ``mutating_failure`` and the repetition detectors would count as progress. A result whose
    head has none of the phrases' words as editors write them (``changes``, ``replacement``,
    ``old_str``) is not lower-cased and searched.
    """
    if type(result) is not str:
        return None
    head = result[:_UNCHANGED_CHARS]
    if "hange" not in head and "eplacement" not in head and "_str" not in head:
        return None
    lowered = head.lower()
    return next((words for words in _UNCHANGED if words in lowered), None)


UNCLASSIFIED: Final = "error"
"""The reason of an error no code or phrase classifies: retryable by the ladder, not by cause."""
_DECLINED_CHARS: Final = 300
"""How much of an error is read for a refusal's words: agents put them first."""
DECLINED: Final = "declined"
"""The class (and reason) of a call the user declined: the tool did not fail, it did not run."""
_FEEDBACK_WORDS: Final = ("<feedback>", "the following feedback", "the user said")
"""How a harness hands the model the user's words with a refusal: Cline's and Roo Code's
``The user provided the following feedback: <feedback>...</feedback>``, Claude Code's ``To tell
you how to proceed, the user said: ...``."""


def refusal_with_words(result: Any) -> bool:
    """Whether a refused call's result carries the user's own words (``_FEEDBACK_WORDS``).

    Those words are the user's new input, as a message of theirs would be: the engine hears
    them (the run's world version advances), so the next refusal is of another attempt.
    """
    if not isinstance(result, str):
        return False
    lowered = result[:2 * _DECLINED_CHARS].lower()
    return any(words in lowered for words in _FEEDBACK_WORDS)


_UNTOLD: Final = frozenset({UNCLASSIFIED, DECLINED})
"""Reasons that say nothing of the call: its output tells two failures apart (a refusal's result
holds the user's feedback), and without arguments no two are known to be one call."""


def _timed_out(reason: str | None) -> bool:
    """Whether a failure's reason is a timeout, or a limit of rounds, steps or iterations reached.

    ``timeout``, ``timed out``, ``time-out``; a sub-agent's ``task not completed within the
    round limit``, CrewAI's ``Agent stopped due to iteration limit``. A command killed at its
    time limit shows how far it got: a long build resumed after each timeout, with fewer
    targets left each time, fails the same way with another output, and is progress. Its
    output tells such failures apart, as an unclassified error's does.
    """
    return reason is not None and (reason.startswith("time")
                                   or _STEP_LIMIT_RE.fullmatch(reason) is not None)


_STEP_LIMIT_RE: Final = re.compile(_STEP_LIMIT, re.IGNORECASE)


def _status_code(text: str) -> str | None:
    """Return the first number of ``text`` that reads as an HTTP status (4xx, 5xx), or None.

    A port, a line number, a duration, a size or a count is none: a timeout ``after 404 ms``
    or from ``host:443``, ``2 failed, 450 passed``, are not a 4xx, which would make a
    retryable failure permanent (stop at the second identical call).
    """
    for hit in _CODE_RE.finditer(text):
        start, end = hit.span(1)
        if _NOT_A_CODE_BEFORE.search(text, max(0, start - _CONTEXT_CHARS), start) is None \
                and _NOT_A_CODE_AFTER.match(text, end) is None:
            return hit.group(1)
    return None


def classify_error(text: str) -> tuple[str, str]:
    """Return (``permanent`` | ``retryable`` | ``declined``, reason) for an error message.

    A call the user declined or interrupted is ``declined``: no failure of the tool. Then
    HTTP-like codes win: 408, 429 and 5xx are retryable, other 4xx permanent. Then phrases:
    authentication, permission, validation and not-found errors are permanent; rate limits,
    timeouts and unavailability retryable. Anything else counts as retryable (the lenient ladder).
    """
    lowered = text.lower() if text.isascii() else None
    if _DECLINED_PHRASES.search(text[:_DECLINED_CHARS],
                                lowered[:_DECLINED_CHARS] if lowered else None) is not None:
        return DECLINED, DECLINED
    code = _status_code(text)
    if code is not None:
        value = int(code)
        kind = "retryable" if value in (408, 429) or value >= 500 else "permanent"
        return kind, code
    phrase = _PERMANENT_PHRASES.search(text, lowered)
    if phrase is not None:
        return "permanent", phrase
    phrase = _RETRYABLE_PHRASES.search(text, lowered)
    if phrase is not None:
        return "retryable", phrase
    return "retryable", UNCLASSIFIED


class _ToolFailures:
    __slots__ = ("by_call", "by_error", "by_target", "last")

    def __init__(self) -> None:
        self.by_error: dict[str, tuple[int, list[tuple[int, str]]]] = {}
        """Error → (failures with it, recent occurrences), any arguments."""
        self.by_call: dict[str, int] = {}
        """Call (in its world version) and error → failures."""
        self.by_target: dict[str, int] = {}
        """Target (path, URL, id) and error → failures."""
        self.last: dict[str, tuple[int, int, str]] = {}
        """Error → (index, model turn, call) of its latest failure (``_sibling``)."""

    def copy(self) -> _ToolFailures:
        other = _ToolFailures()
        other.by_error = self.by_error.copy()
        other.by_call = self.by_call.copy()
        other.by_target = self.by_target.copy()
        other.last = self.last.copy()
        return other


def _sibling(last: tuple[int, int, str], step: Step) -> bool:
    """Whether ``step`` is another call issued with the failure at ``last`` (index, turn, call).

    Calls of one model turn are issued together, before any of their results is seen: another
    call failing the same way is no retry of it (three different edits of one reply rejected
    alike are one rejected reply). The same call issued again in one turn is a repeat all the
    same, and calls whose arguments were not captured are not known to be the same (absent is
    not the same). The turn is the run's model-turn count when known; without turns, a call
    right after the failure that did not start a new batch (it overlapped the calls before it)
    is of its batch.
    """
    index, turn, call = last
    if step.arguments_captured and step.call_sig == call:
        return False
    if step.turns:
        return step.turns == turn
    return index == step.index - 1 and not step.new_batch


def _bump(counts: dict[str, int], key: str) -> int:
    """Add one to ``counts[key]`` (at most 256 keys, oldest dropped) and return it."""
    count = counts[key] = counts.get(key, 0) + 1
    if len(counts) > 256:
        del counts[next(iter(counts))]
    return count


class FailureDetector(DetectorBase):
    """A tool failing the same way again; a success of that tool resets its counts.

    A call the user declined (``classify_error``'s ``declined``) counts only until the user
    says something: their answer is new input, so a refusal after it is a new attempt's.

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
        key = (step.error_class or "") + ":" + _unnamed_arguments(_streak_error(step))
        if step.error_reason in _UNTOLD or _timed_out(step.error_reason):
            key += ":" + step.result_sig  # "exit code 1": the output tells failures apart
        last = failures.last.get(key)
        failures.last[key] = (step.index, step.turns, step.call_sig)
        if len(failures.last) > 256:
            del failures.last[next(iter(failures.last))]
        call_error = step.call_key + "\x00" + key
        if last is not None and _sibling(last, step) and not (
                step.arguments_captured and call_error in failures.by_call):
            # issued with that failure, before it was seen: no retry of it, unless this very
            # call failed so before (a retry of its own failure shares a turn with another)
            return None
        count, occ = failures.by_error.get(key) or (0, [])
        occ = [*occ[-9:], (step.index, step.span_id)]  # a new list: forks share the old one
        failures.by_error[key] = (count + 1, occ)
        if len(failures.by_error) > 256:
            del failures.by_error[next(iter(failures.by_error))]
        same_call = _bump(failures.by_call, call_error)
        same_target = 0 if step.target is None else _bump(failures.by_target,
                                                           step.target + "\x00" + key)
        if not step.arguments_captured and step.error_class == "permanent":
            # identical arguments cannot be known: the stop at the second resubmission needs
            # them; the tool's same error counts as on one target (warn at 3, stop at 4)
            same_call, same_target = 0, same_call
        details = occurrence_details(occ, error_class=step.error_class,
                                     error_reason=step.error_reason, same_arguments=same_call,
                                     same_target=same_target)
        if step.error_class == "permanent":
            return self._permanent(step, count + 1, same_call, same_target, details)
        return self._retryable(step, count + 1, same_call, same_target, details)

    def _retryable(self, step: Step, count: int, same_call: int, same_target: int,
                   details: dict[str, Any]) -> Evidence | None:
        """Return the retryable ladder's evidence: identical arguments, else by target.

        ``count``: the tool's failures with this error (an unclassified one's with this output
        too), whatever the arguments, since its last success.
        """
        cfg, tool = self.config, step.tool
        if not step.arguments_captured and (step.error_reason in _UNTOLD
                                            or _timed_out(step.error_reason)):
            # identical arguments cannot be known, and a message no code or phrase classifies
            # ("exit code 1", a refusal) says nothing of the call either, nor does a timeout
            # (any command may reach its time limit, a long one again and again): the tool's
            # same error counts as on other targets (warn at 5, never a stop), if it says
            # something of the call at all
            if _names_nothing(step.error):
                return None
            if _echoes_the_call(step.error):  # the same call again: warn at 3, never a stop
                return self.evidence("REPEATED_FAILURE", ladder(
                    same_call, cfg.threshold(tool, "failure_retryable_warn")), tool, same_call,
                    details)
            details["ladder"] = "any_target"
            return self.evidence("REPEATED_FAILURE", ladder(
                same_call, cfg.threshold(tool, "failure_permanent_any_target_warn")),
                tool, same_call, details)
        # the stop is for the same call retried: without its arguments the tool's same error
        # may be other calls' (get_order(A), (B), (C) -> 503 each), as on the permanent ladder
        action = ladder(same_call, cfg.threshold(tool, "failure_retryable_warn"), None,
                        cfg.threshold(tool, "failure_retryable_stop")
                        if step.arguments_captured else None)
        if step.error_reason in _UNTOLD and same_target > same_call:
            by_target = ladder(same_target, cfg.threshold(tool, "failure_retryable_warn"))
            if by_target > action:
                details["ladder"] = "same_target"
                return self.evidence("REPEATED_FAILURE", by_target, tool, same_target, details)
        if action is Action.CONTINUE and step.error_reason in _UNTOLD \
                and count > max(same_call, same_target) \
                and ((step.has_result and not step.empty) or not _names_nothing(step.error)):
            # the same unclassified failure and output from calls that all differ (a broken
            # tool answering every command with one traceback) count as when the arguments
            # are not known: on other targets, warn at 5, never a stop
            any_target = ladder(count, cfg.threshold(tool, "failure_permanent_any_target_warn"))
            if any_target is not Action.CONTINUE:
                details["ladder"] = "any_target"
                return self.evidence("REPEATED_FAILURE", any_target, tool, count, details)
        return self.evidence("REPEATED_FAILURE", action, tool, same_call, details)

    def _permanent(self, step: Step, count: int, same_call: int,
                   same_target: int, details: dict[str, Any]) -> Evidence | None:
        """Return the strongest of the three permanent ladders, with the count that reached it.

        A mutating call's resubmissions have no stop at 2: an edit rejected again verbatim
        ("old_string not found") is no 404 asked again, and two identical rejected edits followed
        by another approach are ordinary. They count on the target's ladder (warn at 3, stop at
        4), as in ``mutating_failure``.
        """
        cfg, tool = self.config, step.tool
        mutating = step.kind == "mutating"
        if mutating:
            same_target = max(same_target, same_call)
        found = [(ladder(same_call, None, None,
                         cfg.threshold(tool, "failure_permanent_same_args_stop"))
                  if not mutating else Action.CONTINUE, same_call, "same_arguments"),
                 (ladder(same_target, cfg.threshold(tool, "failure_permanent_warn"), None,
                         cfg.threshold(tool, "failure_permanent_stop")), same_target,
                  "same_target"),
                 (ladder(count, cfg.threshold(tool, "failure_permanent_any_target_warn")),
                  count, "any_target")]
        action, reached, scope = max(found, key=lambda item: item[0])  # the first strongest
        details["ladder"] = scope
        return self.evidence("PERMANENT_FAILURE", action, tool, reached, details)


_Streak = tuple[str, int, list[tuple[int, str]], tuple[int, int, str]]
"""A target's streak of failures: (error, count, occurrences, (index, turn, call) of the last)."""


class MutatingFailureDetector(DetectorBase):
    """A mutating call failing with the same error on the same target, with no success between.

    Keyed by target (the file, path or id the call changes; the call itself when it names
    none): the same error again counts whether or not the content tried changed (an edit
    re-indented each time and rejected each time is the same mistake). A success on that target
    ends its streak; a success elsewhere does not. Warns at ``mutating_failure_warn`` (3), stops
    at ``mutating_failure_stop`` (4): two rejected attempts followed by a change of approach
    are ordinary. Failures whose arguments were not captured name no target (absent is not
    the same): they count on their tool, on ``failure``'s other-targets ladder (warn at
    ``failure_permanent_any_target_warn``, 5, never a stop by itself).
    """

    name: ClassVar[str] = "mutating_failure"
    observed_kinds: ClassVar[frozenset[str] | None] = frozenset({"mutating"})
    quiet_until_failure: ClassVar[bool] = True

    def new_state(self) -> dict[str, _Streak]:
        """Return, per target, its current streak of failures with one error."""
        return {}

    def fork(self, state: dict[str, _Streak],
             step: Step) -> dict[str, _Streak]:
        """Return a table holding only the streaks of ``step``'s target (by any of its names)."""
        key = _streak_key(step)
        return {other: streak for other, streak in state.items() if _same_target(other, key)}

    def observe(self, state: dict[str, _Streak],
                step: Step) -> Evidence | None:
        """Count the same error again on the target; another error restarts, a success ends.

        A change the user declined counts only until the user says something
        (``_streak_error``).
        """
        if step.kind != "mutating":
            return None
        key = _streak_key(step)
        if step.error is None:
            state.pop(key, None)
            for other in [other for other in state if _same_target(other, key, any_tool=True)]:
                del state[other]  # the same file by another name or tool: a success on it too
            # a failure whose arguments were lost may have been on this target: it ends too
            state.pop(_lost_key(step.tool), None)
            return None
        previous = state.pop(key, None)
        if previous is None and state:
            named = next((other for other in state if _same_target(other, key)), None)
            if named is not None:  # the file's streak under another of its names goes on
                previous = state.pop(named)
        error = _streak_error(step)
        if previous and previous[0] == error and _sibling(previous[3], step):
            # issued with that failure, before it was seen: no second attempt
            state[key] = (error, previous[1], previous[2],
                          (step.index, step.turns, step.call_sig))
            return None
        count, streak = (previous[1], previous[2]) if previous and previous[0] == error \
            else (0, [])
        streak = [*streak[-9:], (step.index, step.span_id)]  # a new list: forks share the old
        state[key] = (error, count + 1, streak, (step.index, step.turns, step.call_sig))
        if len(state) > 256:
            del state[next(iter(state))]
        cfg, tool = self.config, step.tool
        if key == _lost_key(tool):  # no target known: the other-targets ladder, no stop
            action = ladder(count + 1, cfg.threshold(tool, "failure_permanent_any_target_warn"))
        else:
            action = ladder(count + 1, cfg.threshold(tool, "mutating_failure_warn"), None,
                            cfg.threshold(tool, "mutating_failure_stop"))
        return self.evidence("MUTATING_FAILURE", action, tool, count + 1, occurrence_details(
            streak, error_class=step.error_class, error_reason=step.error_reason))


_FEW_WORDS: Final = 3
"""An error of this many words or fewer names nothing of the call (``_names_nothing``)."""


def _names_nothing(error: str | None) -> bool:
    """Whether an error text is too short to tell one call's failure from another's.

    ``exit code 1``, ``Error``, ``NameError``, ``prover error``, ``user declined``: any call of
    the tool may fail that way. Without the calls' arguments, the same such error five times
    is not known to be the same failure five times (absent is not the same): a shell agent
    setting up a project fails that way again and again with other commands each time. A
    longer error names something (a file it could not find, an element, the tool's message).
    """
    return not error or len(error.split(None, _FEW_WORDS)) <= _FEW_WORDS


_ARGUMENT_NAMES_RE: Final = re.compile(
    r"(unexpected keyword argument|required (?:positional |keyword-only )?arguments?:?"
    r"|multiple values for (?:keyword )?argument) '[^']*'(?:,? (?:and )?'[^']*')*")
"""Python's rejection of a call's signature, with the argument names it quotes."""


def _unnamed_arguments(error: str) -> str:
    """Return ``error`` with the argument names a signature rejection quotes masked.

    ``PageDownTool.forward() got an unexpected keyword argument 'page_down'``, then ``''``,
    then ``'arguments'``: an agent sending the tool other made-up arguments each time is
    rejected the same way each time (whatever their content, the rubric's loop), and without
    the arguments captured the names were all that told the failures apart.
    """
    return _ARGUMENT_NAMES_RE.sub(r"\1 '#'", error) if "argument" in error else error


_ECHOED_VALUE_RE: Final = re.compile(r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w.])")
"""A number of three digits or more, standing alone (no part of an id, a version, a path)."""


def _echoes_the_call(error: str | None) -> bool:
    """Whether an unclassified error quotes values of its own call: two numbers or more.

    ``payment amount does not add up, total price is 326, but paid 163``: without the call's
    arguments, the same text again is the same payment again, not the agent trying the user's
    alternatives (``balance not enough``, ``user not found``, a 503 name no such values).
    """
    return error is not None and len(_ECHOED_VALUE_RE.findall(error)) >= 2


def _streak_error(step: Step) -> str:
    """The error a failure is counted by; a refusal of the user's in the run's world version.

    A user who declines a call and then tells the agent what they want (a new message, which
    advances the run's world version) has given it new input: the next refusal is of another
    attempt, whatever its words. Refusals with nothing said between them (the same edit turned
    down again and again) go on counting.
    """
    if step.error_class == DECLINED:
        return f"{step.error}@{step.version}"
    return step.error or ""  # a failure's (the callers ask for nothing else)


def _same_target(one: str, other: str, *, any_tool: bool = False) -> bool:
    """Whether two streak keys name one file: the same, or a relative path and one ending in it.

    A command's relative path (``environment.yml``, ``pkg/a.py``) is resolved where its line
    says (``cd /app && ...``, ``kinds``) but not where the harness runs a bare command:
    ``/app/environment.yml`` and ``environment.yml`` of one tool are one file. Only paths
    (a ``/`` or a ``.`` in them) are matched so; a call's own key never is. With ``any_tool``,
    the keys of two tools name one file too when their paths do (an ``apply_patch`` rejected,
    then a ``shell`` script that writes the file): a success on a file is one whatever wrote it.
    """
    if one == other:
        return True
    tool, _, path = one.partition("\x00")
    other_tool, _, other_path = other.partition("\x00")
    if not path or not other_path or "\x00" in path + other_path:
        return False
    if tool != other_tool:
        if not any_tool:
            return False
        path, other_path = _file_of(path), _file_of(other_path)
        if "/" not in path or "/" not in other_path:
            return False  # across tools, file paths only (an id names a record of its tool's)
    return path == other_path or _suffix_path(path, other_path)


def _file_of(target: str) -> str:
    """Return the path a target names.

    ``/a.py`` for a shell command's ``/a.py`` and for a function tool's ``path=/a.py``
    (``call_target``'s ``name=value``).
    """
    name, equals, value = target.partition("=")
    return value if equals and name.isidentifier() else target


def _suffix_path(path: str, other_path: str) -> bool:
    """Whether one of two paths is relative and the other ends in it (``a/b.py``, ``/x/a/b.py``)."""
    shorter, longer = sorted((path, other_path), key=len)
    return ("/" in shorter or "." in shorter) and not shorter.startswith("/") \
        and longer.endswith("/" + shorter.removeprefix("./"))


def _streak_key(step: Step) -> str:
    """Return what a mutating call's failures are counted on: its target, else the call.

    A call whose arguments were not captured names no target, and may be on any: its failures
    are counted on its tool, and any success of that tool ends them (absent is not the same:
    the failing call may have been on the target that now succeeded, whether or not the
    success's own arguments were captured).
    """
    if step.target is not None:
        return step.target
    return step.call_sig if step.arguments_captured else _lost_key(step.tool)


def _lost_key(tool: str) -> str:
    """The streak key of ``tool``'s failures whose arguments were lost (``_streak_key``)."""
    return "\x00any:" + tool

