"""The kind of each call the engine sees, what it acts on, and whether it was captured whole.

:class:`ToolKinds` answers ``LoopEngine.tool_kind``: the configured kind of a tool wins; a
shell or editor tool's call gets the kind of what it does (:class:`CallKindClassifier`); any
other tool the kind its name gives, found once and cached. ``arguments_known`` tells a call
whose arguments an export dropped, which equals no other call.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Final, TypeVar

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.kinds import CAMEL_HUMP, CallKindClassifier, name_words, tool_base_name
from otel_loopguard.kinds._browser import (
    _BROWSER_ACTIONS,
    _BROWSER_PREFIXES,
    _PAGE_ACTIONS,
    _PAGE_TURNS,
    _SCREEN_TOOLS,
)
from otel_loopguard.kinds._target import call_target
from otel_loopguard.signature import ResultInfo

__all__ = ["NO_ARGUMENTS", "PER_CALL", "QUERY_KEYS", "ToolKinds", "arguments_known",
           "is_browser_action", "is_page_turn", "turn_acknowledged"]

_TARGET_KEYS: Final = frozenset({
    "path", "file", "file_path", "filepath", "filename", "target_file", "target",
    "target_directory", "directory", "dir", "uri", "url", "notebook_path",
    "relative_workspace_path", "explanation", "description"})
"""Argument keys that say where a change goes, or why, but not what it is."""
QUERY_KEYS: Final = frozenset({"query", "pattern", "glob", "glob_pattern", "q", "search",
                               "regex"})
"""Argument keys of what a search looks for: empty, the export dropped it."""
_MAX_BROWSER_NAMES: Final = 4096
_browser_names: dict[str, bool] = {}
"""Tool name → whether it is a browser action (``is_browser_action``), for the first tools."""
_page_turns: dict[str, bool] = {}
"""Tool name → whether it turns pages (``is_page_turn``), for the first tools."""
_PLAN_TOOL_PATTERNS: Final = ("*todo*",)
"""Planning tools (``TodoWrite``, ``todo_write``, ``update_todo_list``): an agent updates its
to-do list again and again as it works, which is neither a loop nor a change of the world, so
they are ``exempt`` unless configured otherwise."""
_FILE_OBJECTS: Final = frozenset({"file", "files", "dir", "directory", "directories", "folder",
                                  "folders", "script", "notebook"})
"""Words of a tool's name that say it acts on files (``move_file``, ``Edit Script (AI)``)."""
_FILE_CHANGES: Final = frozenset({"write", "edit", "create", "delete", "remove", "move",
                                  "rename", "copy", "append", "insert", "replace", "update",
                                  "modify", "save", "undo", "patch", "overwrite", "change"})
"""Words of a tool's name that say it changes what it acts on."""
_NO_RESULT: Final = ResultInfo(digest="")
PER_CALL: Final = "\x00per-call"
"""Cached kind of a tool whose every call is classified on its own (shell and editor tools)."""
NO_ARGUMENTS: Final[Any] = object()
"""``arguments`` not given: the kind of the tool's calls in general (``kind``)."""
_MAX_CACHED_TOOLS: Final = 4096
"""Tools whose kind the cache keeps (later ones are inferred at each call)."""
_MAX_CACHED_CHARS: Final = 256
"""Longest tool name the caches keep: 4,096 names of megabytes each would hold gigabytes."""


