"""IDE agent sessions exported by SpecStory (``.specstory/history/*.md``) -> runs/ide/specstory.jsonl.gz.

Source: SpecStory markdown exports that users committed to their own public GitHub repositories
(one repository per user; the repositories, their commits and licences are listed in REPOS below and
recorded on every run). SpecStory's VS Code/Cursor extension and its CLI save each chat of an IDE or
CLI agent as one markdown file: Cursor (agent mode; model in the ``_**Agent (model)**_`` header,
``default`` = Cursor's automatic choice), GitHub Copilot agent mode in VS Code (``copilot/<model>``)
and, through the SpecStory CLI, Claude Code and Codex CLI (``<!-- Claude Code Session ... -->``).

Selection (made without reading the sessions): per repository, the session files in name order
(= start time), skipping files with no tool call at all (plain chats are not agent runs), files
where the export kept neither arguments nor result for most calls (e.g. Codex ``exec`` with
``Input (truncated)``), and second copies of one session (SpecStory re-saved old sessions under a
new file-name scheme); the first ``PER_REPO``. One session file = one run, never cut.

Mapping of the export to turns and calls:
- The file is split at the message headers ``_**User ...**_`` / ``_**Agent ...**_`` /
  ``_**Assistant**_``. A user message becomes the ``input`` of the next model turn.
- Inside an agent message, tool uses are either ``<tool-use data-tool-name="NAME">`` blocks
  (SpecStory markdown v2.x) or ``---``-separated segments (older exports): ``Tool use: **NAME**``,
  ``Read file: X`` (read_file), ``## Todo List`` (todo_write), a bare ```bash fence + output fence
  (run_terminal_cmd), a bare ```diff fence (edit_file, target not exported), ``<details><summary>Searched codebase/Grep search/Listed directory/Edit
  file/...`` (codebase_search, grep_search, list_dir, edit_file, ...), ``Ran tool`` (tool name not
  exported: ``unknown``). Tool names are kept exactly as exported (read_file, read_file_v2,
  run_terminal_cmd, run_terminal_command_v2, search_replace, Bash, Read, replace_string_in_file...).
- Model text between tool uses is the ``output`` of a turn; consecutive tool uses with no text in
  between are the calls of one turn (the export does not say whether they were parallel).
- Arguments are recovered from the export's summary line: target_file, command, query, pattern,
  target_directory; edits keep the exported diff as ``diff`` (capped like results); todo lists as
  ``todos``. Nothing the export does not show is invented; an unrecoverable argument set is ``{}``.
- Results: terminal output fences and the search/grep/listing tables the export shows are kept;
  file reads and edits are not captured by SpecStory: ``result`` null. Errors: ``Cancelled`` after a
  tool use (the user cancelled it) and ``exit code N`` lines the export shows. A block saved
  while its tool was still running (Cursor's ``Status: **loading**``) keeps only the arguments it
  shows before that line (often none: ``{}``); its result is not captured.
- Export artefact: SpecStory v2.1 writes many Cursor tool uses twice, a full block followed at once
  by an empty compact twin (``<tool-use ...><details><summary>Tool use: **X**</summary></details>``);
  the empty twin right after a full block of the same tool is dropped (it is not a second call).
- ``model``: the model names of the agent headers, most frequent first, joined with ", "
  (``unknown`` for older exports without a model; ``default`` is Cursor's automatic choice).
- Licence: repositories with MIT/Apache/BSD/CC-BY licences keep result text (``partial`` when some
  results are null, ``full`` otherwise); repositories without a licence get results hashed
  (``hashed``; results not captured stay null), arguments kept.

Usage: python ide_specstory.py [--slug NAME] MIRROR_DIR [MIRROR_DIR...]  (bare git dirs from the
fetch tool, named ``owner+name/repo``); writes tests/corpus/runs/ide/specstory.jsonl.gz, or
NAME.jsonl.gz beside it. Standard library only.

``specstory2``: the same selection on the repositories found later (a search for
``.specstory/.what-is-this.md``), those whose ``HEAD`` holds sessions with tool calls and are not
held out (``HELD_OUT``): ahostwin/shellbale and tr3stanley/autogenerate-site-test-1. The others found (minsky, politipo, uubed-py,
process-xbrl, odyash-dev.to, seraphine-hybrid-v1, glpi_dashboard_cau, valorant, nextra-codemods,
shadcn-ui-sidebar-08-admin-dev, tins and two work repositories) hold none; octopulse could not
be read.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

PER_REPO = 8
LOADING = re.compile(r"^Status: \*\*loading\*\*\s*$", re.M)
"""Cursor's status line of a tool still running when SpecStory saved the chat (v2.1 blocks)."""
OUT = Path(__file__).resolve().parents[1] / "runs" / "ide" / "specstory.jsonl.gz"

