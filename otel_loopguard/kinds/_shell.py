"""A small, bounded shell reader: what one command line reads, changes or runs.

It is not a shell parser. Its lexer (``kinds._lexer``) splits a command line into simple
commands (at ``;``, ``&&``, ``||``, ``|``, ``&``, parentheses and newlines, outside quotes),
drops heredoc bodies and comments, and notes output redirections into files; the reader here
looks each command up in the command table, unwraps wrappers (``sudo``, ``env``, ``timeout``)
and package runners (``npx``, ``uv run``, ``python -m``), and reads the scripts of ``bash -c``.
The caller bounds the text it passes (``kinds.MAX_COMMAND_CHARS``). Where the optional C module
``kinds/_reader.c`` is built, it reads most lines with the same outcome and leaves the others to
the code here, which stays the definition (``tests/test_shell_reader_native.py``).
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from otel_loopguard._native import load
from otel_loopguard.kinds._lexer import _MAX_NESTING, _WRITES, path_like, segments, strip_heredocs
from otel_loopguard.kinds._runners import RUN_WORDS, RUNNERS, PackageRunners
from otel_loopguard.kinds._runners import command_name as _name
from otel_loopguard.kinds._scripts import code_outcome, script_writes, stdin_scripts
from otel_loopguard.kinds._table import (
    DEFAULT_COMMAND_KINDS,
    IGNORED_WORDS,
    KEYWORDS,
    MODULE_RUNNERS,
    PYTHON_FLAGS,
    PYTHON_VALUE_OPTIONS,
    RUNNER_GLOBAL_OPTIONS,
    SHELLS,
    WRAPPER_VALUE_OPTIONS,
    WRAPPERS,
)

__all__ = ["RANK", "Index", "Rule", "ShellReader", "all_rules", "compile_rules", "default_rules"]

RANK: Final[Mapping[str, int]] = {"exempt": 0, "read": 1, "poll": 2, "default": 3, "mutating": 4}
"""How kinds combine over the commands of a line: the highest wins."""

Rule = tuple[tuple[str, ...], tuple[str, ...], str]
"""(subcommand words, options that must be present, kind) of one table key."""

_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_SHORT_GROUP: Final = re.compile(r"-[A-Za-z]+")
_RUNS: Final = frozenset({"default", "poll"})
"""Kinds of a command that runs a program (a test, a build, a script) whose failure is its own."""
_PREPARATIONS: Final = frozenset({"mkdir", "chmod"})
"""Changes that only prepare for a program run after them on the line (``mkdir -p out &&
chmod 700 out && cargo test``): the line is the program's, its status and its kind."""
_RELATIVE_PATH: Final = re.compile(r"[\w.+-]+(?:/[\w.+-]*)*")
"""A relative file path (``environment.yml``, ``src/a.py``), not a package (``numpy==1.2``)."""
_HEADERS: Final = frozenset({"for", "select", "case", "function", "coproc"})
_NOT_COMMANDS: Final = _HEADERS | IGNORED_WORDS
"""First words of a segment that run nothing: compound-command headers and ignored builtins."""
_VERSION_WORDS: Final = frozenset({"--version", "-V", "-v", "--help", "-h"})
"""The one argument that makes any command only print about itself (``python --version``)."""
_EXEC_OPTIONS: Final = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_SPECIAL_NAMES: Final = SHELLS | {"find", "tee", "curl"}
"""Commands read by :meth:`ShellReader._special` rather than by the table alone."""
_GLOBAL_VALUE_OPTIONS: Final[Mapping[str, frozenset[str]]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"}),
    "python": frozenset({"-c", "-W", "-X"}),
    "node": frozenset({"-e", "--eval", "-p", "--print", "-r", "--require"}),
    "perl": frozenset({"-e", "-E"}),
    "ruby": frozenset({"-e"}),
}
"""Options whose value is not an argument (``git -C dir``, ``python -c CODE``)."""
_WAITS: Final = frozenset({"sleep", "wait"})
"""Commands that only let time pass: their (empty) output never reports a state."""
_WAIT: Final = "wait"
"""The outcome of a wait command inside :meth:`ShellReader.analyze` (never returned)."""
_PYTHON_SCRIPT: Final = re.compile(r"python[0-9.]*(?:\.exe)?[^\n;&|]*?(?:\s-[A-Za-z]*c|<<)")
"""A Python interpreter given its script inline (``python -c``, ``python3 - <<'PY'``) on a
line: ``kinds._scripts`` reads such scripts, the C reader does not (``native_reads``)."""
_MAX_DEPTH: Final = 2
"""``bash -c '…'`` inside ``bash -c '…'`` is read; deeper scripts count as running a program."""