class ToolKinds:
    """The kind and the target of each call, for one engine's configuration (thread-safe)."""

    __slots__ = ("_classifier", "ask_tools", "cache", "config")

    def __init__(self, config: LoopGuardConfig) -> None:
        """Start with no tool's kind known."""
        self.config = config
        self.cache: dict[str, str] = {}
        """Tool → its kind, or ``PER_CALL`` for a tool whose every call is classified."""
        self.ask_tools: set[str] = set()
        """The tools seen so far that ask the user: ``kind`` adds each the first time."""
        self._classifier = CallKindClassifier(config)

    def kind(self, tool: str, info: ResultInfo = _NO_RESULT,
             arguments: Any = NO_ARGUMENTS) -> str:
        """Return the kind of a call (``LoopEngine.tool_kind`` says how it is found).

        ``arguments`` not given: the kind the tool's name gives, for a tool classified per call.
        """
        kind = self.cache.get(tool)
        if kind is None:
            kind = PER_CALL if self._classifier.mode(tool) else self._infer(tool)
            if len(tool) <= _MAX_CACHED_CHARS:  # a longer name is classified at each call
                if self.asks_user(tool) and len(self.ask_tools) < _MAX_CACHED_TOOLS:
                    self.ask_tools.add(tool)
                if len(self.cache) < _MAX_CACHED_TOOLS:
                    self.cache[tool] = kind
        if kind is PER_CALL:
            per_call = None if arguments is NO_ARGUMENTS else \
                self._classifier.kind(tool, arguments)
            kind = per_call or self._infer(tool)
        if kind == "default" and info.in_progress and self.config.tool_kind(tool) is None:
            return "poll"
        return kind

    def _infer(self, tool: str) -> str:
        """Return the kind the tool's name (or its configuration) gives, for every call."""
        cfg = self.config
        configured = cfg.tool_kind(tool)
        if configured is not None:
            return configured
        own = tool.rsplit("__", 1)[-1]
        # readFile and ReadFile (TypeScript MCP servers) are read_file, as EditFile is edit_file
        names = {tool, own, tool_base_name(tool), tool_base_name(CAMEL_HUMP.sub("_", own))}
        if not names.isdisjoint(cfg.mutating_tools) or (  # a browser action unless listed a read
                is_browser_action(tool) and names.isdisjoint(cfg.read_tools)):
            return "mutating"
        if not names.isdisjoint(cfg.read_tools):
            return "read"
        lowered = tool.lower()
        if any(fnmatch.fnmatchcase(lowered, p) for p in _PLAN_TOOL_PATTERNS):
            return "exempt"
        if any(fnmatch.fnmatchcase(lowered, p) for p in cfg.poll_tool_patterns):
            return "poll"
        return "mutating" if changes_files(tool) else "default"

    def takes_arguments(self, tool: str) -> bool:
        """Return whether every call of ``tool`` has arguments.

        A shell sends a command line, an editor a file: an empty arguments object of one lost
        them.
        """
        return self._classifier.mode(tool) in ("shell", "editor")

    def asks_user(self, tool: str) -> bool:
        """Return whether ``tool`` asks the user: its result is the user's reply.

        Its lower-cased name, or the part of an MCP name after the last ``__``, matches a glob
        of ``ask_tool_patterns`` (lower-cased too). Asked once per tool, when ``kind`` first
        sees it (``ask_tools`` keeps the answer).
        """
        lowered = tool.lower()
        names = {lowered, lowered.rsplit("__", 1)[-1]}
        return any(fnmatch.fnmatchcase(name, pattern.lower()) for name in names
                   for pattern in self.config.ask_tool_patterns)

    def target(self, tool: str, kind: str, error: str | None, args: Any,
               arguments: Any) -> str | None:
        """Return what a mutating or failed call acts on (None for other calls, or none named).

        A mutating call's target is what it changes (``CallKindClassifier.target``: the file a
        shell command writes, an editor's path), so ``mutating_failure`` can tell a success on
        that target from one elsewhere; a failed call's is ``call_target`` of its arguments.
        """
        if kind == "mutating":
            found = self._classifier.target(tool, arguments)
            return None if found is None else tool + "\x00" + found
        return None if error is None else call_target(tool, args)


def is_browser_action(tool: str) -> bool:
    """Whether ``tool`` acts on a page or a screen (``_BROWSER_ACTIONS``, ``_PAGE_ACTIONS``).

    A computer-use tool (``_SCREEN_TOOLS``) counts whatever its ``action``.

    Such an action changes what the page shows, as an edit changes a file: a screenshot or a
    snapshot after a click, a scroll or a navigation is a new observation, not a repeat, and
    its kind is ``mutating`` unless the tool is configured otherwise. Its name is that of
    ``tool_base_name`` (an MCP ``server__tool`` by its ``tool``).
    """
    found = _browser_names.get(tool)
    if found is None:
        name = tool_base_name(tool)
        acts = name in _PAGE_ACTIONS or name in _SCREEN_TOOLS or (
            name.startswith(_BROWSER_PREFIXES)
            and name.split("_", 1)[1].startswith(_BROWSER_ACTIONS))
        found = _remember(_browser_names, tool, acts)
    return found


