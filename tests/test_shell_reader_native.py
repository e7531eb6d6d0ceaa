"""The C shell reader (``kinds/_reader.c``) gives the Python reader's outcome, or leaves the text
to it (None), on every command line of the committed corpora and on random texts.

The accelerator is built from its source here when the installed package lacks it (an editable
install, a pure-Python wheel); the tests skip only when this machine cannot compile it.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _compiled import compiled, memory_grown

from otel_loopguard.kinds import CallKindClassifier
from otel_loopguard.kinds import _shell as shell_module
from otel_loopguard.kinds._lexer import strip_heredocs
from otel_loopguard.kinds._shell import ShellReader, compile_rules, default_rules

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "tests" / "data" / "shell_commands.jsonl"

MAX_LABELLED_BAIL = 0.03
"""Share of the labelled commands the C reader may leave to Python (now 2 of 353: a ``case``
statement, a ``;;``)."""
MAX_CORPUS_BAIL = 0.05
"""Share of the corpora's distinct command lines it may leave to Python (now 2.8 % of 14.4k:
text past ASCII outside heredoc bodies, ``case`` statements)."""


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled reader: the installed one, else one built from the source now."""
    return compiled("otel_loopguard/kinds/_reader.c", tmp_path_factory)


class _Recorder:
    """A reader that keeps the texts the classifier asks about (and reads nothing)."""

    def __init__(self) -> None:
        self.texts: dict[str, None] = {}

    def analyze(self, text: str, depth: int = 0) -> tuple[None, None]:
        self.texts[text] = None
        return None, None

    def _command(self, words: list[str], depth: int) -> tuple[None, None]:
        """A program's words in a PowerShell line: not a POSIX line the C reader reads."""
        return None, None