HEADER = re.compile(r"^_\*\*(User|Agent|Assistant)(?: \(([^)]*)\))?\*\*_\s*$", re.M)
OLD_SEP = re.compile(r"^_\*\*\*\*_\s*$", re.M)
TOOL_BLOCK = re.compile(
    r"<tool-use data-tool-type=\"([^\"]*)\" data-tool-name=\"([^\"]*)\">(.*?)</tool-use>", re.S
)
SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1\s*$", re.S | re.M)
SESSION = re.compile(
    r"<!-- (Claude Code|Codex CLI|Cursor IDE|Cursor CLI|Gemini CLI|[A-Za-z ]+?) Session "
)
LICENCES = [
    ("MIT License", "MIT"),
    ("Apache License", "Apache-2.0"),
    ("BSD 3-Clause", "BSD-3-Clause"),
    ("Redistribution and use in source and binary forms", "BSD"),
    ("Attribution 4.0", "CC-BY-4.0"),
    ("CC0 1.0 Universal", "CC0-1.0"),
    ("Permission is hereby granted, free of charge", "MIT"),
]
OPEN = {"MIT", "Apache-2.0", "BSD-3-Clause", "BSD", "CC-BY-4.0", "CC0-1.0"}

OLD_SUMMARIES = [
    ("Searched codebase", "codebase_search"),
    ("Grep search for", "grep_search"),
    ("Grep for", "grep"),
    ("Listed directory", "list_dir"),
    ("Listed current directory", "list_dir"),
    ("Searched files", "file_search"),
    ("Searched web", "web_search"),
    ("Edit file:", "edit_file"),
    ("Deleted file", "delete_file"),
    ("MCP tool call", "mcp_tool_call"),
    ("Called MCP tool", "mcp_tool_call"),
]


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True
    ).stdout


def cap(text: str) -> str:
    if len(text) > 4000:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"
    return text


def hashed(text: str | None) -> str | None:
    if text is None:
        return None
    return "" if text == "" else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def unhtml(text: str) -> str:
    return (
        text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    )


def detail_args(detail: str) -> dict:
    """Arguments from the summary line's detail (after 'Tool use: **X** • ')."""
    detail = unhtml(detail.strip())
    for prefix, key in (
        ("Read file:", "target_file"),
        ("Run command:", "command"),
        ("Edit file:", "target_file"),
        ("Listed directory", "target_directory"),
        ("Listed current directory", "target_directory"),
        ("Deleted file", "target_file"),
        ("Delete file:", "target_file"),
    ):
        if detail.startswith(prefix):
            value = detail[len(prefix) :].split(" • ")[0].strip()
            return {key: value}
    m = re.match(
        r"(?:Searched codebase|Searched web|Searched files|Search)\s+\"(.*?)\"(?: • |$)",
        detail,
        re.S,
    )
    if m:
        key = "search_term" if detail.startswith("Searched web") else "query"
        return {key: m.group(1)}
    m = re.match(r"Grep(?: search)? for \"(.*?)\"(?: in \"(.*?)\")?", detail, re.S)
    if m:
        out = {"pattern": m.group(1)}
        if m.group(2):
            out["path"] = m.group(2)
        return out
    return {"detail": detail} if detail else {}


