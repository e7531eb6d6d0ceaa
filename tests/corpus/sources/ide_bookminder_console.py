"""Claude Code and Gemini CLI console transcripts of one developer's project -> runs/ide.

Source: github.com/palimondo/BookMinder, commit COMMIT below, ``claude-dev-log-diary/day-*.md``;
licence MIT (LICENSE, Pavol Vaskovic), so result text is kept (``content: "partial"``: the
console folds long outputs, see below). The developer copied the terminal of each working day
into one file: Claude Code sessions (research preview to 1.0, claude-opus-4, claude-sonnet-4,
claude-3-7-sonnet) and Gemini CLI sessions (gemini-2.5-pro and gemini-2.5-flash) on one Python
project, run interactively, the developer prompting between turns.

Runs: one per session. A session starts at the agent's start-up banner at the margin (Claude Code's
``Welcome to Claude Code`` box, Gemini CLI's ``Tips for getting started``; a banner inside a
tool's output is output); text before a day's
first banner is a session too when it has tool calls (the copy began mid-session). Sessions
without a tool call are left out. A resumed conversation's history, printed again at its start,
is dropped (``_REPRINT``); ``day-020.md`` is left out (``_LEFT_OUT``). Every other session of
every day is taken.

How the console maps to turns and calls:

- Claude Code: a ``⏺ Name(arguments)`` line (the arguments may wrap over further lines up to the
  closing parenthesis; older versions end it with ``…``) is a call, and the ``⎿`` block under it
  its result as the console shows it. Tools are named as Claude Code names them for the model:
  ``Bash`` (``command``), ``Read`` (``file_path``), ``Update``/``Edit`` are ``Edit``
  (``file_path``; the change itself is shown as the result's diff), ``Write``/``Create`` are
  ``Write`` (``file_path``), ``Search``/``Grep`` are ``Grep`` (``pattern`` and ``path`` as the
  console prints them), ``List``/``LS`` are ``LS`` (``path``), ``Fetch`` is ``WebFetch``
  (``url``), ``Task``/``Call`` are ``Task`` (``description``; the sub-agent's calls are only
  counted in its result). A result that starts with ``Error`` is a failure (its first line);
  ``Interrupted by user`` and ``User rejected ...``/``No (tell Claude ...)`` are failures too.
- Gemini CLI: each status line in a tool box (`` │ ✔  Shell ls -la``) is a call: ``✔`` succeeded,
  ``x`` failed (the box's first line of output is the error), ``-`` cancelled by the developer
  (error ``cancelled``). Tools get their function names: Shell ``run_shell_command``
  (``command``, without the description the console prints after it in parentheses), ReadFile ``read_file`` (``absolute_path``), ReadManyFiles ``read_many_files``
  (``paths``), Edit ``replace`` (``file_path``, and the change's first lines as the console prints
  them, ``old => new``, as ``instruction``), WriteFile ``write_file`` (``file_path``), FindFiles
  ``glob`` (``pattern``), ReadFolder ``list_directory`` (``path``), GoogleSearch
  ``google_web_search`` (``query``), WebFetch ``web_fetch`` (``prompt``), SearchText
  ``search_file_content`` (``pattern``). The box's text under the status line is the result.
- The developer's prompt (``> ...``, or in a box of its own in later Gemini CLI versions) is the
  ``input`` of the next call's turn; the agent's text
  before a call (``⏺ ...``, ``✦ ...``) its ``output``. Each call is a turn of its own: the console
  does not say which calls one response made together. Agent text after the session's last call is
  a turn without calls.
- What the console folded stays folded: ``… +7 lines (ctrl+r to expand)`` is kept in the result,
  so two outputs that differ only inside the fold read the same. A result the console shows only
  by its size (``Read 120 lines (ctrl+r to expand)``, ``Found 3 files``, ``Listed 12 paths``,
  Gemini CLI's ``Found 8 matching file(s)`` and ``Listed 5 item(s).``, a fetch's ``Received
  1.2MB (200 OK)``, a sub-agent's ``Done (4 tool uses · 12.1k tokens · 1m 2.5s)``) was not
  captured: the model saw the file, the listing or the report, the console its size (``SIZE_ONLY``);
  it is null. ``Found 0 files`` is what the search found, and stays. A call the console cut
  at its width (a Gemini CLI status line, or the text inside a Claude Code call's parentheses,
  ending with ``…``; a Gemini edit's change excepted, which is partial by design) is not what
  the model sent: its arguments are not captured (``{}``), so two commands cut to the same
  text are not the same call. Results over 4,000
  characters are capped as FORMAT.md says.

Usage: ``python tests/corpus/sources/ide_bookminder_console.py REPO`` where REPO is a local clone
(or bare git directory) of the source at COMMIT; writes ``runs/ide/bookminder-console.jsonl.gz``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from _store import cap, write_runs

SOURCE = "palimondo/BookMinder"
COMMIT = "451791e291c7635cc77e2256163847e946546eb5"
LICENCE = "MIT"
SLUG = "bookminder-console"
OUT = Path(__file__).resolve().parents[1] / "runs" / "ide" / f"{SLUG}.jsonl.gz"

_CLAUDE_CALL = re.compile(r"^[⏺●] ([A-Z][A-Za-z]*)\((.*)$")
_CLAUDE_TEXT = re.compile(r"^[⏺●] (.*)$")
_GEMINI_CALL = re.compile(r"^ │ ([✔x\-o⊷])  ([A-Z][A-Za-z]*) ?(.*?)\s*│?$")
_CLAUDE_TOOLS = {"Bash": "Bash", "Read": "Read", "Update": "Edit", "Edit": "Edit",
                 "Write": "Write", "Create": "Write", "Search": "Grep", "Grep": "Grep",
                 "List": "LS", "LS": "LS", "Fetch": "WebFetch", "Task": "Task", "Call": "Task"}
_GEMINI_TOOLS = {"Shell": ("run_shell_command", "command"), "ReadFile": ("read_file", "absolute_path"),
                 "ReadManyFiles": ("read_many_files", "paths"), "Edit": ("replace", "file_path"),
                 "WriteFile": ("write_file", "file_path"), "FindFiles": ("glob", "pattern"),
                 "ReadFolder": ("list_directory", "path"),
                 "GoogleSearch": ("google_web_search", "query"), "WebFetch": ("web_fetch", "prompt"),
                 "SearchText": ("search_file_content", "pattern")}
_MODEL = re.compile(r"(?:Model:?\s+|Set model to \w+ \()((?:claude|gemini)-[\w.-]*\w)")
"""Where the console names the model: Gemini CLI's ``/about`` and ``/stats`` boxes (``Model
gemini-2.5-pro``), Claude Code's ``/status`` (``Model: claude-opus-4-...``) and ``/model``
(``Set model to Opus (claude-opus-4-...)``)."""


_KEYED = re.compile(r'(\w+): "((?:[^"\\]|\\.)*)"')
_MAIN_KEY = {"Bash": "command", "Read": "file_path", "Edit": "file_path", "Write": "file_path",
             "LS": "path", "WebFetch": "url", "Task": "description"}


def _claude_args(tool: str, text: str) -> dict[str, Any]:
    """A call's arguments as the console prints them: bare (``Read(a.py)``) or keyed
    (``Read(file_path: "a.py")``, ``Search(pattern: "x", path: "y")``) by version."""
    text = text.strip()
    keyed = {key: value.replace('\\"', '"') for key, value in _KEYED.findall(text)} \
        if re.match(r'^\w+: "', text) else {}
    if tool == "Grep":
        return keyed or {"pattern": text}
    key = _MAIN_KEY.get(tool, "description")
    return {key: keyed[key]} if key in keyed else {key: text}


def _claude_error(result: str) -> str | None:
    first = result.split("\n", 1)[0].strip()
    if first.startswith("Error") or first.startswith("Interrupted by user") \
            or first.startswith("User rejected") or first.startswith("No (tell Claude"):
        return first[:200]
    return None


def _strip_box(line: str) -> str:
    """A line inside a Gemini CLI box, without its borders and the box's indent."""
    body = line[3:] if line.startswith(" │ ") else line
    return body[:-1].rstrip() if body.rstrip().endswith("│") else body.rstrip()