def is_page_turn(tool: str) -> bool:
    """Whether ``tool`` moves through a page or a list by its own position (``_PAGE_TURNS``).

    Its base name (``tool_base_name``) after a server's name joined with ``-`` (Toolathlon's MCP
    client names ``playwright_with_chunk-browser_snapshot_navigate_to_next_span``), without a
    browser prefix (``browser_scroll``) or an ``_action`` suffix (TapeAgents'
    ``next_page_action``).
    """
    found = _page_turns.get(tool)
    if found is None:
        name = tool_base_name(tool).rsplit("-", 1)[-1]
        if name.startswith(_BROWSER_PREFIXES):
            name = name.split("_", 1)[1]
        found = _remember(_page_turns, tool, name.removesuffix("_action") in _PAGE_TURNS)
    return found


_MAX_ACKNOWLEDGEMENT_CHARS: Final = 120
"""An acknowledgement's length at most, spaces around it aside (``turn_acknowledged``)."""
_MOVED_RE: Final = re.compile(r"\bscroll(?:ed|ing)?\b|\bpaged?[ _](?:down|up)\b")
"""Words of a page turn's result that name the turn itself (``Scrolled down the page``)."""
_NOT_MOVED_RE: Final = re.compile(
    r"\b(?:no|not|nothing|more|end|bottom|top|already|cannot|can't|unable|fail\w*|error)\b")
"""Words of a page turn's result that say where the page stands, not only that it moved:
``Already at the bottom of the page``, ``No more content``, ``Cannot scroll further``."""


def turn_acknowledged(tool: str, result: Any) -> bool:
    """Whether ``result`` of a call of ``tool`` only says that a page turn or an action was done.

    browser-use's ``scroll`` answers ``🔍 Scrolled down the page by one page`` every time; the
    page it shows next reaches the model in its next prompt, not in the result. Such a result
    (one short line that names the turn, ``_MOVED_RE``) is the page not captured
    (``is_page_turn``): the same line again says nothing of the page, so it is no stagnation,
    and identical turns count as turns whose pages are unknown. A line of the page itself
    (``- heading 'Day 3'``) is a result, and so is a turn that could not move and says so
    (``_NOT_MOVED_RE``): the same "already at the bottom" again is the page read again.

    A computer-use tool (``_SCREEN_TOOLS``) shows the screen as an image; the one short line
    of text beside it (``Key combination 'Page_Down' pressed.``, ``Left click performed.``)
    only names the action, so it is the screen not captured, whatever the action.
    """
    if type(result) is not str or len(result) > 2 * _MAX_ACKNOWLEDGEMENT_CHARS:
        return False  # the bound spares a long result its strip
    acknowledges = _acknowledging.get(tool)
    if acknowledges is None:
        acknowledges = _acknowledges(tool)
    if not acknowledges:
        return False
    text = result.strip()
    if len(text) > _MAX_ACKNOWLEDGEMENT_CHARS or "\n" in text:
        return False
    if acknowledges == _SCREEN:
        return True
    text = text.lower()
    return _MOVED_RE.search(text) is not None and _NOT_MOVED_RE.search(text) is None


_Found = TypeVar("_Found", bool, int)
_PAGE: Final = 1
_SCREEN: Final = 2
_acknowledging: dict[str, int] = {}
"""Tool name → ``_PAGE`` (a page turn), ``_SCREEN`` (a computer-use tool) or 0, for the first
tools (``turn_acknowledged``)."""