def parse_call(tool: str, kind: str, summary: str, body: str) -> dict:
    """One call from a tool name, its summary detail and the block body."""
    loading = LOADING.search(body)
    if loading:  # exported before the tool finished: what the block shows up to the status only
        call = parse_call(tool, kind, summary, body[: loading.start()])
        return {**call, "result": None, "error": None}
    detail = ""
    m = re.match(r"\s*Tool use: \*\*[^*]*\*\*(?:\s*•?\s*(.*))?$", summary.strip(), re.S)
    if m:
        detail = (m.group(1) or "").strip()
    elif summary.strip():
        detail = summary.strip()
    if "*Called tool*:" in body:
        return mcp_call(body)
    if body.strip().startswith("Input (truncated)"):
        return {"tool": tool, "args": {}, "result": None, "error": None}  # nothing exported
    args = detail_args(detail) if detail else {}
    m = re.fullmatch(r"`(.+)`", unhtml(detail), re.S)
    if m:  # Codex CLI: 'Tool use: **exec_command** `cmd`'
        args = {("command" if kind == "shell" else "input"): m.group(1)}
    body = body.strip()
    structured = structured_sections(body)
    if structured is not None:
        sargs, sresult = structured
        args.update(sargs)
        if lowered_is_read_or_write(tool, kind):
            sresult = sresult if sresult else None
        return {"tool": tool, "args": args, "result": sresult, "error": exit_error(sresult)}
    fences = list(FENCE.finditer(body))
    result = None
    error = None
    lowered = tool.lower()
    if (
        fences
        and fences[-1].group(2).strip() == "text"
        and fences[-1].end() >= len(body.rstrip()) - 1
    ):
        # SpecStory CLI style (Claude Code, Codex CLI): description, `input`, then ```text result```.
        pre = body[: fences[-1].start()]
        result = fences[-1].group(3)
        inline = re.search(r"^\s*`([^`\n]+)`\s*$", pre, re.M)
        if inline:
            key = "command" if kind == "shell" else "target_file" if kind == "read" else "input"
            args.setdefault(key, unhtml(inline.group(1)))
        desc = [
            ln.strip() for ln in pre.splitlines() if ln.strip() and not ln.strip().startswith("`")
        ]
        if desc:
            args.setdefault("description", unhtml(desc[0]))
        other = [f for f in fences[:-1]]
        if other and kind == "write":
            args["diff"] = cap("\n".join(f.group(3) for f in other))
        return {"tool": tool, "args": args, "result": result, "error": cli_error(result)}
    if kind == "shell" or lowered in (
        "run_terminal_cmd",
        "bash",
        "run_in_terminal",
        "shell",
        "run_terminal_command_v2",
    ):
        rest = body
        if fences and fences[0].group(2).strip() in (
            "bash",
            "shell",
            "sh",
            "powershell",
            "zsh",
            "cmd",
        ):
            args.setdefault("command", fences[0].group(3).strip())
            outs = fences[1:]
        else:
            inline = re.search(r"^\s*`([^`\n]+)`\s*$", body, re.M)
            if inline and "command" not in args:
                args["command"] = unhtml(inline.group(1))
            outs = fences
        if outs:
            result = "\n\n".join(f.group(3) for f in outs)
        elif rest and "command" not in args:
            result = rest
        args.pop("detail", None) if "command" in args and args.get("detail") == args.get(
            "command"
        ) else None
    elif kind == "write" or lowered in (
        "edit_file",
        "search_replace",
        "write",
        "edit",
        "multiedit",
        "apply_patch",
        "replace_string_in_file",
        "create_file",
        "edit_file_v2",
        "code_edit",
    ):
        if body:
            args["diff"] = cap(body)
    elif lowered in ("todo_write", "todowrite", "manage_todo_list"):
        if body:
            args["todos"] = body
    elif kind == "read" or lowered.startswith("read"):
        if not args:
            inline = re.search(r"^\s*`([^`\n]+)`\s*$", body, re.M)
            if inline:
                args["target_file"] = unhtml(inline.group(1))
        if fences:
            result = "\n\n".join(f.group(3) for f in fences)
    else:
        d = re.search(r"^Directory: \*\*(.*?)\*\*", body, re.M)
        if d and "target_directory" not in args:
            args["target_directory"] = d.group(1).strip("`")
        if not args:
            inline = re.search(r"^\s*`([^`\n]+)`\s*$", body, re.M)
            if inline:
                args["input"] = unhtml(inline.group(1))
        if body:
            result = body
    if result is not None:
        error = exit_error(result)
    return {"tool": tool, "args": args, "result": result, "error": error}


INPUT_ITEM = re.compile(r"^- (\w+): `(.*)`\s*$")