Outcome = tuple[str | None, str | None]
"""(kind or None when nothing runs, target or None)."""

_NATIVE: Final = load("otel_loopguard.kinds._reader")
"""The optional C reader (``kinds/_reader.c``): :meth:`ShellReader.analyze` of most command
lines, None for those it leaves to the Python code here, which stays the definition."""
ACCELERATED: Final = _NATIVE is not None
"""Whether the C reader is in use (``otel-loopguard --version``)."""
_NATIVE_TABLES: Final[dict[str, object]] = {
    "keywords": KEYWORDS, "not_commands": _NOT_COMMANDS, "wrappers": WRAPPERS,
    "wrapper_value_options": dict(WRAPPER_VALUE_OPTIONS), "run_words": RUN_WORDS,
    "module_runners": MODULE_RUNNERS, "runners": dict(RUNNERS),
    "runner_global_options": dict(RUNNER_GLOBAL_OPTIONS),
    "python_value_options": PYTHON_VALUE_OPTIONS, "python_flags": PYTHON_FLAGS,
    "shells": SHELLS, "special_names": _SPECIAL_NAMES, "version_words": _VERSION_WORDS,
    "exec_options": _EXEC_OPTIONS, "global_value_options": dict(_GLOBAL_VALUE_OPTIONS),
    "waits": _WAITS, "preparations": _PREPARATIONS, "rank": dict(RANK), "writes": _WRITES,
    "normpath": posixpath.normpath,
    "max_depth": _MAX_DEPTH, "max_nesting": _MAX_NESTING,
}
"""The tables the C reader reads, handed over from here: C repeats none of them, only the words
this module's code names itself (the kinds, ``cd``, ``tar``, ``find``, ``tee``, ``-delete``...)."""


Index = dict[str, list[Rule]]
"""The rules of one command word by first subcommand, each list the most specific first.

``index[""]`` holds the rules without a subcommand; ``index["diff"]`` those starting with
``diff`` followed by those without a subcommand, so a lookup reads one short list.
"""


def compile_rules(table: Mapping[str, str],
                  base: Mapping[str, Index] | None = None) -> dict[str, Index]:
    """Return the table as command word → :data:`Index`.

    A key's words after the first are subcommands (``git diff``) and options (``sed -i``); its
    first word counts by its command name (``./deploy.sh`` is ``deploy.sh``). Entries of
    ``table`` replace the rules of ``base`` with the same key.
    """
    buckets: dict[str, dict[tuple[tuple[str, ...], tuple[str, ...]], str]] = {}
    for key, kind in table.items():
        first, *rest = key.split()
        word = _name(first)
        bucket = buckets.get(word)
        if bucket is None:
            old = base.get(word) if base is not None else None
            bucket = buckets[word] = {(subs, options): k for subs, options, k in _flat(old)}
        bucket[(tuple(r for r in rest if not r.startswith("-")),
                tuple(r for r in rest if r.startswith("-")))] = kind
    rules = dict(base) if base is not None else {}
    for word, bucket in buckets.items():
        rules[word] = _index([(subs, options, kind) for (subs, options), kind in bucket.items()])
    return rules


