"""Detectors of repeated calls: stagnation, repeat, reread and batch."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase, ladder, lowest, occurrence_details
from otel_loopguard.detectors._step import CountingWindow, Step, sequence_key
from otel_loopguard.kinds import CallKindClassifier
from otel_loopguard.kinds._tools import is_browser_action, is_page_turn
from otel_loopguard.types import Action, Evidence

__all__ = ["BatchDetector", "RepeatDetector", "RereadDetector", "StagnationDetector"]

_MAX_BATCH = 64
"""Parallel calls of one turn the batch detector compares; larger turns are skipped."""
_MAX_TRACKED = 1024
"""Distinct keys a run-wide counter keeps (oldest dropped first)."""
STALL_WARN = 4
"""Reads in a row, at least two of them different, with one identical non-empty result: warn
(``STALLED_RESULT``)."""
UNSEEN_PAGE_TURNS: Final = 2
"""Back-to-back page turns (``is_page_turn``: ``scroll``, ``page_down``...) whose pages were
not captured that ``repeat`` lets pass before its warn (at the 5th by default; never more than
a warn): reading down a long page takes a few identical turns, and without the pages nothing
tells them from turns that show nothing new. Four browsing agents scrolling down three to five
times through itineraries and filter panels were warned at the 3rd, and one paging down a list
of 2,320 commits eleven times replanned at the 7th; a scroll that leads nowhere goes on for
longer."""
_STALL_LISTED = 10
"""Occurrences of a stalled result the state keeps (what ``occurrence_details`` lists)."""
THINK_TOOLS: Final = frozenset({"think", "Think"})
"""Tools that only record the agent's reasoning and return nothing (tau-bench's ``think``, the
"think" tool of Anthropic's guide): such calls in a row, reworded, with nothing said or done
between them, are an agent deliberating instead of acting (``STALLED_RESULT``)."""


UNSAID: Final = "\x00unsaid"
"""The result of a ``THINK_TOOLS`` call that was not captured: nothing, as every thought
returns (``think_key``)."""


def think_key(result: str, version: int) -> str:
    """The stall key of a ``THINK_TOOLS`` call: its result in the run's world version.

    A user's message or a change between two thoughts (a new world version) is new input, and
    starts the run again.
    """
    return f"{result}@{version}"


READ_ROUNDS: Final = 3
"""Windows over which a read whose result is absent is counted too (``RepeatDetector``)."""


def unsaid_thought(step: Step) -> bool:
    """Whether ``step`` is a thought whose (empty) result was not captured.

    A ``THINK_TOOLS`` call returns nothing by what it is: without results captured, thoughts
    in a row still stall (``STALLED_RESULT``), at ``STALL_WARN`` as with their words: without
    its arguments, whether a thought was reworded is not known, but four thoughts in a row,
    nothing done or said between, are an agent deliberating instead of acting whatever their
    words (an agent thinking two or three times before it acts is ordinary).
    """
    return not step.has_result and step.error is None and step.tool in THINK_TOOLS


Stall = tuple[str, str, bool, int, tuple[tuple[int, str], ...]]
"""The latest run of identical results: (result, first call, other calls among them, count,
the latest occurrences (index, span id), oldest first). Never changed in place: replaced."""
_NO_STALL: Stall = ("", "", False, 0, ((-2, ""),))


class _PollState:
    __slots__ = ("last", "stall", "window")

    def __init__(self, size: int) -> None:
        self.window = CountingWindow(size)
        self.last: dict[str, tuple[str, list[tuple[int, str]]]] = {}
        self.stall: Stall = _NO_STALL
        """The run of calls in a row that returned the same non-empty result (see Stall)."""


def _results_of(step: Step) -> str:
    """Return the prefix of every window key of ``step``'s call with a result (``Step.pair``)."""
    return step.call_sig + ":"