def _calls_of_runs() -> Iterator[tuple[str, Any]]:
    """(tool, arguments) of every call of the whole runs (``tests/corpus/runs``)."""
    for path in sorted((ROOT / "tests" / "corpus" / "runs").glob("*/*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                for turn in json.loads(line)["turns"]:
                    for call in turn["calls"]:
                        yield call["tool"], call["args"]


def _calls_of_excerpts() -> Iterator[tuple[str, Any]]:
    """(tool, JSON arguments) of every tool span of the excerpts (``runs.jsonl.gz``, OTLP/JSON)."""
    with gzip.open(ROOT / "tests" / "corpus" / "runs.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        attributes = {a["key"]: a["value"] for a in span.get("attributes", [])}
                        tool = attributes.get("gen_ai.tool.name", {}).get("stringValue")
                        arguments = attributes.get("gen_ai.tool.call.arguments", {})
                        if tool is not None and "stringValue" in arguments:
                            yield tool, arguments["stringValue"]


@cache
def labelled_texts() -> list[str]:
    with open(LABELLED, encoding="utf-8") as handle:
        return [json.loads(line)["command"] for line in handle if line.strip()]


@cache
def corpus_texts() -> list[str]:
    """The distinct command texts the classifier reads in the committed corpora, as it cuts them."""
    classifier = CallKindClassifier()
    recorder = _Recorder()
    classifier._reader = recorder  # type: ignore[assignment]
    for tool, arguments in (*_calls_of_runs(), *_calls_of_excerpts()):
        classifier.kind(tool, arguments)
    return list(recorder.texts)


def _differences(native: ModuleType, texts: list[str], rules: Any = None,
                 ) -> tuple[list[tuple[str, Any, Any]], int]:
    """Return the texts whose C outcome is not the Python one, and how many C left to Python."""
    rules = default_rules() if rules is None else rules
    reader = native.Reader(rules, shell_module._NATIVE_TABLES)
    python = ShellReader(rules)
    differ, bails = [], 0
    for text in texts:
        found = reader.analyze(text) if shell_module.native_reads(text) else None
        if found is None:
            bails += 1
            continue
        expected = python._analyze(text, 0)
        if found != expected or type(found) is not tuple:
            differ.append((text, found, expected))
    return differ, bails


@pytest.mark.parametrize(("texts_of", "least", "most_bail"), [
    (labelled_texts, 350, MAX_LABELLED_BAIL), (corpus_texts, 10_000, MAX_CORPUS_BAIL)],
    ids=["labelled", "corpus"])
def test_committed_commands_read_as_in_python(native: ModuleType, texts_of: Any, least: int,
                                              most_bail: float) -> None:
    """The labelled command lines, and every command line of the corpora's runs and excerpts."""
    texts = texts_of()
    assert len(texts) >= least
    differ, bails = _differences(native, texts)
    assert not differ, f"{len(differ)} differ, first: {differ[:3]!r}"
    assert bails <= most_bail * len(texts), f"{bails} of {len(texts)} left to Python"


def test_a_configured_table_reads_as_in_python(native: ModuleType) -> None:
    """A ``command_kinds`` table on top of the built-in one: the same rules, read by both."""
    rules = compile_rules({"make deploy": "mutating", "pytest": "poll", "grep -c": "poll",
                           "sed": "exempt", "deploy.sh --dry-run": "read"}, default_rules())
    texts = [*labelled_texts(), "make deploy && grep -c x f", "./deploy.sh --dry-run a",
             "sudo sed s/a/b/ f && pytest -x", "uv run pytest", "timeout 5 make deploy"]
    differ, bails = _differences(native, texts, rules)
    assert not differ, f"{len(differ)} differ, first: {differ[:3]!r}"
    assert bails <= MAX_LABELLED_BAIL * len(texts)


def test_curl_output_options_read_as_in_python(native: ModuleType) -> None:
    """A curl whose every output option names a device writes nothing (a server check), in
    both readers; ``-O`` or an output file still writes."""
    expected = {
        'curl -s -o /dev/null -w "%{http_code}" http://localhost:3000/api/auth/me':
            ("default", "http://localhost:3000/api/auth/me"),
        "curl -sSo /dev/null http://localhost:8080/health": ("default", "http://localhost:8080/health"),
        "curl --output=/dev/null --silent http://127.0.0.1:5000/": ("default", "http://127.0.0.1:5000/"),
        "curl -o/dev/null -s http://x.test/a": ("default", "http://x.test/a"),
        "curl -sL -o install.sh https://example.com/install.sh": ("mutating", "https://example.com/install.sh"),
        "curl -o /dev/null -O https://example.com/data.tgz": ("mutating", "https://example.com/data.tgz"),
        "curl -o": ("mutating", None),
    }
    python = ShellReader(default_rules())
    assert {text: python._analyze(text, 0) for text in expected} == expected
    differ, bails = _differences(native, list(expected))
    assert not differ and not bails, differ


_PIECES = (
    *"abcxyz019 \t\n\r\f\v'\"\\;&|()<>=-/.#$`{}[]*+@~!:_,", "\x00", "\x1c", "\x1d", "\x1e",
    "\x1f", "\x7f",
    *"é中\u00a0\u2003\u2028\U0001f600", "café",
    "<<EOF", "EOF", "<<'X'", "X", '<<"E"', "<<-", "<<<", "<<''", "$(", ")", "2>&1", ">&", "&>",
    "&>>", ">>", ">|", "<>", "<&", "&&", "||", ";;", ";&", "|&", "\\\n", "'a b'", '"a\\"b"',
    "cd ", "cd /a/b", "cd ..", "cd src", "cd -", " && ", " | ", "; ", "\n",
    "bash -c ", "sh -lc ", "bash -ec ", "zsh script.sh", "sudo ", "sudo -u me ", "env A=1 ",
    "env -u X ", "timeout 5 ", "timeout -s KILL 5 ", "nohup ", "xargs -I {} ", "nice -n 5 ",
    "python -m pytest ", "python3.11 -u -m ", "python -X dev -m ", "python -Werror -m ",
    "python -mpytest", "python -c ", "pypy3 -m pip install x", "pip3 install ",
    "npx ", "npx -y prettier@3 --write ", "npm exec -- ", "pnpm --filter web exec ", "pnpm ",
    "yarn ", "yarn eslint --fix ", "uvx ruff@0.6 ", "uv run ", "uv run -m pytest ",
    "uv --directory d run ", "poetry run ", "pipx run ", "bunx ", "npx -c ", "prettier==3 ",
    "git -C x diff ", "git status", "git ", "commit -m ", "sed -i ", "sed -ni ",
    "sed --in-place=.b ",
    "rm -rf ", "cat ", "tee ", "tee -a ", "/dev/null", "/dev/stderr", "find . -exec ",
    "curl ", "-o ", "-so ", "-O ", "--output ", "--output=", "-o/dev/null ",
    "find -execdir ", " \\;", " ';' ", " + ", "-delete", "tar xzf ", "tar -tf ", "tar ",
    "mkdir -p out", "chmod 700 x", "cargo test", "sleep 1", "wait", "watch ls",
    "case x in", "case", "in", "esac", "if ", "then ", "fi", "for i in 1 2", "do ", "done",
    "A[1]+=2 ", "X=1 ", "--version", "-V", "-h", "pip install -e .", "echo ", "grep -rn foo src",
    ">", "out.txt", "a.py", "./run.sh", "../x/./y//", "x/", "//", "/.", "x=", "-", "--", "1",
    "#", "# c\n", "ls", "pytest -x", "kubectl rollout status x", "tail -f log", "{ ", " }",
    "'", '"', "`", "!", "123abc", "0<", "3>", "9>>", "-x", "-cx", "-lc", "=", "a=b",
)


def _random_texts(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 30)))


def test_random_texts_read_as_in_python_or_left_to_it(native: ModuleType) -> None:
    """Shell syntax at random: quotes, backslashes, operators, heredocs, ``$(``, ``case``,
    wrappers and runners, text past ASCII, Unicode spaces, NUL: the same outcome, or None."""
    texts = list(_random_texts(30_000, 11))
    differ, bails = _differences(native, texts)
    assert not differ, f"{len(differ)} differ, first: {differ[:3]!r}"
    assert bails < 0.6 * len(texts)  # the pieces past ASCII make many texts Python's


_HEREDOC_PIECES = (
    "<<", "<<-", "<<<", "<", "-", " ", "\t", "\n", "\n", "\n", "'", '"', "\\", "EOF", "E", "X",
    "x.y-z", "'EOF'", '"EOF"', "\\EOF", "''", "cat ", " > f", "rm a", "  EOF  ", "\tEOF", "EOF\n",
    "\nEOF\n", "X\n", "<<'A b'", "A b", "\r", "\x0b", "\x1c", "é", "\u2003", "\xa0", "a", "#",
    ";", "(", "$(cat <<E\n", ")")


def test_heredocs_are_stripped_as_in_python(native: ModuleType) -> None:
    """The C ``strip_heredocs`` on the corpora's command lines and on random heredocs:
    ``_lexer.strip_heredocs``'s text, or None (a line opening a heredoc past ASCII)."""
    rng = random.Random(3)
    texts = [*labelled_texts(), *corpus_texts(),
             *("".join(rng.choice(_HEREDOC_PIECES) for _ in range(rng.randrange(0, 40)))
               for _ in range(30_000))]
    differ, bails = [], 0
    for text in texts:
        found = native.strip_heredocs(text)
        if found is None:
            bails += 1
        elif found != strip_heredocs(text):
            differ.append(text)
    assert not differ, f"{len(differ)} differ, first: {differ[:3]!r}"
    assert bails < 0.5 * len(texts)
    with_heredoc = [text for text in corpus_texts() if "<<" in text]
    assert len(with_heredoc) > 1000
    assert sum(native.strip_heredocs(text) is None for text in with_heredoc) < 20
    differ_outcome, _ = _differences(native, texts[-30_000:])
    assert not differ_outcome, f"{len(differ_outcome)} differ, first: {differ_outcome[:3]!r}"
    with pytest.raises(TypeError):
        native.strip_heredocs(b"cat <<EOF")


def test_long_and_deep_texts(native: ModuleType) -> None:
    """Texts at the caller's bound (4,096 characters) and beyond, deep parentheses, nested
    ``bash -c`` and ``find -exec``: the same outcome, or None; never a crash."""
    texts = [
        "(" * 5000 + "rm a" + ")" * 5000,
        "echo " + "'" * 9999,
        '"' + "\\" * 10001,
        "find . -exec " * 2000 + "rm {} ;",
        "bash -c 'bash -c \"bash -c \\\"bash -c rm\\\"\"'",
        "sudo " * 3000 + "rm x",
        "cd /a && " * 1000 + "cat ../b/./c",
        "cat <<EOF\n" + "x\n" * 3000 + "EOF\nrm y",
        "echo " + "a" * 5000 + " > " + "b" * 2000,
        *(f"cat {'a' * size}" for size in (1023, 1024, 1025)),  # _PATH_LIKE: 1,024 at most
        *(f"cd /{'d' * size} && rm {'a' * size}/./b" for size in (1022, 1023, 1024)),
        " \t\n\r\f\v\x1c",
        "\u3000\u2028",
        "",
        "\x00",
        "a\x00b > c\x00d",
    ]
    differ, _ = _differences(native, texts)
    assert not differ, f"{len(differ)} differ, first: {[d[0][:60] for d in differ[:3]]!r}"


def test_what_the_reader_leaves_to_python(native: ModuleType) -> None:
    reader = native.Reader(default_rules(), shell_module._NATIVE_TABLES)
    for text in ("case $x in a) rm f;; esac", "echo é > f", "a ;& b", "ls\u2003x"):
        assert reader.analyze(text) is None, text
    assert reader.analyze("rm a.py", -1) is None  # a negative depth
    assert reader.analyze(b"rm a.py") is None  # type: ignore[arg-type]
    assert reader.analyze("cat <<EOF > out.py\né\nEOF") == ("mutating", "out.py")
    assert reader.analyze("ls\x1csrc\x1f'a\x1cb' >\x1d\x1eout") == ("mutating", "out")
    assert reader.analyze("cd /app && sed -i s/a/b/ src/x.py") == ("mutating", "/app/src/x.py")
    with pytest.raises(TypeError):
        native.Reader(default_rules(), {**shell_module._NATIVE_TABLES, "keywords": ["if"]})
    with pytest.raises(KeyError):
        native.Reader(default_rules(), {})
    with pytest.raises(TypeError, match="__init__"):
        native.Reader.__new__(native.Reader).analyze("rm a")
    half = native.Reader(default_rules(), shell_module._NATIVE_TABLES)
    with pytest.raises(TypeError):  # a table of the wrong shape: the reader is not used
        half.__init__(default_rules(), {**shell_module._NATIVE_TABLES, "runners": {"npx": 1}})
    with pytest.raises(TypeError, match="__init__"):
        half.analyze("rm a")


def test_a_table_not_made_by_compile_rules_is_left_to_python(native: ModuleType) -> None:
    odd: dict[str, Any] = {"rm": {"": [("x",)]}, "cat": {"x": []}, "ls": [1]}
    reader = native.Reader(odd, shell_module._NATIVE_TABLES)
    for text in ("rm a", "cat a", "ls a"):
        assert reader.analyze(text) is None, text
    unranked = compile_rules({"rm": "vanish"})
    assert native.Reader(unranked, shell_module._NATIVE_TABLES).analyze("rm a") is None


def test_no_memory_is_left_behind(native: ModuleType) -> None:
    reader = native.Reader(default_rules(), shell_module._NATIVE_TABLES)
    texts = labelled_texts()[:200]
    grown = memory_grown(lambda: [reader.analyze(text) for text in texts])
    assert grown < 20_000, grown


def test_the_shell_reader_answers_with_the_c_reader(native: ModuleType,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``ShellReader.analyze`` takes the C outcome where there is one, else reads in Python;
    a subclass (which may change what a method does) is always read in Python."""
    monkeypatch.setattr(shell_module, "_NATIVE", native)
    reader = ShellReader(default_rules())
    assert reader._native is not None
    calls: list[str] = []
    monkeypatch.setattr(reader, "_analyze", lambda text, depth: calls.append(text) or ("x", None))
    assert reader.analyze("grep -rn foo src") == ("read", "src")
    assert reader.analyze("case a in b) rm c;; esac") == ("x", None)
    assert calls == ["case a in b) rm c;; esac"]

    class Sub(ShellReader):
        pass

    assert Sub(default_rules())._native is None


@pytest.mark.parametrize("env, used", [({"LOOPGUARD_PURE_PYTHON": "1"}, False),
                                       ({"OTEL_LOOPGUARD_PURE_PYTHON": "1"}, False),
                                       ({"LOOPGUARD_PURE_PYTHON": "0"}, True)])
def test_pure_python_turns_the_c_reader_off(native: ModuleType, env: dict[str, str],
                                            used: bool) -> None:
    """The child imports the compiled module from where this test built or found it."""
    location = Path(native.__file__).resolve()  # type: ignore[arg-type]
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('otel_loopguard.kinds._reader', "
        f"{str(location)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "sys.modules['otel_loopguard.kinds._reader'] = module\n"
        "from otel_loopguard.kinds._shell import ShellReader, default_rules\n"
        "print(ShellReader(default_rules())._native is not None)\n")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("LOOPGUARD_PURE_PYTHON", "OTEL_LOOPGUARD_PURE_PYTHON")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**clean, **env, "PYTHONPATH": str(ROOT)}, check=True, timeout=60)
    assert done.stdout.strip() == str(used)
