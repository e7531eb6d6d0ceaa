"""Call kinds per call: what one call of a shell-like or editor tool does.

Coding agents run everything through one ``bash`` tool, so a tool's name says nothing about a
call: ``cat a.py`` reads, ``sed -i … a.py`` and ``cat <<'EOF' > a.py`` change a file,
``pytest`` runs something. :class:`CallKindClassifier` gives such calls their own kind
(``read``, ``mutating``, ``poll``, ``exempt`` or ``default``) and, where it can, their
**target**: the file a call reads or writes, the script it runs.

Which tools are classified per call (``mode``):

- a configured ``kind`` of the tool (``[loopguard.tools.<name>] kind = …``) always wins, and a
  tool listed in ``mutating_tools`` or ``read_tools`` keeps that kind for every call;
- ``shell`` tools (the ``shell_tools`` setting, or ``shell = true`` for the tool): by the
  command text in their arguments (``command``, ``cmd``, ``script``, ``code``, ``input``,
  ``commands``, ``command_line``, a plain string, or an argv list such as
  ``["bash", "-lc", "…"]``);
- ``editor`` tools (``editor_tools``, or ``editor = true``): by their subcommand (``command``,
  ``action``, ``operation``, ``mode``): ``view`` reads, ``create``, ``str_replace``, ``insert``,
  ``undo_edit``, ``write``… change; without one, a tool named ``view…``/``read…``/``open…``/
  ``show…`` reads and any other editor tool changes;
- ``command`` tools, when ``command_word_tools`` is on: a tool named like a command of the
  table (``cat``, ``sed``, ``git``, ``pip``…) is read as a shell call of that command with its
  arguments (some harness converters name a shell call after its first word); not a call of
  a web agent's page action of that name (BrowserGym's ``goto`` with a ``url``), which takes
  its name's kind.

Tool names are compared in lower case, and an MCP name ``server__tool`` by its ``tool`` part.
Other tools get None from :meth:`CallKindClassifier.kind`: the engine then infers their kind
from the name once and caches it, so they cost nothing more per call.

Cost: a command line is read once, up to :data:`MAX_COMMAND_CHARS` characters (a write beyond
them is not seen); the (kind, target) of the last 512 command texts, and of the last 512
argument texts up to 8,192 characters, is cached, so a loop repeating its command pays a
dictionary lookup.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping
from typing import Any, Final, Literal

import orjson

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.kinds._browser import _PAGE_ACTIONS
from otel_loopguard.kinds._powershell import is_powershell, powershell_script, read_powershell
from otel_loopguard.kinds._shell import Index, ShellReader, all_rules, compile_rules, default_rules
from otel_loopguard.kinds._table import (
    DEFAULT_COMMAND_KINDS,
    IGNORED_WORDS,
    KEYWORDS,
    SHELLS,
    WRAPPERS,
)
from otel_loopguard.kinds._target import call_target

__all__ = ["DEFAULT_COMMAND_KINDS", "MAX_COMMAND_CHARS", "CallKindClassifier", "CallMode",
           "tool_base_name"]

CallMode = Literal["shell", "editor", "command"]

MAX_COMMAND_CHARS: Final = 4096
"""Characters of a command line that are read (the start of a long heredoc script is enough)."""

_VERSION_SUFFIX: Final = re.compile(r"[_-]v\d+$")


_RUN_WORDS: Final = frozenset({"run", "execute", "exec", "command", "cmd"})
_SHELL_WORDS: Final = frozenset({"shell", "bash", "terminal", "zsh", "powershell", "pwsh"})
_NAME_WORD: Final = re.compile(r"[a-z0-9]+")
CAMEL_HUMP: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
"""Where a camelCase name's words meet (``readFile``: ``read|File``)."""


def name_words(name: str) -> set[str]:
    """Return the lower-cased words of a tool's name.

    Split at ``_``, spaces, punctuation and camelCase humps (``ExecuteShellCommand``: execute,
    shell, command); an MCP name's server part stays, callers pass the part after ``__``.
    """
    return set(_NAME_WORD.findall(CAMEL_HUMP.sub("_", name).lower()))


def named_as_shell(name: str) -> bool:
    """Return whether a tool's name says it runs shell commands: a run word and a shell word.

    UFO2's ``run_shell``, a harness's ``execute_bash_pentest``, ``ExecuteShellCommand``,
    Terminal-Bench's Terminus 2 in Harbor ``bash_command``: the
    words of the name (``name_words``) hold one of ``_RUN_WORDS`` and one of
    ``_SHELL_WORDS``. Names in ``shell_tools`` need no such test.
    """
    words = name_words(name)
    return not words.isdisjoint(_RUN_WORDS) and not words.isdisjoint(_SHELL_WORDS)