def _index(rules: list[Rule]) -> Index:
    """Return ``rules`` indexed by first subcommand, the most specific first (stable)."""
    def specific_first(group: list[Rule]) -> list[Rule]:
        return sorted(group, key=lambda rule: -(len(rule[0]) + len(rule[1])))

    plain = [r for r in rules if not r[0]]
    index = {"": specific_first(plain)}
    for sub in {r[0][0] for r in rules if r[0]}:
        index[sub] = specific_first([r for r in rules if r[0][:1] == (sub,)] + plain)
    return index


def _flat(index: Index | None) -> list[Rule]:
    """Return the rules of an :data:`Index`, each once."""
    if not index:
        return []
    return [r for key, group in index.items() for r in group if (r[0][0] if r[0] else "") == key]


def all_rules(rules: Mapping[str, Index]) -> Iterator[tuple[str, Rule]]:
    """Yield (command word, rule) for every rule."""
    for word, index in rules.items():
        for rule in _flat(index):
            yield word, rule


@functools.cache
def default_rules() -> Mapping[str, Index]:
    """Return the built-in table, compiled once."""
    return compile_rules(DEFAULT_COMMAND_KINDS)


def _has_option(args: list[str], option: str) -> bool:
    """Return True when ``option`` is among ``args`` (``-i`` also in ``-i.bak`` and ``-ni``).

    Loops rather than ``any()``: a generator per option checked costs more than the check (the
    table's option rules, ``sed -i`` and ``sed --in-place``, are tried on every ``sed``).
    """
    if option.startswith("--"):
        with_value = option + "="
        for arg in args:  # noqa: SIM110 - see the docstring
            if arg == option or arg.startswith(with_value):
                return True
        return False
    if len(option) != 2:
        return option in args
    letter = option[1]
    for arg in args:
        if arg == option or (arg.startswith(option) and not arg.startswith("--")) or (
                letter in arg and _SHORT_GROUP.fullmatch(arg) is not None):
            return True
    return False


def _has_options(args: list[str], options: tuple[str, ...]) -> bool:
    """Return True when every one of ``options`` is among ``args`` (a loop, as in _has_option)."""
    for option in options:  # noqa: SIM110 - see the docstring
        if not _has_option(args, option):
            return False
    return True



