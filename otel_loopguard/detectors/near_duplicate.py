"""Near-duplicate calls: reworded arguments that bring nothing new."""

from __future__ import annotations

import importlib
import math
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, cast

import orjson

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.detectors._base import DetectorBase, occurrence_details
from otel_loopguard.detectors._step import Step
from otel_loopguard.exceptions import ConfigError
from otel_loopguard.signature import digest
from otel_loopguard.types import Action, Evidence

__all__ = ["Embedder", "NearDuplicateDetector", "argument_features", "load_embedder"]

Embedder = Callable[[str], Sequence[float]]
"""Maps a text to a vector; cosine similarity >= ``embedding_threshold`` counts as a paraphrase."""

_PUNCT_RE: Final = re.compile(r"[^\w\s]|_", re.UNICODE)
_CODE_RE: Final = re.compile(r"[\n(){};=<>|$`\\]|(?:^|\s)--?[a-zA-Z]")
"""A character of code or a patch, or a command line's flag: such a value is compared whole."""
_OPERAND_RE: Final = re.compile(r"\d|\w[/.]\w|^-|^/")
"""A token that is an operand (a number, an id, a path, a flag), not a free-text word."""
_MIN_PARAPHRASE_WORDS: Final = 3
_FILLER: Final = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "into",
    "near", "under", "over", "via", "per", "as", "and", "or", "but", "is", "are", "was", "were",
    "be", "it", "its", "this", "that", "these", "those", "i", "me", "my", "we", "our", "you",
    "your", "what", "which", "who", "how", "when", "where", "why", "do", "does", "did", "can",
    "could", "should", "would", "will", "please"})
"""Words that carry no operand: adding, dropping or swapping one is a rewording."""
_MAX_TOKENS: Final = 64
_MAX_KEYS: Final = 16
_MAX_EMBEDDINGS: Final = 1024
"""Embeddings kept per detector (the oldest dropped first)."""

Feature = tuple[str, Any, str, frozenset[str], int]
"""(kind, value, text, operands, words): kind ``exact``, ``word`` (one word or code, equal up
to case and punctuation) or ``text`` (free text of several words: its word set, its operand
tokens, which must be equal, and its number of words)."""
_NO_OPERANDS: Final[frozenset[str]] = frozenset()


def load_embedder(path: str) -> Embedder:
    """Return the function named by ``module:function`` (``near_duplicate_embedder``).

    Raises:
        ConfigError: naming the setting, when the module or the function cannot be found or
            the object is not callable.
    """
    module_name, _, attribute = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"near_duplicate_embedder: cannot load {path!r}: {exc}") from None
    if not callable(found):
        raise ConfigError(f"near_duplicate_embedder: {path!r} is a {type(found).__name__}, "
                          "not a function from a text to a list of floats")
    return cast(Embedder, found)


def argument_features(arguments: Any) -> dict[str, Feature]:
    """Return, per top-level argument, what near-duplicate comparison needs (bounded)."""
    items = arguments.items() if isinstance(arguments, Mapping) else [("", arguments)]
    features: dict[str, Feature] = {}
    for count, (key, value) in enumerate(items):
        if count >= _MAX_KEYS:
            break
        if isinstance(value, str) and _CODE_RE.search(value) is None:
            tokens = value.lower().split()[:_MAX_TOKENS]
            # punctuation dropped inside each token (one regex pass for them all; tokens hold
            # no whitespace, so sparing whitespace changes nothing), empties gone
            words = _PUNCT_RE.sub("", " ".join(tokens)).split()
            if len(words) > 1:
                operands = frozenset(t for t in tokens if _OPERAND_RE.search(t))
                features[str(key)] = ("text", frozenset(words), value[:512], operands,
                                      len(words))
            else:  # one word (id, path, date, number): equal up to case and punctuation
                features[str(key)] = ("word", "".join(words), value[:512], _NO_OPERANDS, 1)
        elif isinstance(value, str):  # code, a patch, a command line: whitespace folded only
            features[str(key)] = ("word", " ".join(value.split()), "", _NO_OPERANDS, 1)
        else:
            features[str(key)] = ("exact", _exact(value), "", _NO_OPERANDS, 1)
    return features