def tool_base_name(tool: str) -> str:
    """Return the name a tool's kind is looked up by.

    Lower case, an MCP ``server__tool`` by its ``tool`` part, a version suffix dropped
    (Cursor's ``edit_file_v2`` is ``edit_file``).
    """
    return _VERSION_SUFFIX.sub("", tool.rsplit("__", 1)[-1].lower())


_CACHE_MAX: Final = 512
_MAX_KEY_CHARS: Final = 2 * MAX_COMMAND_CHARS
"""Argument texts up to this long are cache keys as they are (the span's JSON text)."""
_MODE_CACHE_MAX: Final = 4096
_MAX_JSON_CHARS: Final = 1 << 20
"""JSON argument texts longer than this are not parsed (the call keeps its tool's kind)."""
_UNSET: Final[Any] = object()
_POWERSHELL: Final = "\x00powershell\x00"
"""Marks the script of a ``powershell``/``pwsh`` argv: PowerShell, whatever it starts with."""
_COMMAND_KEYS: Final = ("command", "cmd", "script", "code", "input", "commands", "command_line",
                         "bash_command", "shell_command", "keystrokes")
_SUBCOMMAND_KEYS: Final = ("command", "action", "operation", "mode", "subcommand")
_EDITOR_READS: Final = frozenset({"view", "read", "show", "list", "open", "cat", "get", "find",
                                  "search", "view_range"})
_EDITOR_WRITES: Final = frozenset({"create", "write", "str_replace", "insert", "undo_edit",
                                   "edit", "replace", "append", "delete", "remove", "rename",
                                   "move", "patch", "apply", "overwrite", "save", "multi_edit"})
_READ_NAME_PREFIXES: Final = ("view", "read", "open", "show")
_NOT_COMMAND_TOOLS: Final = frozenset({
    "test", "[", "[[", "file", "type", "info", "help", "open", "view", "read", "find", "join",
    "sort", "install", "create", "edit", "insert", "append", "service", "expr", "echo", "date",
    "wait", "watch", "sleep", "python", "pypy", "node", "ruby", "perl", "php", "deno", "bun"})
"""Command words too common as plain tool names, or interpreters whose arguments are code."""
_PATCH_FILE: Final = re.compile(
    r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ (?:b/)?)(\S+)", re.MULTILINE)
_MAX_TARGET_CHARS: Final = 512
_LINE_EDIT: Final = re.compile(r"edit\s+(\d+)\s*:\s*\d+\s*\n")