def structured_sections(body: str):
    """(args, result) of a block written as '**Input:** - key: `v`' (Copilot) or
    'Parameters: ```json```' + 'Result:'/'Additional data:' (Cursor v2.1); None otherwise."""
    if body.startswith("**Input:**"):
        args: dict = {}
        rest = body[len("**Input:**") :]
        out = None
        cut = re.search(r"^\*\*(Output|Result)s?:\*\*", rest, re.M)
        if cut:
            out = rest[cut.end() :].strip() or None
            rest = rest[: cut.start()]
        lines = rest.strip().splitlines()
        i = 0
        while i < len(lines):
            m = INPUT_ITEM.match(lines[i])
            if m:
                args[m.group(1)] = unhtml(m.group(2))
            else:
                k = re.match(r"^- (\w+):\s*$", lines[i])
                if k:
                    block = "\n".join(lines[i + 1 :])
                    f = FENCE.search(block)
                    nxt = re.search(r"^- \w+:", block, re.M)
                    if f and (not nxt or f.start() < nxt.start()):
                        args[k.group(1)] = cap(f.group(3))
                        i += 1 + block[: f.end()].count("\n")
                        continue
            i += 1
        return args, out
    if body.startswith("Parameters:"):
        fences = list(FENCE.finditer(body))
        args = {}
        if fences:
            try:
                loaded = json.loads(fences[0].group(3))
                args = loaded if isinstance(loaded, dict) else {"parameters": loaded}
            except ValueError:
                args = {"parameters": fences[0].group(3)}
        tail = body[fences[0].end() :] if fences else ""
        out = re.sub(r"^\s*(Result|Additional data|Output):\s*", "", tail.strip()).strip()
        return args, (out or None)
    return None


def mcp_call(body: str) -> dict:
    """Cursor's older MCP export: '*Called tool*: server - name: description', '*Parameters*:
    * key: value' lines, '*Result*:' text. Tool named mcp_<server>_<name>."""
    m = re.search(r"\*Called tool\*:\s*([^\n]*?) - ([A-Za-z0-9_.-]+)", body)
    tool = f"mcp_{m.group(1).strip()}_{m.group(2)}" if m else "mcp_tool_call"
    args: dict = {}
    pm = re.search(r"\*Parameters\*:\s*\n(.*?)(?:\n\s*\*Result\*:|$)", body, re.S)
    if pm:
        for line in pm.group(1).splitlines():
            km = re.match(r"\s*\* ([^:]+): ?(.*)$", line)
            if km:
                args[km.group(1).strip()] = km.group(2)
    rm = re.search(r"\*Result\*:\s*\n?(.*)$", body, re.S)
    result = rm.group(1).strip() if rm else None
    return {"tool": tool, "args": args, "result": result, "error": None}


def cli_error(result: str):
    first = result.strip().splitlines()[0] if result.strip() else ""
    if first.startswith("The user doesn't want to proceed"):
        return "rejected by the user"
    if "<tool_use_error>" in result:
        return first[:200]
    m = re.match(r"(?:Exit code|exit code:?) (\d+)", first)
    if m and m.group(1) != "0":
        return f"exit code {m.group(1)}"
    return None


def lowered_is_read_or_write(tool: str, kind: str) -> bool:
    return kind in ("read", "write")


def exit_error(result):
    if result is None:
        return None
    m = re.search(r"^Process exited with code (\d+)", result, re.M)
    if m:
        return f"exit code {m.group(1)}" if m.group(1) != "0" else None
    m = re.search(r"exit code:? (\d+)", result, re.I)
    return f"exit code {m.group(1)}" if m and m.group(1) != "0" else None


def old_segment(seg: str) -> dict | None:
    """A '---' segment of an older export that is a tool use, as a call; None for model text."""
    s = seg.strip()
    m = re.match(r"Tool use: \*\*([^*]+)\*\*\s*(.*)$", s, re.S)
    if m:
        tool, rest = m.group(1), m.group(2).strip()
        sm = SUMMARY.search(rest)
        if rest.startswith("Read file:"):
            return parse_call(tool, "read", rest.splitlines()[0], "")
        if rest.startswith("## Todo List"):
            return parse_call(tool, "", "", rest[len("## Todo List") :])
        if sm and rest.lstrip().startswith("<details"):
            body = rest[sm.end() :]
            body = re.sub(r"</details>\s*$", "", body.strip())
            kind = "write" if sm.group(1).strip().startswith("Edit file") else ""
            return parse_call(tool, kind, sm.group(1), body)
        fences = list(FENCE.finditer(rest))
        if fences and fences[0].group(2).strip() in (
            "bash",
            "shell",
            "sh",
            "powershell",
            "zsh",
            "cmd",
        ):
            return parse_call(tool, "shell", "", rest)
        return parse_call(tool, "", "", rest)
    if s.startswith("Read file:") and "\n" not in s:
        return parse_call("read_file", "read", s, "")
    if s.startswith("## Todo List"):
        return parse_call("todo_write", "", "", s[len("## Todo List") :])
    if s == "Ran tool":
        return {"tool": "unknown", "args": {}, "result": None, "error": None}
    if s.startswith("<details"):
        sm = SUMMARY.search(s)
        if sm:
            text = sm.group(1).strip()
            for prefix, tool in OLD_SUMMARIES:
                if text.startswith(prefix):
                    body = re.sub(r"</details>\s*$", "", s[sm.end() :].strip())
                    return parse_call(tool, "write" if tool == "edit_file" else "", text, body)
    fences = list(FENCE.finditer(s))
    if (
        fences
        and fences[0].start() == 0
        and all(f.group(2).strip() == "diff" for f in fences)
        and not FENCE.sub("", s).strip()
    ):
        diff = "\n".join(f.group(3) for f in fences)
        return {"tool": "edit_file", "args": {"diff": cap(diff)}, "result": None, "error": None}
    if (
        fences
        and fences[0].start() == 0
        and fences[0].group(2).strip() in ("bash", "shell", "sh", "powershell", "zsh", "cmd")
    ):
        leftover = FENCE.sub("", s).strip()
        if not leftover and len(fences) <= 2:
            return parse_call("run_terminal_cmd", "shell", "", s)
    return None