def _acknowledges(tool: str) -> int:
    """What a short line from ``tool`` may acknowledge: a page turn, any action on a screen."""
    return _remember(_acknowledging, tool, _PAGE if is_page_turn(tool)
                     else _SCREEN if tool_base_name(tool) in _SCREEN_TOOLS else 0)


def _remember(names: dict[str, _Found], tool: str, found: _Found) -> _Found:
    """Keep ``found`` for ``tool`` in ``names`` (the first tools, names of bounded length)."""
    if len(names) < _MAX_BROWSER_NAMES and len(tool) <= _MAX_CACHED_CHARS:
        names[tool] = found
    return found


def arguments_known(kind: str, arguments: Any, tool: str = "") -> bool:
    """Whether a call's arguments were captured whole enough to compare it with another.

    Absent is not the same, for arguments as for results. An IDE export or an instrumentation
    without content capture keeps ``{"target_file": ...}`` or nothing of an edit, and an empty
    ``query`` of a search whose pattern was dropped: two such calls may be different calls, so
    they never count as the same one (no repeat of it, no stagnation on it), and each
    successful change of that kind is a change of state. (A call with neither arguments nor a
    result captured, as coding agents report tool calls by default, is not compared either:
    the engine checks that beside this.) A browser action's arguments (``tool``) say all it
    does, its URL too; one without any (going back) says nothing of the page it leads to.
    """
    if isinstance(arguments, dict):
        # most calls name no query key: one set operation says so, and nothing is looked up
        if not QUERY_KEYS.isdisjoint(arguments) and "" in map(arguments.get, QUERY_KEYS):
            return False
        return kind != "mutating" or _holds_content(arguments, is_browser_action(tool))
    return kind != "mutating" or arguments not in (None, "", [], {})


_DIFF_KEYS: Final = frozenset({"diff", "patch"})
_DIFF_MARKS: Final = "+- \t\r\n"
"""What a diff's lines hold besides their content: a diff of these alone says nothing."""


def _holds_content(arguments: dict[Any, Any], targets: bool = False) -> bool:
    """Whether a mutation's arguments say what it is: a value under a non-target key.

    A diff or patch of one line is none: a diff spans lines, and an IDE export that lost the
    edit puts a status or its error there instead (``Status: **loading**``, "The string to
    replace was not found in the file"), the same for every lost edit; nor is one whose lines
    hold only their ``+`` and ``-`` and blanks (Cursor's export of an edit it lost: two lines,
    ``-`` and ``+`` with spaces, the same for every file). ``targets``: a value under a target
    key says it too (a browser's ``url``).
    """
    for key, value in arguments.items():
        if key in _DIFF_KEYS and type(value) is str and (
                "\n" not in value or not value.strip(_DIFF_MARKS)):
            continue
        if (targets or key not in _TARGET_KEYS) and value not in (None, "", [], {}) \
                and not (type(value) is list and _only_named(value)):
            return True
    return False


_OPERATION_KEYS: Final = frozenset({"kind", "type", "op", "operation"})
"""Keys of a change's operation (``update``, ``add``, ``delete``): what kind of change, not
what it is."""


def _only_named(value: list[Any]) -> bool:
    """Whether ``value`` is changes that name only their files and operations.

    ``codex exec --json`` keeps an edit as ``{"changes": [{"path": "a.c", "kind": "update"}]}``,
    its patch left out: any two edits of one file alike.
    """
    return all(
        type(item) is dict and item and all(
            key in _TARGET_KEYS or key in _OPERATION_KEYS for key in item) for item in value)


def changes_files(tool: str) -> bool:
    """Return whether a tool's name says it changes files: a file word and a change word.

    The MCP filesystem server's ``move_file`` and ``create_directory``, MLAgentBench's ``Edit
    Script (AI)`` and ``Copy File``, a harness's ``write_file_pentest``: words of the name
    (``name_words``; an MCP name by its part after ``__``) holding one of ``_FILE_OBJECTS``
    and one of ``_FILE_CHANGES``.
    """
    words = name_words(tool.rsplit("__", 1)[-1])
    return not words.isdisjoint(_FILE_OBJECTS) and not words.isdisjoint(_FILE_CHANGES)