def _exact(value: Any) -> str:
    """Return a digest of a non-text value that ignores the key order of its mappings."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # not JSON (the general signature path keeps such values apart)
        text = repr(value)
    return digest(text[:4096])


def _replaced(ours: frozenset[str], theirs: frozenset[str], only_ours: frozenset[str],
              only_theirs: frozenset[str]) -> bool:
    """Return whether each text has a content word the other lacks: an operand was replaced.

    ``only_ours`` and ``only_theirs`` are the words of one text the other lacks. Filler words
    do not count, nor a plural ``-s`` (``hotels`` is ``hotel``). ``best pizza in brooklyn``
    and ``best pizza in queens`` are two searches; a word added or dropped (``paris weather
    today`` after ``weather in Paris``) is a refinement of one.
    """
    mine, yours = only_ours - _FILLER, only_theirs - _FILLER
    return bool(mine and yours and _new_words(mine, theirs) and _new_words(yours, ours))


def _new_words(words: frozenset[str], other: frozenset[str]) -> bool:
    """Return whether a word of ``words`` is not in ``other``, even as its singular or plural."""
    for word in words:  # a loop: cheaper than any() over a generator
        if word + "s" not in other and (word[-1] != "s" or word[:-1] not in other):
            return True
    return False


def _features(entry: list[Any]) -> dict[str, Feature]:
    """Return an entry's features, computing them from its kept arguments on first use."""
    if entry[1] is None:
        entry[1], entry[2] = argument_features(entry[2]), None
    return entry[1]  # type: ignore[no-any-return]  # set just above


class _Recent:
    """The recent calls of one run, oldest first, and beside them their result signatures."""

    __slots__ = ("entries", "results")

    def __init__(self, size: int) -> None:
        self.entries: deque[list[Any]] = deque(maxlen=size)
        """[step, features or None, arguments until featured] per call."""
        self.results: deque[str] = deque(maxlen=size)
        """The ``result_sig`` of each entry, searched in C before any entry is looked at."""

    def keep(self, step: Step, features: dict[str, Feature] | None, arguments: Any) -> None:
        """Add ``step`` as the latest call (the oldest leaves) and drop its parsed arguments."""
        self.entries.append([step, features, arguments])
        self.results.append(step.result_sig)
        step.arguments = None