class CallKindClassifier:
    """Classifies calls of shell-like and editor tools by what each call does.

    Build it from the config (``shell_tools``, ``editor_tools``, ``command_kinds``,
    ``command_word_tools``, the per-tool ``kind``/``shell``/``editor``, ``mutating_tools``,
    ``read_tools``). Thread-safe: its caches are plain dictionaries, bounded, and cleared
    rather than evicted when full. Never raises on arguments, whatever their shape.
    """

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Compile the command table (built-in entries, then ``command_kinds`` on top)."""
        self._config = config = config or LoopGuardConfig()
        rules = compile_rules(config.command_kinds, default_rules()) if config.command_kinds \
            else default_rules()
        self._reader = ShellReader(rules)
        self._shell_tools = frozenset(t.lower() for t in config.shell_tools)
        self._editor_tools = frozenset(t.lower() for t in config.editor_tools)
        self._command_words = (_command_words(rules) if config.command_kinds
                               else _default_command_words()) \
            if config.command_word_tools else frozenset()
        self._page_words = self._command_words & _PAGE_ACTIONS
        """Command words that also name a web agent's page action: SWE-agent's viewer moves
        over a file with ``goto 100`` and ``scroll_down``, BrowserGym's ``goto`` opens a URL."""
        self._modes: dict[str, CallMode | None] = {}
        self._outcomes: dict[str, tuple[str | None, str | None]] = {}
        """Command text → (kind, target)."""
        self._by_arguments: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        """(tool, for command-word tools; the arguments' JSON text) → (kind, target)."""

    def mode(self, tool: str) -> CallMode | None:
        """Return how calls of ``tool`` are classified: ``shell``, ``editor``, ``command``.

        None when the tool's kind comes from its name (configured, listed, or inferred).
        """
        mode = self._modes.get(tool, _UNSET)
        if mode is _UNSET:
            mode = self._mode_of(tool)
            if len(self._modes) < _MODE_CACHE_MAX and len(tool) <= _MAX_KEY_CHARS:
                self._modes[tool] = mode
        return mode  # type: ignore[no-any-return]  # _UNSET replaced above

    def _mode_of(self, tool: str) -> CallMode | None:
        cfg = self._config
        override = cfg.tools.get(tool)
        if override is not None and (override.kind is not None or override.shell
                                     or override.editor):
            return None if override.kind is not None else (
                "shell" if override.shell else "editor")
        base = tool.rsplit("__", 1)[-1]
        name = tool_base_name(tool)
        if {tool, base, name} & {*cfg.mutating_tools, *cfg.read_tools}:
            return None
        shell_on = override is None or override.shell is not False
        editor_on = override is None or override.editor is not False
        modes: tuple[tuple[CallMode, bool], ...] = (
            ("shell", shell_on and (name in self._shell_tools or named_as_shell(base))),
            ("editor", editor_on and name in self._editor_tools),
            ("command", shell_on and name in self._command_words))
        return next((mode for mode, found in modes if found), None)

    def kind(self, tool: str, arguments: Any) -> str | None:
        """Return the kind of this call, or None when the tool is not classified per call.

        Also None for a shell call without command text (arguments not captured): the call
        then takes its tool's kind.
        """
        mode = self.mode(tool)
        if mode is None:
            return None
        if mode == "editor":
            return _editor_kind(tool, _parsed(arguments))
        return self._command_outcome(mode, tool, arguments)[0]

    def target(self, tool: str, arguments: Any) -> str | None:
        """Return what this call is about, or None when nothing names it.

        For a shell call, the file its deciding command writes (a redirection, ``sed -i``'s
        file, ``cp``'s destination) or reads, or the script it runs (``python x.py``); for any
        other call, ``call_target``'s ``name=value`` of its arguments named like a path, URL or
        id (``path=/a.py``, ``order_id=42``), else the first file of a patch in them. Best
        effort, at most 512 characters.
        """
        mode = self.mode(tool)
        found = self._command_outcome(mode, tool, arguments)[1] \
            if mode in ("shell", "command") else _named_target(tool, _parsed(arguments))
        return found[:_MAX_TARGET_CHARS] if found else None

    def command_kind(self, command: str) -> str | None:
        """Return the kind of a shell command line (None for an empty one)."""
        return self._outcome(command)[0]

    def _command_outcome(self, mode: CallMode, tool: str,
                         arguments: Any) -> tuple[str | None, str | None]:
        """Return the (kind, target) of a shell or command-word call, cached by argument text."""
        key = (tool if mode == "command" else "", arguments) if isinstance(arguments, str) and \
            len(arguments) <= _MAX_KEY_CHARS else None
        outcome = self._by_arguments.get(key) if key is not None else None
        if outcome is None:
            outcome = self._command_outcome_of(mode, tool, arguments)
            if key is not None:
                if len(self._by_arguments) >= _CACHE_MAX:
                    self._by_arguments.clear()
                self._by_arguments[key] = outcome
        return outcome

    def _command_outcome_of(self, mode: CallMode, tool: str,
                            arguments: Any) -> tuple[str | None, str | None]:
        parsed = _parsed(arguments)
        text = _command_text(parsed)
        if mode == "command":
            word = tool.rsplit("__", 1)[-1].lower()
            if text is None and word in self._page_words and _page_arguments(parsed):
                return None, _named_target(tool, parsed)  # BrowserGym's goto(url): its name's kind
            if text is None or not text.strip():
                text = word
            elif text.split(None, 1)[0].rsplit("/", 1)[-1] != word:
                text = word + " " + text
        return self._outcome(text) if text is not None else (None, None)

    def _outcome(self, text: str) -> tuple[str | None, str | None]:
        text = text[:MAX_COMMAND_CHARS]
        outcome = self._outcomes.get(text)
        if outcome is None:
            if text.startswith(_POWERSHELL) or is_powershell(text):
                outcome = read_powershell(text.removeprefix(_POWERSHELL), self._program)
            else:
                outcome = self._reader.analyze(text)
            if outcome[0] == "mutating" and outcome[1] is None \
                    and ("*** " in text or "+++ " in text):
                # a patch applied through the shell (Codex's ["apply_patch", PATCH] or
                # apply_patch <<'EOF'): its file, as when the patch is a tool's own argument
                patched = _patch_target(text)
                if patched is not None:
                    outcome = ("mutating", patched)
            if len(self._outcomes) >= _CACHE_MAX:
                self._outcomes.clear()  # cheaper than LRU bookkeeping; a loop refills it
            self._outcomes[text] = outcome
        return outcome


    def _program(self, words: list[str]) -> tuple[str | None, str | None]:
        """Return the outcome of a native program's words in a PowerShell line (``git status``)."""
        kind, target = self._reader._command(words, 0)  # one reader, two syntaxes
        return ("exempt", None) if kind == "wait" else (kind, target)