def agent_events(text: str) -> list[tuple[str, object]]:
    """('text', str) and ('call', dict) events of one agent message, in order."""
    events: list[tuple[str, object]] = []
    pos = 0
    last_full_tool = None
    for m in TOOL_BLOCK.finditer(text):
        between = text[pos : m.start()]
        events.extend(old_events(between))
        if between.strip():
            last_full_tool = None
        pos = m.end()
        kind, tool, inner = m.group(1), m.group(2), m.group(3)
        compact = inner.startswith("<details>")
        sm = SUMMARY.search(inner)
        summary = sm.group(1) if sm else ""
        body = inner[sm.end() :] if sm else inner
        body = re.sub(r"</details>\s*$", "", body.strip()).strip()
        empty = not body and "•" not in summary
        if compact and empty and last_full_tool == tool:
            last_full_tool = None  # the empty twin of the block just before
            continue
        events.append(("call", parse_call(tool, kind, summary, body)))
        last_full_tool = None if compact else tool
    events.extend(old_events(text[pos:]))
    return events


def old_events(text: str) -> list[tuple[str, object]]:
    events: list[tuple[str, object]] = []
    for seg in re.split(r"^---\s*$", text, flags=re.M):
        if not seg.strip():
            continue
        call = old_segment(seg)
        if call is not None:
            events.append(("call", call))
        elif seg.strip() == "Cancelled" and events and events[-1][0] == "call":
            events[-1][1]["error"] = "Cancelled"
        elif seg.strip() == "Cancelled":
            events.append(("cancel", None))
        else:
            events.append(("text", seg.strip()))
    return events


def parse_session(md: str) -> tuple[list[dict], Counter, str | None]:
    md = OLD_SEP.sub("", md)
    heads = list(HEADER.finditer(md))
    turns: list[dict] = []
    models: Counter = Counter()
    pending_input: list[str] = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(md)
        body = md[h.end() : end]
        body = re.sub(r"^\s*---\s*$", "", body, flags=re.M) if h.group(1) == "User" else body
        if h.group(1) == "User":
            text = body.strip()
            if text:
                pending_input.append(text)
            continue
        if h.group(2):
            model = re.sub(r"\s+\d{4}-\d\d-\d\d.*$", "", h.group(2)).strip()
            model = re.sub(r"^model ", "", model)
            model = re.sub(r", mode .*$", "", model)
            if model and model != "<synthetic>":
                models[model] += 1
        current = None
        for kind, value in agent_events(body):
            if kind == "cancel":
                continue
            if kind == "text":
                current = {"agent": None, "input": None, "output": value, "calls": []}
                turns.append(current)
            else:
                if current is None:
                    current = {"agent": None, "input": None, "output": None, "calls": []}
                    turns.append(current)
                current["calls"].append(value)
            if pending_input:
                current["input"] = "\n\n".join(pending_input)
                pending_input = []
        current = None  # a new header starts a new model response
    m = SESSION.search(md)
    return turns, models, (m.group(1) if m else None)


def licence_of(repo: Path) -> str:
    names = git(repo, "ls-tree", "--name-only", "HEAD").decode().split("\n")
    for name in names:
        if re.match(r"(?i)^(licen[cs]e|copying)(\.(md|txt))?$", name):
            text = git(repo, "show", f"HEAD:{name}").decode("utf-8", "replace")
            for needle, spdx in LICENCES:
                if needle in text:
                    return spdx
            return "other: " + text.strip().splitlines()[0][:60]
    return "none"


