"""The shell reader's fast paths give what the straightforward readings give.

The shell reader (``otel_loopguard.kinds._lexer`` and ``_shell``) reads a command line with a
few shortcuts: a token regex written as a loop over quoted parts only, ``str.replace`` for words
quoted with one kind of quote, heredoc bodies skipped with ``str.find`` over the whole text, and
the version regex of command names (``python3.11``) tried only on names ending in a digit or a
dot. Each is compared here with
the plain reading it replaced (kept in this file as the oracle) on generated command lines made
of shell specials, quotes, heredoc markers and real command words, so a future divergence fails.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.kinds import CallKindClassifier
from otel_loopguard.kinds._lexer import (
    _DQ_ESCAPE,
    _TOKEN,
    _UNQUOTE,
    _unquote_part,
    segments,
    strip_heredocs,
    unquote,
)
from otel_loopguard.kinds._runners import _VERSIONED
from otel_loopguard.kinds._runners import command_name as _name

_PLAIN_TOKEN = re.compile(r"""
    [ \t\r\f\v]*
    (?:
      (?P<nl>\n)
    | (?P<comment>\#[^\n]*)
    | (?P<redir>\d*(?:>>|>\||>&|<<<|<<-|<<|<>|<&|>|<)|&>>?)
    | (?P<op>&&|\|\||;;&?|;&|\|&|[;&|()])
    | (?P<word>(?:[^\s'"\\;&|()<>]+|'[^']*'?|"[^"\\]*(?:\\.[^"\\]*)*"?|\\.?)+)
    )
""", re.VERBOSE | re.DOTALL)
"""The token regex as an alternation of parts repeated per part: one group per token type."""


_PLAIN_HEREDOC = re.compile(
    r"""(?<!<)<<(?!<)(-?)[ \t]*(?:'([^'\n]*)'|"([^"\n]*)"|\\?([\w.-]+))""")
"""A heredoc's start: ``<<`` not part of ``<<<``, an optional ``-``, the delimiter word."""


def _plain_tokens(text: str) -> list[tuple[str, str, str]]:
    """Return the tokens of ``text`` by the plain regex, as (redirection, operator, word)."""
    return [(redir, op or nl, word) for nl, _, redir, op, word in _PLAIN_TOKEN.findall(text)]


def _plain_strip_heredocs(text: str) -> str:
    """Return ``text`` without its heredoc bodies, reading it line by line."""
    if "<<" not in text:
        return text
    kept: list[str] = []
    pending: list[str] = []
    for line in text.split("\n"):
        if pending:
            if line.strip() == pending[0]:
                del pending[0]
            continue
        kept.append(line)
        for match in _PLAIN_HEREDOC.finditer(line):
            before = line[:match.start()]
            if before.count("'") % 2 or before.count('"') % 2:
                continue
            pending.append(match.group(2) or match.group(3) or match.group(4) or "")
    return "\n".join(kept)


_PIECES = st.sampled_from([
    "a", "b1", "x.py", "/tmp/f", "2", "-n", "-i.bak", "--in-place", "'", '"', "\\", "\\\n", "$(",
    "(", ")", "`", "<<", "<<-", "<<<", "<<'EOF'", '<<"EOF"', "<<\\EOF", "EOF", " EOF ", "\tEOF",
    "<<' EOF '", "<<''", '<<" X"', " X", "X", "<<-X", "\nX\n",
    "''", "\n", "\r", "\n\n", " ", "  ", "\t", ";", ";;", ";&", "&&", "||", "|", "|&", "&", ">",
    ">>", "2>&1", ">&2", "&>", "<", "#", "# c", "=", "A=1", "case", "in", "esac", "sed", "cat",
    "git", "bash", "-c", "find", "-exec", "tee", "sleep", "\u00a0", "\u2028", "é", "'a\"b'",
    '"a\\"b"', "'it''s'", '"$x"',
])
_COMMANDS = st.lists(_PIECES, max_size=40).map("".join)
"""Command lines of shell specials, quotes, heredoc markers and command words, unspaced."""
_TEXTS = _COMMANDS | st.text(max_size=80)


@settings(max_examples=600)
@given(_TEXTS)
def test_token_regex_matches_the_plain_alternation(text: str) -> None:
    """The token loop over quoted parts finds the tokens the per-part alternation finds.

    A word without quotes or backslashes, not starting with a digit, comes in its own group (it
    needs no unquoting).
    """
    tokens = _TOKEN.findall(text)
    assert [(redir, op, plain or other) for plain, redir, op, other in tokens] == (
        _plain_tokens(text))
    for plain, _, _, other in tokens:
        assert not (plain and other)
        assert unquote(plain) == plain


@settings(max_examples=600)
@given(_TEXTS)
def test_unquote_fast_path_matches_the_substitution(text: str) -> None:
    """Each word unquotes as the regex substitution of every quoted part does."""
    for plain, _, _, other in _TOKEN.findall(text):
        for word in (plain, other):
            assert unquote(word) == _UNQUOTE.sub(_unquote_part, word)
    assert unquote(text) == _UNQUOTE.sub(_unquote_part, text)


@settings(max_examples=600)
@given(_TEXTS)
def test_heredoc_bodies_are_skipped_as_line_by_line(text: str) -> None:
    """Skipping bodies with searches over the text keeps the lines a line-by-line read keeps."""
    assert strip_heredocs(text) == _plain_strip_heredocs(text)


@settings(max_examples=400)
@given(st.lists(st.sampled_from(["p", "y", "python", "pip", "pypy", "3", "11", ".", "/", "x",
                                 "-", "_"]), max_size=8).map("".join))
def test_command_names_fold_versions_as_the_regex_does(word: str) -> None:
    """Only a name ending in a digit or dot is matched against the version regex: same names."""
    name = word.rsplit("/", 1)[-1]
    versioned = _VERSIONED.fullmatch(name)
    assert _name(word) == (versioned.group(1) if versioned else name)


def test_oracles_see_what_they_check() -> None:
    """The generated pieces reach each path: a one-quote word, a heredoc body, a cased pattern."""
    assert unquote("'1,260p'") == "1,260p" and unquote('"a b"c') == "a bc"
    assert (_name("/usr/bin/python3.11"), _name("pip3"), _name("python")) == (
        "python", "pip", "python")
    assert _DQ_ESCAPE.sub(r"\1", '\\"') == '"'
    text = "cat <<'EOF' > a.py\nx = 1\n  EOF  \nls\ncat <<-X <<Y\n\tX\nbody\nY\npwd"
    assert strip_heredocs(text) == _plain_strip_heredocs(text) == (
        "cat <<'EOF' > a.py\nls\ncat <<-X <<Y\npwd")
    assert strip_heredocs("cat <<''\nbody\n\nls") == "cat <<''\nls"
    assert list(segments("case $x in a) rm f;; b|c) ls;; esac; pwd")) == [
        (["rm", "f"], []), (["ls"], []), (["pwd"], [])]


@settings(max_examples=300)
@given(_COMMANDS)
def test_odd_command_lines_never_raise(text: str) -> None:
    """Any generated command line gets a kind (or None when it has no words), never an error."""
    kind, _ = CallKindClassifier()._reader.analyze(text)
    assert kind in (None, "read", "mutating", "poll", "exempt", "default")