class ShellReader(PackageRunners):
    """Classifies command lines with a compiled command table. Thread-safe (no mutable state)."""

    def __init__(self, rules: Mapping[str, Index]) -> None:
        """Bind to ``rules`` (from :func:`compile_rules`)."""
        self._rules = rules
        self._native = _NATIVE.Reader(rules, _NATIVE_TABLES).analyze \
            if _NATIVE is not None and type(rules) is dict and type(self) is ShellReader else None
        """The C reader of ``rules`` (a plain ShellReader's, of a dict), or None."""

    def analyze(self, text: str, depth: int = 0) -> Outcome:
        """Return the (kind, target) of a command line; kind None when it has no words.

        A redirection into a file decides its command, whatever it runs; a relative target is
        read from the directory of the line's ``cd`` before it (``_in_directory``). A change
        followed by a program that runs (``cat > t.rst <<EOF ... EOF`` then ``sphinx-build``,
        ``sed -i ... a.py && pytest``) keeps its kind but names no target: the line's exit
        status is the program's, so its failure is not the change's. A read after it
        (``&& cat a.py``) leaves the target as it is.

        The C reader answers first where it is built; None from it means the text is read here.
        It does not read Python scripts (``kinds._scripts``): a line that may give one to an
        interpreter is read here.
        """
        native = self._native
        if native is not None and native_reads(text):
            outcome: Outcome | None = native(text, depth)
            if outcome is not None:
                return outcome
        return self._analyze(text, depth)

    def _analyze(self, text: str, depth: int) -> Outcome:
        """:meth:`analyze` in Python: the definition."""
        if not text or text.isspace():
            return None, None
        best_kind: str | None = None
        best_rank = -1
        best_target: str | None = None
        waits = False
        cwd: str | None = None  # where the line's last ``cd`` went; None: not known
        prepared = False  # the line's changes so far only made directories or set modes
        scripts = iter(stdin_scripts(text)) if "<<" in text and "python" in text else None
        for words, writes in segments(strip_heredocs(text)):
            kind: str | None
            target: str | None
            if writes:
                kind, target = "mutating", writes[0]
            elif words[0] == "cd":
                cwd = _changed_directory(cwd, words)
                continue
            else:
                kind, target = self._command(words, depth, scripts)
                if kind is None or kind == _WAIT:
                    waits = waits or kind == _WAIT
                    continue
            if best_target is not None and best_kind == "mutating":
                if kind in _RUNS:
                    if prepared:  # mkdir -p out && cargo test: the program's line
                        best_kind, best_rank, prepared = kind, RANK[kind], False
                        best_target = target if cwd is None else _in_directory(cwd, target)
                        continue
                    best_target = None  # a program after the change decides the exit status
                    break
                prepared = prepared and not writes and _name(words[0]) in _PREPARATIONS
                continue
            rank = RANK[kind]
            if rank > best_rank:
                prepared = kind == "mutating" and not writes and _name(words[0]) in _PREPARATIONS
                best_kind, best_rank, best_target = kind, rank, target
                if cwd is not None:
                    best_target = _in_directory(cwd, target)
            elif kind == best_kind and best_target is None and target is not None:
                best_target = target if cwd is None else _in_directory(cwd, target)
        return _outcome(best_kind, best_rank, best_target, waits)

    def _command(self, words: list[str], depth: int,
                 scripts: Iterator[Outcome | None] | None = None) -> Outcome:
        """Return the outcome of one simple command.

        ``scripts``: the outcomes of the line's Python heredocs still to be read
        (``kinds._scripts.stdin_scripts``).
        """
        start = 0
        for word in words:  # keywords and assignments before the command
            if word in KEYWORDS or ("=" in word and _ASSIGNMENT.match(word)):
                start += 1
            else:
                break
        else:
            return None, None
        word = words[start]
        if word in _NOT_COMMANDS:
            return None, None
        args = words[start + 1:]
        name = _name(word)
        while True:
            if name in WRAPPERS:
                specific = self._match(name, args, specific_only=True)
                if specific is not None:
                    return specific[0], None
                rest = _unwrap(name, args)
                if not rest:
                    return (self._match(name, []) or ("default", 0))[0], None
                word, args = rest[0], rest[1:]
                name = _name(word)
            elif name in RUN_WORDS:
                inner, args = self._runs(name, args)
                if inner is None:
                    break
                word = inner
                name = _name(word)
            else:
                break
        written = _python_writes(args, scripts) if name == "python" else None
        return written if written is not None else self._simple(name, word, args, depth)

    def _simple(self, name: str, word: str, args: list[str], depth: int) -> Outcome:
        if name in _SPECIAL_NAMES or (len(args) == 1 and args[0] in _VERSION_WORDS):
            special = self._special(name, args, depth)
            if special is not None:
                return special
        if name == "tar" and args and not args[0].startswith("-"):
            args = ["-" + args[0], *args[1:]]  # old-style options: tar tzf
        positional = _positional(name, args)
        matched = self._match(name, args, positional)
        kind, used = matched if matched is not None else ("default", 0)
        if kind == "poll" and name in _WAITS:
            return _WAIT, None
        if kind not in ("default", "poll"):  # the file it changes or reads: the last one
            return kind, _first_path(reversed(positional[used:]))
        if "/" in word and matched is None:
            return kind, word  # ./run.sh: the script it runs
        return kind, _first_path(positional[used:])

    def _special(self, name: str, args: list[str], depth: int) -> Outcome | None:
        """Return the outcome of ``bash -c``, ``find``, ``tee`` and ``--version``, else None."""
        if name in SHELLS:
            script = _shell_script(args)
            if script is not None:
                return self.analyze(script, depth + 1) if depth < _MAX_DEPTH else (
                    "default", None)
        if name == "find":
            return self._find(args, depth)
        if name == "tee":
            files = [a for a in args if path_like(a) and not a.startswith("/dev/")]
            return ("mutating", files[0]) if files else ("read", None)
        if name == "curl":
            found = _curl_to_devices(args)
            if found is not None:
                return found
        return ("read", None) if len(args) == 1 and args[0] in _VERSION_WORDS else None

    def _find(self, args: list[str], depth: int) -> Outcome:
        kind: str = "mutating" if "-delete" in args else "read"
        for index, arg in enumerate(args):
            if arg in _EXEC_OPTIONS:
                inner = []
                for item in args[index + 1:]:
                    if item in (";", "+"):
                        break
                    inner.append(item)
                found, _ = self._command(inner, depth)
                if found is not None and found in RANK and RANK[found] > RANK[kind]:
                    kind = found
        paths = [a for a in args if path_like(a) and not a.startswith("-")]
        return kind, paths[0] if paths else None

    def _match(self, name: str, args: list[str], positional: list[str] | None = None,
               specific_only: bool = False) -> tuple[str, int] | None:
        """Return (kind, subcommand words used) of the most specific rule of ``name``."""
        index = self._rules.get(name)
        if not index:
            return None
        if positional is None:
            positional = _positional(name, args)
        group = index.get(positional[0], index[""]) if positional else index[""]
        options_given: list[str] | None = None
        for subs, options, kind in group:
            if subs and tuple(positional[:len(subs)]) != subs:
                continue
            if options:
                if options_given is None:
                    options_given = [a for a in args if a[:1] == "-"]
                if not _has_options(options_given, options):
                    continue
            elif specific_only and not subs:
                continue
            return kind, len(subs)
        return None