SIZE_ONLY = re.compile(
    r"(?:Read \d+ lines?|Found [1-9]\d* files?|Listed \d+ paths?|Found [1-9]\d* matching file\(s\)"
    r"|Listed \d+ item\(s\)\.|Received [\d.]+ ?[KMG]?B \(\d+ [^)]*\)|Done \(\d+ tool uses? [^)]*\))"
    r"(?: \(ctrl\+r to expand\))?")
"""What the console shows of a result it did not print: its size (see the module's notes)."""


class _Session:
    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.turns: list[dict[str, Any]] = []
        self.said: list[str] = []
        self.asked: list[str] = []

    def text(self, line: str) -> None:
        self.said.append(line)

    def prompt(self, line: str) -> None:
        self.asked.append(line)

    def call(self, tool: str, args: dict[str, Any], result: str | None,
             error: str | None) -> None:
        self.turns.append({
            "input": "\n".join(self.asked).strip() or None,
            "output": "\n".join(self.said).strip() or None, "agent": None,
            "calls": [{"tool": tool, "args": args,
                       "result": None if result is None or SIZE_ONLY.fullmatch(result.strip())
                       else cap(result), "error": error}]})
        self.said, self.asked = [], []

    def close(self) -> list[dict[str, Any]]:
        if self.said or self.asked:
            self.turns.append({"input": "\n".join(self.asked).strip() or None,
                               "output": "\n".join(self.said).strip() or None, "agent": None,
                               "calls": []})
        return self.turns