def harness_of(session: str | None, models: Counter, tools: set[str]) -> str:
    if session:
        low = session.lower()
        if low.startswith("cursor"):
            return "Cursor"
        if low.startswith("vs") or "copilot" in low:
            return "GitHub Copilot (VS Code)"
        return session
    if any(m.startswith("copilot/") for m in models):
        return "GitHub Copilot (VS Code)"
    if tools & {
        "replace_string_in_file",
        "run_in_terminal",
        "manage_todo_list",
        "create_file",
        "insert_edit_into_file",
    }:
        return "GitHub Copilot (VS Code)"
    return "Cursor"


HELD_OUT = frozenset({
    "edobry/minsky", "DEBAGanov/magicvetov12", "DEBAGanov/PizzaNatWeb",
    "maloneype/yposfgold-community-platform", "DanCard/cal-date-widget", "hpm27/agente-bsc-rag",
    "Ai-Whisperers/Relocation-Business", "Borewit/listFix", "ArjunDivecha/qscreen-strategy-screener",
    "ChrisGVE/MunsellSpace", "Darrenthinker/forwarder-system"})
"""Repositories whose sessions are held out (the project is judged on them): never converted."""


def convert_repo(repo: Path) -> list[dict]:
    owner_name = repo.parent.name.replace("+", "/", 1)
    if owner_name.lower() in {name.lower() for name in HELD_OUT}:
        print(f"{owner_name}: held out, not converted", file=sys.stderr)
        return []
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    licence = licence_of(repo)
    files = sorted(
        p
        for p in git(repo, "ls-tree", "-r", "--name-only", "HEAD").decode().split("\n")
        if p.startswith(".specstory/history/") and p.endswith(".md")
    )
    runs = []
    seen: set[str] = set()
    stems: set[tuple[str, bool]] = set()
    for path in files:
        # SpecStory renamed its files (HH-MMZ -> HH-MM-SSZ) and re-saved old sessions under the
        # new name: one session, two files; keep the first in name order (the newer save).
        m = re.match(r"(\d{4}-\d\d-\d\d_\d\d-\d\d)(-\d\d)?Z?-?(.*)\.md$", Path(path).name)
        if m:  # same start minute under the other naming scheme = the same session
            other = (m.group(1), m.group(2) is None)
            if other in stems:
                continue
            stems.add((m.group(1), m.group(2) is not None))
        md = git(repo, "show", f"HEAD:{path}").decode("utf-8", "replace")
        turns, models, session = parse_session(md)
        calls = [c for t in turns for c in t["calls"]]
        if not calls:
            continue
        blind = sum(1 for c in calls if not c["args"] and c["result"] is None)
        if blind * 2 > len(calls):
            continue  # the export kept neither arguments nor results of most calls
        signature = json.dumps([[c["tool"], c["args"]] for c in calls], sort_keys=True)
        if signature in seen:
            continue  # the same session saved twice under two file names
        seen.add(signature)
        tools = {c["tool"] for c in calls}
        model = ", ".join(m for m, _ in models.most_common()) or "unknown"
        if licence in OPEN:
            content = "partial" if any(c["result"] is None for c in calls) else "full"
            for c in calls:
                c["result"] = None if c["result"] is None else cap(c["result"])
        else:
            content = "hashed"
            for c in calls:
                c["result"] = hashed(c["result"])
        stem = Path(path).stem[:48]
        slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{owner_name}-{stem}").strip("-").lower()
        runs.append(
            {
                "id": f"ide-specstory-{slug}",
                "family": "ide",
                "source": owner_name,
                "path": path,
                "commit": commit,
                "licence": licence,
                "harness": harness_of(session, models, tools),
                "model": model,
                "content": content,
                "turns": turns,
            }
        )
        if len(runs) == PER_REPO:
            break
    return runs


def main(argv: list[str]) -> int:
    out = OUT
    if argv[:1] == ["--slug"]:  # another set of repositories, in a file of its own
        out, argv = OUT.with_name(f"{argv[1]}.jsonl.gz"), argv[2:]
    runs = []
    for arg in argv:
        runs.extend(convert_repo(Path(arg)))
    runs.sort(key=lambda r: r["id"])
    ids = [r["id"] for r in runs]
    assert len(ids) == len(set(ids)), "duplicate ids"
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        for run in runs:
            gz.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode())
    out.write_bytes(buf.getvalue())
    print(f"{len(runs)} runs -> {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