def _python_writes(args: list[str],
                   scripts: Iterator[Outcome | None] | None) -> Outcome | None:
    """Return the outcome of a Python interpreter's inline script that writes a file, or None.

    The script of ``-c``, or, when the interpreter reads its standard input (no script file,
    or ``-``), the line's next Python heredoc (``scripts``, in order); see ``kinds._scripts``.
    """
    if "-c" in args:
        index = args.index("-c")
        return code_outcome(args[index + 1]) if index + 1 < len(args) else None
    if scripts is not None and all(arg == "-" or (arg[:1] == "-" and arg != "-m")
                                   for arg in args):
        return next(scripts, None)
    return None


def native_reads(text: str) -> bool:
    """Whether the C reader may read ``text``: not a line giving Python a script that writes.

    ``kinds._scripts`` reads such scripts; a script that writes no file reads as the C reader
    reads its line.
    """
    return "python" not in text or _PYTHON_SCRIPT.search(text) is None \
        or not script_writes(text)


def _curl_to_devices(args: list[str]) -> Outcome | None:
    """Return the outcome of a ``curl`` whose every output option names a device, else None.

    ``curl -s -o /dev/null -w "%{http_code}" URL``, a server check, writes nothing, as a
    redirection to ``/dev/null`` does not: it is the plain ``curl`` (its URL, the last
    path-like word, the target). Output options: ``-o``, ``--output`` and a short group
    ending in ``o`` (``-so``) with the next word, ``--output=F`` and ``-oF``. A ``-O`` (the
    remote file's name) writes a file: None, and the table decides.
    """
    found = False
    for index, arg in enumerate(args):
        group = _SHORT_GROUP.fullmatch(arg) is not None
        if arg in ("--remote-name", "--remote-name-all") or (group and "O" in arg):
            return None
        if arg == "--output" or (group and arg.endswith("o")):
            value = args[index + 1] if index + 1 < len(args) else ""
        elif arg.startswith("--output="):
            value = arg[9:]
        elif arg.startswith("-o") and not group:
            value = arg[2:]
        else:
            continue
        if not value.startswith("/dev/"):
            return None
        found = True
    if not found:
        return None
    urls = [a for a in args if a[:1] != "-" and not a.startswith("/dev/") and path_like(a)]
    return "default", urls[-1] if urls else None