def _block(lines: list[str], at: int) -> tuple[list[str], int]:
    """The indented lines from ``at`` on (a result, a prompt's continuation), and where it ends."""
    out: list[str] = []
    while at < len(lines):
        line = lines[at]
        if line and (not line.startswith(" ") or line.startswith((" ╭", " │", " ╰"))):
            break  # back at the margin, or a Gemini CLI tool box
        out.append(line)
        at += 1
    while out and not out[-1].strip():
        out.pop()
        at -= 1
    return out, at


def _claude_result(block: list[str]) -> str | None:
    text = []
    for line in block:
        stripped = line.strip()
        if stripped.startswith("⎿"):
            stripped = stripped[1:].strip()
            text.append(stripped)
        else:
            text.append(line[5:].rstrip() if line.startswith("     ") else stripped)
    while text and not text[0]:
        text.pop(0)
    return "\n".join(text).rstrip() if text else None


def sessions_of(text: str) -> list[tuple[str, list[str]]]:
    """Cut a day's console into sessions at each start-up banner: (agent, lines) each."""
    chunks: list[tuple[str, list[str]]] = []
    agent: str | None = None
    lines: list[str] = []
    for line in text.split("\n"):
        if line.startswith("│ ✻ Welcome to Claude Code") \
                or line.startswith("Tips for getting started"):  # at the margin: a banner
            if lines:
                chunks.append((agent or _agent_of(lines), lines))
            agent = "claude-code" if "Claude" in line else "gemini-cli"
            lines = []
            continue
        lines.append(line)
    if lines:
        chunks.append((agent or _agent_of(lines), lines))
    return chunks


def _agent_of(lines: list[str]) -> str:
    """The agent of text before a day's first banner, by its marks."""
    claude = sum(1 for line in lines if _CLAUDE_TEXT.match(line))
    gemini = sum(1 for line in lines if line.startswith("✦ ") or _GEMINI_CALL.match(line))
    return "claude-code" if claude >= gemini else "gemini-cli"