class StagnationDetector(DetectorBase):
    """The same call returning the same result (volatile fields stripped), in the same world.

    Counts occurrences of (call, result) in the last ``window_size`` calls, within the run's
    current world version (a different successful state change restarts the count): warn at 3,
    replan at 4, stop at 5. A plain call that keeps returning the identical result across
    different state changes gets only a ``NO_EFFECT`` warn, when that result has survived 5
    changes (the 6th identical result, each after another change). Poll tools count unchanged
    results in a row instead: warn at 5, stop at 10. Failed calls are left to the failure
    detectors; calls without a captured result to ``repeat``.

    Different reads that keep returning the identical result (a grep whose context window or
    alternation order changes, the same output each time) learn nothing either: at the 4th read
    in a row (``STALL_WARN``; no other call between, the parallel calls of a batch in order)
    with the same non-empty, successful result, at least two of them different calls, a
    ``STALLED_RESULT`` warn, never more by itself. Only ``read`` calls count, and the calls of a
    ``THINK_TOOLS`` tool, empty results included, in one world version: mutating calls (a
    constant result is their success), plain calls (a click or a script's constant answer),
    empty results, polls, failures and uncaptured results never do, and end the run.
    """

    name: ClassVar[str] = "stagnation"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "stagnation_warn", "stagnation_replan",
                             "stagnation_stop")
        self._poll_floor = lowest(self.config, "poll_warn", "poll_stop")
        self._poll_kept = max([self.config.poll_stop, *(
            override.thresholds.get("poll_stop") or 0 for override in self.config.tools.values())])
        """The longest streak any tool's ladder reads: its ``poll_stop`` may exceed the global."""
        self._no_effect_floor = lowest(self.config, "stagnation_no_effect_warn")

    def new_state(self) -> _PollState:
        """Return the run's window and per-call poll streaks."""
        return _PollState(self.config.window_size)

    def fork(self, state: _PollState, step: Step) -> _PollState:
        """Return a copy for one hypothetical step: its pair's window, its poll streak."""
        other = _PollState(1)
        window = state.window
        kept = window.occurrences(step.pair, step.index)
        # the count as observe restarts it (a new result of the call since the first of them),
        # found here only when the step may reach a threshold: the copy holds its pair alone
        restart = window.first_since(_results_of(step), step.pair, kept[0][0], step.index) \
            if kept and len(kept) + 1 >= self._floor else 0
        other.window = window.only(step.pair, restart)
        other.stall = state.stall  # replaced, never changed in place: shared safely
        last = state.last.get(step.call_key)
        if last is not None:
            other.last[step.call_key] = last
        return other

    def observe(self, state: _PollState, step: Step) -> Evidence | None:
        """Count this (call, result) and report the ladder it reached."""
        if not step.has_result or step.error is not None or step.kind == "exempt":
            return self.stall(state, step, think_key(UNSAID, step.version)) \
                if unsaid_thought(step) else None
        if step.kind == "mutating" and not is_browser_action(step.tool):
            return None  # its (empty or constant) result is its success, never nothing new
        if step.kind == "poll":
            return self._poll(state, step)
        stalled = None
        if step.kind == "read" and not step.empty:
            stalled = self.stall(state, step)
        elif step.tool in THINK_TOOLS:
            stalled = self.stall(state, step, think_key(step.result_sig, step.version))
        occ = state.window.push(step.pair, step.index, step.span_id)
        if len(occ) >= self._floor:
            # a result of the same call new to the window since the first of these is
            # progress (a poll's new output between its "no output yet"s): the count restarts
            restart = state.window.first_since(_results_of(step), step.pair, occ[0][0],
                                               step.index)
            if restart:
                occ = [item for item in occ if item[0] > restart]
        if len(occ) >= self._floor:
            cfg, tool = self.config, step.tool
            action = ladder(len(occ), cfg.threshold(tool, "stagnation_warn"),
                            cfg.threshold(tool, "stagnation_replan"),
                            cfg.threshold(tool, "stagnation_stop"))
            if action:
                return self.evidence("STAGNANT_RESULT", action, tool, len(occ),
                                     occurrence_details(occ, call=step.call_sig[:8],
                                                        result=step.result_sig[:8],
                                                        window=cfg.window_size))
        if step.unchanged >= self._no_effect_floor and step.kind == "default":
            return self._no_effect(step) or stalled
        return stalled

    def stall(self, state: _PollState, step: Step, key: str | None = None) -> Evidence | None:
        """Count a non-empty result of a successful read, or a thought (``STALLED_RESULT``).

        One comparison with the previous such call's result on a call that returns another.
        ``key``: what a ``THINK_TOOLS`` call is compared by (``think_key``); a read's result.
        """
        stall = state.stall
        key = step.result_sig if key is None else key
        if key != stall[0] or step.index != stall[4][-1][0] + 1:
            state.stall = (key, step.call_sig, False, 1, ((step.index, step.span_id),))
            return None
        count, mixed = stall[3] + 1, stall[2] or step.call_sig != stall[1]
        occ = (*stall[4][1 - _STALL_LISTED:], (step.index, step.span_id))
        state.stall = (stall[0], stall[1], mixed, count, occ)
        if not mixed or count < STALL_WARN:
            return None
        return self.evidence("STALLED_RESULT", Action.WARN, step.tool, count,
                             occurrence_details(occ, result=step.result_sig[:8]))

    def _no_effect(self, step: Step) -> Evidence | None:
        """A rerun whose identical result survived state changes: warn, never more."""
        warn = self.config.threshold(step.tool, "stagnation_no_effect_warn")
        if warn is None or step.unchanged < warn:
            return None
        return self.evidence("NO_EFFECT", Action.WARN, step.tool, step.unchanged, {
            "call": step.call_sig[:8], "result": step.result_sig[:8],
            "state_changes": step.unchanged - 1, "call_indices": [step.index]})

    def _poll(self, state: _PollState, step: Step) -> Evidence | None:
        key = step.call_key
        last = state.last.pop(key, None)
        item = (step.index, step.span_id)
        if last is not None and last[0] == step.result_sig:
            streak = [*last[1][1 - self._poll_kept:], item]  # a new list: forks share
        else:
            streak = [item]
        state.last[key] = (step.result_sig, streak)
        if len(state.last) > _MAX_TRACKED:
            del state.last[next(iter(state.last))]
        if len(streak) < self._poll_floor:
            return None
        cfg, tool = self.config, step.tool
        action = ladder(len(streak), cfg.threshold(tool, "poll_warn"), None,
                        cfg.threshold(tool, "poll_stop"))
        return self.evidence("POLL_STAGNANT", action, tool, len(streak), occurrence_details(
            streak, call=step.call_sig[:8], result=step.result_sig[:8], poll=True))