def _first_path(words: Iterable[str]) -> str | None:
    """Return the first of ``words`` that can name a file, URL or id, or None."""
    for word in words:
        if path_like(word):
            return word
    return None


def _positional(name: str, args: list[str]) -> list[str]:
    """Return the arguments that are not options (nor values of ``git -C`` style options)."""
    takes_value = _GLOBAL_VALUE_OPTIONS.get(name)
    if takes_value is None:
        return [arg for arg in args if arg[:1] != "-" or arg == "-"]
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in takes_value:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _unwrap(wrapper: str, args: list[str]) -> list[str]:
    """Return the command a wrapper runs (``timeout 60 pytest`` → ``pytest``)."""
    takes_value = WRAPPER_VALUE_OPTIONS.get(wrapper, frozenset())
    index, duration_left = 0, wrapper == "timeout"
    while index < len(args):
        arg = args[index]
        if arg in takes_value:
            index += 2
        elif (arg.startswith("-") and arg != "-") or (
                wrapper == "env" and _ASSIGNMENT.match(arg)):
            index += 1
        elif duration_left:
            index, duration_left = index + 1, False
        else:
            break
    return args[index:]


def _shell_script(args: list[str]) -> str | None:
    """Return the script of ``bash -c SCRIPT`` (also ``-lc``, ``-ec``); None for ``bash file``."""
    for index, arg in enumerate(args):
        if _SHORT_GROUP.fullmatch(arg) and "c" in arg:
            return args[index + 1] if index + 1 < len(args) else ""
        if not arg.startswith("-"):
            return None
    return None


def _outcome(kind: str | None, rank: int, target: str | None, waits: bool) -> Outcome:
    """Return a line's outcome: waiting, then looking again, is a poll; waiting alone, nothing."""
    if waits:
        if kind is None:
            return "exempt", None
        if rank < RANK["poll"]:
            return "poll", target
    return kind or "read", target


def _changed_directory(cwd: str | None, words: list[str]) -> str | None:
    """Return where ``cd DIR`` leaves a line that was in ``cwd`` (None: not known).

    An absolute ``DIR`` is known; a relative one only from a known ``cwd``. ``cd`` alone,
    ``cd -`` and ``cd ~`` go where the line cannot tell.
    """
    if len(words) != 2:
        return None
    directory = words[1]
    if directory.startswith("/"):
        return _normal(directory)
    if cwd is None or not _RELATIVE_PATH.fullmatch(directory):
        return None
    return _normal(f"{cwd}/{directory}")


def _in_directory(cwd: str, target: str | None) -> str | None:
    """Return a relative file target as the absolute path it names after ``cd cwd``.

    ``cd /app && conda env create -f environment.yml`` reads ``/app/environment.yml``, the file
    ``cat > /app/environment.yml`` writes: one target, so that write ends the command's streak
    of failures. Only what looks like a file path (a ``/`` or a ``.`` in it) is joined: a
    package name (``scipy``, ``numpy==1.26``) is not a path.
    """
    if target is not None and ("/" in target or "." in target) and not target.startswith("/") \
            and _RELATIVE_PATH.fullmatch(target):
        return _normal(f"{cwd}/{target}")
    return target


def _normal(path: str) -> str:
    """Return an absolute ``path`` without ``.``, ``..``, doubled or trailing slashes.

    ``posixpath.normpath`` only where one of those is in it: most paths need none, and it is
    pure Python (``benchmarks/bench_shell_reader.py``).
    """
    if "//" in path or "/." in path or path.endswith("/"):
        return posixpath.normpath(path)
    return path