class NearDuplicateDetector(DetectorBase):
    """Arguments near-identical but not equal, for the same tool, with no progress.

    Reads and plain calls only: mutating calls and calls of shell tools (``shell_tools``:
    a command line is code, and another operand is another command) are skipped.

    Text arguments are compared up to case, punctuation, whitespace and word order. Free text
    of 3 or more words (a natural-language query) may also be a paraphrase, by token overlap
    (Jaccard >= ``near_duplicate_jaccard``) or an optional embedder, when its operands
    (numbers, ids, paths, flags) are the same and no content word was replaced: when each text
    has a content word (not a filler like ``in``, ``the``, ``of``) the other lacks, the search
    changed (``best pizza in brooklyn``, ``best pizza in queens``); a word added or dropped is
    a refinement (``paris weather today`` after ``weather in Paris``). Single-word values (ids,
    paths, numbers, a search term) must match up to case and punctuation, and code or patches
    (text with brackets, operators or newlines) up to whitespace: an operand that changes
    makes a different call. Fires (replan) when at least ``near_duplicate_min`` such calls sit
    within the last ``near_duplicate_window`` calls and each result after the group's first is
    empty or one an earlier call of the group already returned. A call whose result was not
    captured is never part of a group: an absent result is no evidence of no progress; nor is a
    call whose arguments were not captured whole (an empty search pattern an export dropped).
    """

    name: ClassVar[str] = "near_duplicate"

    def __init__(self, config: LoopGuardConfig | None = None, *, embedder: Embedder | None = None,
                 embedding_threshold: float | None = None) -> None:
        """Bind to ``config``; ``embedder`` replaces token overlap for multi-word text.

        Without ``embedder``, the one named by ``near_duplicate_embedder`` (if any) is imported;
        ``embedding_threshold`` defaults to ``near_duplicate_similarity``.

        Raises:
            ConfigError: when ``near_duplicate_embedder`` cannot be imported or is not callable.
        """
        super().__init__(config)
        if embedder is None and self.config.near_duplicate_embedder:
            embedder = load_embedder(self.config.near_duplicate_embedder)
        self.embedder = embedder
        self.embedding_threshold = (self.config.near_duplicate_similarity
                                    if embedding_threshold is None else embedding_threshold)
        self.embedder_errors = 0
        """Embedder calls that raised (token overlap was used for those comparisons)."""
        self._shell_tools = frozenset(self.config.shell_tools)
        self._embeddings: dict[str, Sequence[float]] = {}
        """Text → its embedding, so each text is embedded once (bounded; shared by runs: a
        race only embeds a text twice)."""

    def new_state(self) -> _Recent:
        """Return the run's recent calls and their results."""
        return _Recent(self.config.near_duplicate_window - 1)

    def fork(self, state: _Recent, step: Step) -> _Recent:
        """Return a copy of the recent calls (entries copied: they cache their features)."""
        other = _Recent(state.entries.maxlen or 1)
        other.entries.extend(entry.copy() for entry in state.entries)
        other.results.extend(state.results)
        return other

    def observe(self, state: _Recent, step: Step) -> Evidence | None:
        """Group this call with its recent near-duplicates and judge their progress.

        Mutating calls are never near-duplicates (each one is its own change, and an empty
        result is its success); they only take their place in the window. Calls group only
        within the run's current world version: a rewording after a state change is a new try.
        """
        arguments = step.arguments
        if step.kind == "mutating" or step.tool.lower() in self._shell_tools:
            arguments = None  # no arguments kept: never in a group
        # A call with a result none of the recent calls returned, not empty, is progress of its
        # own (``_since_progress`` starts a group at it): one lookup, and no group is looked for.
        if arguments is not None and (step.empty or step.result_sig in state.results):
            return self._judge(state, step)
        state.entries.append([step, None, arguments])  # featured later, if ever needed
        state.results.append(step.result_sig)
        step.arguments = None
        return None

    def _judge(self, state: _Recent, step: Step) -> Evidence | None:
        """Group a call that may repeat a recent result with its near-duplicates, and judge."""
        tool, version = step.tool, step.version
        same_tool = [entry for entry in state.entries if entry[0].tool == tool
                     and entry[0].has_result and entry[0].error is None
                     and entry[0].version == version
                     and entry[0].kind != "mutating"
                     and (entry[1] is not None or entry[2] is not None)]
        minimum = self.config.threshold(tool, "near_duplicate_min")
        # Features only when this call can complete a group that fires: enough calls of the
        # tool, and (with a result) no progress of its own: an empty result, or one a call of
        # the tool already returned (``_since_progress`` starts a group at a new result).
        if (len(same_tool) + 1 < minimum or step.error is not None or not step.has_result
                or step.kind in ("exempt", "poll")
                or (not step.empty
                    and all(entry[0].result_sig != step.result_sig for entry in same_tool))):
            state.keep(step, None, step.arguments)  # featured later, if ever needed
            return None
        features = argument_features(step.arguments)
        group = [entry[0] for entry in same_tool if self._near(features, _features(entry))]
        state.keep(step, features, None)
        group.append(step)
        group = self._since_progress(group)
        if len(group) < minimum:
            return None
        if len({s.call_sig for s in group}) < 2:
            return None
        return self.evidence("NEAR_DUPLICATE", Action.REPLAN, step.tool, len(group),
                             occurrence_details(((s.index, s.span_id) for s in group),
                                                distinct_arguments=len({s.call_sig
                                                                        for s in group})))

    @staticmethod
    def _since_progress(group: list[Step]) -> list[Step]:
        """Return the members of ``group`` from the last one that brought something new.

        The first call's result is what the group started from, empty or not; a later one
        brings something new unless it is empty or a result an earlier member returned (the
        spec's "counts a repeat only if its outcome did not change"). So rewordings that get
        the same real answer again are a loop, one that gets a new answer is progress, and
        progress restarts the count: three rewordings returning what the fourth-last one
        found are a loop, whatever the rewordings before it brought.
        """
        seen = {group[0].result_sig}
        start = 0
        for index in range(1, len(group)):
            member = group[index]
            if not (member.empty or member.result_sig in seen):
                start = index
            seen.add(member.result_sig)
        return group[start:]

    def _near(self, left: dict[str, Feature], right: dict[str, Feature]) -> bool:
        if left.keys() != right.keys():
            return False
        return all(self._near_value(left[key], right[key]) for key in left)

    def _near_value(self, left: Feature, right: Feature) -> bool:
        """Return whether two values are near-identical.

        Equal up to case, punctuation and word order; or, for free text of 3+ words, a
        paraphrase with the same operands (numbers, ids, paths, flags) and no content word
        replaced by another.
        """
        if left[0] != right[0]:
            return False
        if left[0] != "text":
            return bool(left[1] == right[1])
        if left[1] == right[1]:
            return True
        ours, theirs = left[1], right[1]
        only_ours, only_theirs = ours - theirs, theirs - ours
        if (left[3] != right[3] or max(left[4], right[4]) < _MIN_PARAPHRASE_WORDS
                or _replaced(ours, theirs, only_ours, only_theirs)):
            return False
        if self.embedder is not None:
            try:
                return self._cosine(left[2], right[2]) >= self.embedding_threshold
            except Exception:  # a failing embedder (network, model) falls back to overlap
                self.embedder_errors += 1
        union = len(ours) + len(only_theirs)
        shared = len(ours) - len(only_ours)
        return union > 0 and shared / union >= self.config.near_duplicate_jaccard

    def _embed(self, text: str) -> Sequence[float]:
        vector = self._embeddings.get(text)
        if vector is None:
            vector = self.embedder(text)  # type: ignore[misc]  # set when this is called
            if len(self._embeddings) >= _MAX_EMBEDDINGS:
                self._embeddings.pop(next(iter(self._embeddings)), None)
            self._embeddings[text] = vector
        return vector

    def _cosine(self, left: str, right: str) -> float:
        a, b = self._embed(left), self._embed(right)
        dot = sum(x * y for x, y in zip(a, b, strict=False))
        norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
        return dot / norm if norm else 0.0