_RANGE_KEYS: Final = frozenset({
    "offset", "limit", "start_line", "end_line", "line_range", "view_range", "lines", "range",
    "start_line_one_indexed", "end_line_one_indexed_inclusive", "page", "cursor", "from", "to",
    "start", "end"})
"""Argument keys that say which part of a file or listing a read returns (``Read``'s
``offset`` and ``limit``): a tool whose calls send them is not one whose export drops them."""
_MAX_RANGED: Final = 256


class _RepeatState:
    __slots__ = ("last", "ranged", "reads", "seen", "since", "streak", "window")

    def __init__(self, size: int) -> None:
        self.window = CountingWindow(size)
        """Recent calls with absent results; only those after ``since`` count."""
        self.reads = CountingWindow(READ_ROUNDS * size)
        """Recent reads with absent results, over ``READ_ROUNDS`` windows (``_read_round``)."""
        self.since = 0
        """The position of the latest restart: a restart is this number, not a new window."""
        self.seen: dict[str, None] = {}
        """Captured results of the run (bounded): a result not in it is new, and restarts."""
        self.last = ""
        """The call signature of the latest call when it was a successful mutation."""
        self.streak: list[tuple[int, str]] = []
        """Its back-to-back identical occurrences (the latest ten)."""
        self.ranged: set[str] = set()
        """Read tools whose calls without a result named a range (``_RANGE_KEYS``)."""