def parse_session(agent: str, lines: list[str]) -> _Session:
    """The turns of one session's console lines."""
    current = _Session(agent)
    at = 0
    while at < len(lines):
        line = lines[at]
        if line.startswith("> "):
            block, end = _block(lines, at + 1)
            current.prompt("\n".join([line[2:]] + [b.strip() for b in block]))
            at = end
            continue
        if line.startswith("│  > "):  # Gemini CLI 0.1.x draws the prompt in a box
            asked = [_strip_box(line[1:])[3:]]
            at += 1
            while at < len(lines) and lines[at].startswith("│ "):
                asked.append(_strip_box(lines[at][1:]).strip())
                at += 1
            current.prompt("\n".join(asked).strip())
            continue
        match = _CLAUDE_CALL.match(line)
        if match and match.group(1) in _CLAUDE_TOOLS:
            tool = _CLAUDE_TOOLS[match.group(1)]
            head = match.group(2)
            at += 1
            while not re.search(r"\)…?\s*$", head) and at < len(lines) \
                    and lines[at].startswith(" ") and not lines[at].strip().startswith("⎿"):
                head += "\n" + lines[at].strip()
                at += 1
            head = re.sub(r"\)…?\s*$", "", head)
            while at < len(lines) and not lines[at].strip():
                at += 1
            block, end = _block(lines, at)
            result = _claude_result(block) if block and block[0].strip().startswith("⎿") \
                else None
            if result is None:
                end = at
            args = _claude_args(tool, head)
            if any(value.rstrip().endswith("…") for value in args.values()):
                args = {}  # cut at the console's width: not what the model sent
            current.call(tool, args, result, _claude_error(result) if result else None)
            at = end
            continue
        match = _CLAUDE_TEXT.match(line)
        if match:
            block, end = _block(lines, at + 1)
            current.text("\n".join([match.group(1)] + [b.strip() for b in block]))
            at = end
            continue
        if line.startswith("✦ "):
            block, end = _block(lines, at + 1)
            current.text("\n".join([line[2:]] + [b.strip() for b in block]))
            at = end
            continue
        match = _GEMINI_CALL.match(line)
        if match and match.group(2) in _GEMINI_TOOLS:
            status, name, head = match.groups()
            at += 1
            while at < len(lines) and lines[at].startswith(" │ ") \
                    and _strip_box(lines[at]).strip() and not _GEMINI_CALL.match(lines[at]):
                head += " " + _strip_box(lines[at]).strip()  # the status line wrapped
                at += 1
            body: list[str] = []
            while at < len(lines) and lines[at].startswith(" │") \
                    and not _GEMINI_CALL.match(lines[at]):
                body.append(_strip_box(lines[at]))
                at += 1
            while body and not body[0].strip():
                body.pop(0)
            while body and not body[-1].strip():
                body.pop()
            result = "\n".join(b[4:] if b.startswith("    ") else b.strip() for b in body) \
                if body else None
            tool, key = _GEMINI_TOOLS[name]
            if name == "Shell":  # the console adds the model's description: `cmd (Does x.)`
                head = re.sub(r" \([A-Z][^()]*\)$", "", head.strip())
            args: dict[str, Any] = {key: head.strip()}
            if name != "Edit" and head.rstrip().endswith("…"):  # cut at the box's width
                args = {}
            if name == "Edit" and ": " in head:
                path, change = head.split(": ", 1)
                args = {"file_path": path.strip(), "instruction": change.strip()}
            error = None
            if status == "x":
                error = (result or "failed").split("\n", 1)[0][:200]
            elif status == "-":
                error = "cancelled"
            current.call(tool, args, result, error)
            continue
        at += 1
    return current


_LEFT_OUT = frozenset({"claude-dev-log-diary/day-020.md"})
"""Days whose file holds one conversation printed several times over (the console's transcript
view and its redraws after ``/compact``): which calls were made once cannot be told."""
_REPRINT = 5
"""A session that starts with this many calls identical to an earlier session's of the same day
is a resumed conversation (``claude --continue``) whose history the console printed again: the
reprinted calls are dropped."""


def _calls(turns: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(c["tool"], repr(c["args"]), c["result"]) for t in turns for c in t["calls"]]


def _drop_reprint(turns: list[dict[str, Any]],
                  earlier: list[list[tuple[str, str, str | None]]]) -> list[dict[str, Any]]:
    """``turns`` without the calls (and their turns) reprinted from an earlier session."""
    mine = _calls(turns)
    longest = 0
    for other in earlier:
        n = 0
        while n < min(len(mine), len(other)) and mine[n] == other[n]:
            n += 1
        longest = max(longest, n)
    if longest < _REPRINT:
        return turns
    kept: list[dict[str, Any]] = []
    seen = 0
    for turn in turns:
        if seen >= longest:
            kept.append(turn)
        seen += len(turn["calls"])
    return kept


def convert(repo: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", COMMIT,
                            "claude-dev-log-diary/"], capture_output=True, text=True,
                           check=True).stdout.split()
    for path in sorted(n for n in names if re.search(r"/day-\d+\.md$", n)
                       and n not in _LEFT_OUT):
        text = subprocess.run(["git", "-C", str(repo), "show", f"{COMMIT}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        day = re.search(r"day-(\d+)", path).group(1)  # type: ignore[union-attr]
        earlier: list[list[tuple[str, str, str | None]]] = []
        for number, (agent, lines) in enumerate(sessions_of(text), 1):
            session = parse_session(agent, lines)
            whole = session.close()
            turns = _drop_reprint(whole, earlier)
            earlier.append(_calls(whole))
            if not any(turn["calls"] for turn in turns):
                continue
            seen = [found for line in lines for found in _MODEL.findall(line)]
            model = ", ".join(sorted(set(seen), key=seen.index)) if seen else "unknown"
            runs.append({
                "id": f"ide-{SLUG}-day{day}-{number}-{session.agent}",
                "source": SOURCE, "commit": COMMIT, "path": path, "licence": LICENCE,
                "family": "ide", "content": "partial",
                "harness": "Claude Code (console)" if session.agent == "claude-code"
                else "Gemini CLI (console)",
                "model": model, "turns": turns})
    return runs


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    runs = convert(Path(argv[1]))
    write_runs(runs, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