def _command_words(rules: Mapping[str, Index]) -> frozenset[str]:
    """Return the command words a tool may be named after: those with a rule that is not default."""
    skipped = _NOT_COMMAND_TOOLS | WRAPPERS | IGNORED_WORDS | KEYWORDS | SHELLS
    return frozenset(word for word, (_, _, kind) in all_rules(rules)
                     if kind != "default" and word not in skipped)


@functools.cache
def _default_command_words() -> frozenset[str]:
    return _command_words(default_rules())


def _parsed(arguments: Any) -> Any:
    """Return JSON-text arguments parsed; other values, and texts that are not JSON, as given.

    A JSON text longer than ``_MAX_JSON_CHARS`` gives None: its call keeps its tool's kind.
    """
    if not isinstance(arguments, str | bytes):
        return arguments
    head = arguments[:64].lstrip()[:1]
    if head in ("{", "[", b"{", b"["):
        if len(arguments) > _MAX_JSON_CHARS:
            return None
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            pass
    return arguments.decode("utf-8", "replace") if isinstance(arguments, bytes) else arguments


def _command_text(arguments: Any, nested: bool = True) -> str | None:
    """Return the command line in a shell call's (parsed) arguments, or None."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, list | tuple):
        return _argv_text(arguments)
    if not isinstance(arguments, Mapping):
        return None
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if value is not None:
            return _value_text(key, value)
    action = arguments.get("action")  # OpenAI local_shell: {"action": {"command": [...]}}
    return _command_text(action, nested=False) if nested and isinstance(action, Mapping) else None


def _value_text(key: str, value: Any) -> str | None:
    """Return the command line of one argument: a string, an argv list, or a list of lines."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        return None
    if key == "commands" and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return _argv_text(value)


def _argv_text(argv: list[Any] | tuple[Any, ...]) -> str | None:
    """Return an argv list as a command line (``["bash", "-lc", S]`` → ``S``)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        return None
    script = powershell_script(argv)
    if script is not None:
        return _POWERSHELL + script
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in SHELLS and argv[1].startswith("-") \
            and "c" in argv[1]:
        return str(argv[2])
    return " ".join(shlex.quote(a) for a in argv)


def _page_arguments(arguments: Any) -> bool:
    """Whether a viewer command's call names a page action's arguments, not the viewer's.

    SWE-agent's ``goto``, ``scroll_up`` and ``scroll_down`` take a line number or nothing; a
    web agent's take a ``url`` or an amount to scroll.
    """
    return isinstance(arguments, Mapping) and bool(arguments) and "line_number" not in arguments


def _named_target(tool: str, arguments: Any) -> str | None:
    """Return what a call's (parsed) arguments name: a path, URL or id, else a patch's file."""
    found = call_target(tool, arguments)
    return found.split("\x00", 1)[1].replace("\x00", ", ") if found \
        else _patch_target(arguments) or _line_edit_target(arguments)


def _editor_kind(tool: str, arguments: Any) -> str:
    if isinstance(arguments, Mapping):
        for key in _SUBCOMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, str):
                sub = value.strip().lower()
                if sub in _EDITOR_READS:
                    return "read"
                if sub in _EDITOR_WRITES:
                    return "mutating"
                break
    name = tool.rsplit("__", 1)[-1].lower()
    return "read" if name.startswith(_READ_NAME_PREFIXES) else "mutating"


def _line_edit_target(arguments: Any) -> str | None:
    """Return where an interface edit starts: SWE-agent's ``edit 12:15``, text, ``end_of_edit``.

    ``line 12``: the file is the one open, which the call does not name, and an agent that
    keeps failing at one place often moves the end of the range, not its start.
    """
    values = arguments.values() if isinstance(arguments, Mapping) else (arguments,)
    for value in values:
        if isinstance(value, str) and value.startswith("edit "):
            match = _LINE_EDIT.match(value)
            if match:
                return "line " + match.group(1)
    return None


def _patch_target(arguments: Any) -> str | None:
    """Return the first file a patch text in the arguments touches (``*** Update File: f``)."""
    values = arguments.values() if isinstance(arguments, Mapping) else (arguments,)
    for value in values:
        if isinstance(value, str) and ("*** " in value or "+++ " in value):
            match = _PATCH_FILE.search(value[:MAX_COMMAND_CHARS])
            if match:
                return match.group(1)
    return None