class RepeatDetector(DetectorBase):
    """The same call repeated when results are absent: warn at 3, replan at 5, never stop.

    An absent result is unknown, never equal to another, so only the calls are compared, and
    the count restarts after anything that may have changed what they would return: a
    mutating call (a success is assumed unless its span says ERROR) and a call whose captured
    result the run had not seen before. Also the same mutating call with identical arguments
    repeated back to back, nothing between, whatever its results (an insert into a file that
    grows each time), on the same ladder.
    """

    name: ClassVar[str] = "repeat"

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "repeat_warn", "repeat_replan")
        self._shell_tools = frozenset(t.lower() for t in self.config.shell_tools)
        self._classifier: CallKindClassifier | None = None
        """What a shell read names (``_names_what_it_reads``), built at its first need."""

    def new_state(self) -> _RepeatState:
        """Return the run's window of recent calls without results, and what restarts it."""
        return _RepeatState(self.config.window_size)

    def fork(self, state: _RepeatState, step: Step) -> _RepeatState:
        """Return a copy holding what ``step`` reads: its call's count, its result's novelty."""
        other = _RepeatState(1)
        other.window = state.window.only(step.call_key)
        other.reads = state.reads.only(step.call_key)
        if step.has_result and step.result_sig in state.seen:
            other.seen[step.result_sig] = None
        other.last, other.streak, other.since = state.last, state.streak, state.since
        other.ranged = set(state.ranged)  # a prediction does not note the tool
        return other

    def observe(self, state: _RepeatState, step: Step) -> Evidence | None:
        """Count this call when its result is absent; restart on a change or a new result."""
        new = False
        if step.has_result:
            seen = state.seen
            if step.result_sig not in seen:  # a new result: the count restarts
                state.since, new = step.index, True
                seen[step.result_sig] = None
                if len(seen) > _MAX_TRACKED:
                    del seen[next(iter(seen))]
        if step.kind == "mutating" and step.error is None:
            return self._mutation(state, step, new)
        state.last = ""
        if step.kind == "read" and self._unranged(state, step):
            return None  # a read without its content may be another page: reread's part
        if step.has_result or step.error is not None or step.kind in ("exempt", "poll") \
                or is_page_turn(step.tool):  # the next page, not captured: maybe another
            return None
        rounds = state.reads.push(step.call_key, step.index, step.span_id) \
            if step.kind == "read" else None
        occ = state.window.push(step.call_key, step.index, step.span_id)
        since = state.since
        if len(occ) >= self._floor:
            occ = [item for item in occ if item[0] > since]  # those since the latest restart
            if len(occ) >= self._floor:
                return self._report(step, occ, window=self.config.window_size)
        return None if rounds is None else self._read_round(state, step, rounds)

    def _read_round(self, state: _RepeatState, step: Step,
                    rounds: list[tuple[int, str]]) -> Evidence | None:
        """A read that comes round again over a longer span, nothing changed: warn, never more.

        SWE-agent-LM-32B viewed the same six ranges of three files in turn, forty times, results
        not captured: each came back every sixth call, twice in any window of twelve, and no
        count reached three. Reads are counted over ``READ_ROUNDS`` windows too (``rounds``:
        this read's occurrences there), since the latest restart (a change, a new result): the
        third time a read comes round warns.
        """
        occ = [item for item in rounds if item[0] > state.since]
        warn = self.config.threshold(step.tool, "repeat_warn")
        if warn is None or len(occ) < warn:
            return None
        return self.evidence("REPEATED_CALL", Action.WARN, step.tool, len(occ),
                             occurrence_details(occ, call=step.call_sig[:8],
                                                window=READ_ROUNDS * self.config.window_size))

    def _unranged(self, state: _RepeatState, step: Step) -> bool:
        """Whether a read may be another page than the same call before it.

        An exporter may drop a read's range (``offset``, ``limit``), making two pages of a
        file the same call. A read tool whose calls without a result in this run named a range
        does not lose it: its calls with the same arguments read the same part, and count
        (Claude Code's ``Read`` of one file, eleven times, results not captured). A shell read
        names its part in its command line (``grep -n x a.py``, ``sed -n 10,20p a.py``), which
        no export drops: it counts when it names what it reads; one that names nothing (``ls``,
        ``git status``) reads the working directory, which calls of no mutating kind change
        (``cd``, a build). Arguments are known only with the ``near_duplicate`` detector on
        (``Step.arguments``).
        """
        args = step.arguments
        if step.tool.lower() in self._shell_tools:
            return not (type(args) is dict and self._names_what_it_reads(step.tool, args))
        if type(args) is dict and not _RANGE_KEYS.isdisjoint(args) \
                and len(state.ranged) < _MAX_RANGED:
            state.ranged.add(step.tool)
        return step.tool not in state.ranged

    def _names_what_it_reads(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether a shell call's command line names the file or directory it reads."""
        classifier = self._classifier
        if classifier is None:
            classifier = self._classifier = CallKindClassifier(self.config)
        return classifier.target(tool, arguments) is not None

    def _mutation(self, state: _RepeatState, step: Step, new: bool) -> Evidence | None:
        """Restart the count, and extend or restart the back-to-back streak of this change.

        ``new``: the call's result is one the run had not seen. A browser action that shows a
        new page (scrolling down a long one, a "next" button) is progress, as a new page of
        results is: its streak restarts.
        """
        state.since = step.index
        item = (step.index, step.span_id)
        if state.last == step.call_sig and state.streak and \
                state.streak[-1][0] == step.index - 1 and \
                not (new and is_browser_action(step.tool)):
            state.streak = [*state.streak[-9:], item]  # a new list: forks share the old one
        else:
            state.last, state.streak = step.call_sig, [item]
        if len(state.streak) < self._floor:
            return None
        if not step.has_result and is_page_turn(step.tool):
            # the pages not captured: reading down a long page takes a few turns
            return self._report(step, state.streak, UNSEEN_PAGE_TURNS, back_to_back=True)
        return self._report(step, state.streak, back_to_back=True)

    def _report(self, step: Step, occ: list[tuple[int, str]], allowance: int = 0,
                **extra: Any) -> Evidence | None:
        """Return the evidence of ``occ``.

        ``allowance``: occurrences the thresholds let pass, and then only a warn (page turns
        whose pages were not captured: a long list paged down eleven times reads the same).
        """
        cfg, tool = self.config, step.tool
        action = ladder(len(occ) - allowance, cfg.threshold(tool, "repeat_warn"),
                        None if allowance else cfg.threshold(tool, "repeat_replan"))
        if allowance and action is Action.CONTINUE:
            return None  # the turns it lets pass find nothing, as counts below the floor
        return self.evidence("REPEATED_CALL", action, tool, len(occ), occurrence_details(
            occ, call=step.call_sig[:8], **extra))


class RereadDetector(DetectorBase):
    """Re-reading the same range of the same file with unchanged content, anywhere in the run.

    Reads count within the run's current world version: a file read again after a different
    successful state change (an edit, a write) is a new observation. A read whose content was
    not captured is never counted: an absent result equals no other.
    """

    name: ClassVar[str] = "reread"
    observed_kinds: ClassVar[frozenset[str] | None] = frozenset({"read"})

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Bind to ``config``; counts below every threshold return at once."""
        super().__init__(config)
        self._floor = lowest(self.config, "reread_warn")

    def new_state(self) -> dict[str, tuple[int, list[tuple[int, str]]]]:
        """Return the run-wide (read, content) → (count, recent occurrences) table."""
        return {}

    def fork(self, state: dict[str, tuple[int, list[tuple[int, str]]]],
             step: Step) -> dict[str, tuple[int, list[tuple[int, str]]]]:
        """Return a table holding only the entry ``step`` reads (its count decides alone)."""
        entry = state.get(step.pair)
        return {} if entry is None else {step.pair: entry}

    def observe(self, state: dict[str, tuple[int, list[tuple[int, str]]]],
                step: Step) -> Evidence | None:
        """Count this read with its content, when the tool is a read tool and content captured."""
        if step.kind != "read" or step.error is not None or not step.has_result:
            return None
        count, occ = state.pop(step.pair, (0, []))  # the pair is the call alone without results
        occ = [*occ[-9:], (step.index, step.span_id)]  # a new list: forks share the old one
        state[step.pair] = (count + 1, occ)
        if len(state) > _MAX_TRACKED:
            del state[next(iter(state))]
        cfg, tool = self.config, step.tool
        if count + 1 < self._floor:
            return None
        action = ladder(count + 1, cfg.threshold(tool, "reread_warn"))
        return self.evidence("REPEATED_READ", action, tool, count + 1, occurrence_details(
            occ, call=step.call_sig[:8], result=step.result_sig[:8]))


class _BatchState:
    __slots__ = ("closed", "current", "current_fired", "recent", "turns")

    def __init__(self, turns: int) -> None:
        self.current: set[str] = set()
        self.closed = 0
        """Turns closed so far in the run."""
        self.recent: list[tuple[frozenset[str], int, int]] = []
        """The batches (turns of two calls or more) among the latest ``turns`` closed turns:
        (their calls, how many times that batch came, the number of the turn that closed)."""
        self.turns = turns
        self.current_fired = False

    def streak(self, batch: frozenset[str]) -> int:
        """Return the streak of the latest recent turn that issued ``batch`` (0: none)."""
        oldest = self.closed - self.turns
        for done, streak, closed in reversed(self.recent):
            if closed <= oldest:
                break
            if done == batch:
                return streak
        return 0


class BatchDetector(DetectorBase):
    """The same set of parallel calls with unchanged results in consecutive model turns.

    Up to ``cycle_max_gap`` other turns may stand between two repetitions of the batch. Calls
    count within the run's current world version, as in every repetition detector.
    """

    name: ClassVar[str] = "batch"

    def new_state(self) -> _BatchState:
        """Return the run's current batch and its latest closed turns."""
        return _BatchState(self.config.cycle_max_gap + 1)

    def fork(self, state: _BatchState, step: Step) -> _BatchState:
        """Return a copy (the closed turns are immutable and shared)."""
        other = _BatchState(state.turns)
        other.current, other.recent = state.current.copy(), state.recent.copy()
        other.current_fired, other.closed = state.current_fired, state.closed
        return other

    def observe(self, state: _BatchState, step: Step) -> Evidence | None:
        """Add the call to its batch and compare the batch with the turns before it."""
        key = step.sequence or sequence_key(step)
        if step.new_batch:  # the turn before closes; a turn of one call is no batch yet
            if len(state.current) >= 2:
                self._close(state)
            else:  # a single call is no batch: it only takes its turn's place
                state.closed += 1
            state.current, state.current_fired = {key}, False
            return None
        if len(state.current) >= _MAX_BATCH:
            state.current_fired = True  # a turn this large is not compared (bounded state)
            return None
        state.current.add(key)
        if (state.current_fired or len(state.current) < 2
                or step.kind in ("exempt", "poll")):
            return None
        streak = state.streak(frozenset(state.current))
        if not streak:
            return None
        count = streak + 1
        action = ladder(count, self.config.threshold(step.tool, "batch_warn"))
        if action:
            state.current_fired = True
        details: dict[str, Any] = {"batch_size": len(state.current), "turns": count,
                                   "call_indices": [step.index]}
        return self.evidence("REPEATED_BATCH", action, step.tool, count, details)

    @staticmethod
    def _close(state: _BatchState) -> None:
        """Remember the current turn's batch; forget those past the latest ``turns`` turns."""
        done = frozenset(state.current)
        streak = state.streak(done) + 1
        state.closed += 1
        oldest = state.closed - state.turns
        state.recent = [entry for entry in state.recent if entry[2] > oldest]
        state.recent.append((done, streak, state.closed))
