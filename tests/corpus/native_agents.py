"""The IDE and CLI sessions of the development corpus, as each coding agent's own log events.

Every run of the ``ide`` family (Cursor, GitHub Copilot, Claude Code and Codex CLI sessions,
``runs/ide/``) is re-expressed as the log events Claude Code, Codex CLI and Gemini CLI send over
the OTel logs signal, at each level of opt-in, and written as the Collector's ``file`` exporter
writes logs (one OTLP/JSON ``ExportLogsServiceRequest`` a line). ``native_figures()`` runs each
file through ``otel-loopguard check``'s reader and engine and compares each session with its
run's label, as ``figures.py`` does for the spans.

How a run becomes one agent's events (shapes: ``tests/_agent_sessions.py``, whose sources are
the agents' documentation and code, ``docs/coding-agents.md``):

- one session per run: Claude Code and Gemini CLI ``session.id``, Codex ``conversation.id``, a
  UUID derived from the run id;
- per model turn a model-request event (Claude Code ``claude_code.api_request``, Codex
  ``codex.sse_event`` ``response.completed``, Gemini CLI ``gemini_cli.api_response``) naming
  the run's model; no token counts (the sources have none); a turn with new user input is
  preceded by the agent's prompt event (a new ``prompt.id`` / ``prompt_id``);
- per tool call the agent's tool event (``claude_code.tool_result``, ``codex.tool_result``,
  ``gemini_cli.tool_call``), in the run's order, one second apart;
- the tool is named as the agent names its own tool for the same job where the agent has one
  (Cursor ``read_file_v2`` is Claude Code ``Read``, Gemini CLI ``read_file``; Codex reads,
  searches and lists through its ``shell`` tool, as it does, with ``sed -n``, ``cat``, ``rg``
  and ``ls``, and edits through ``apply_patch``); other tools keep their name (an MCP tool is
  named as each agent names MCP tools: Claude Code sends the literal ``mcp_tool`` with the
  server and tool in ``tool_parameters``);
- the arguments are mapped to the agent's argument names, and sent only where the level of
  opt-in sends them: Claude Code ``tool_input`` (values cut at 512 characters, the whole at
  about 4K) and ``tool_parameters`` with ``OTEL_LOG_TOOL_DETAILS=1``; Codex ``arguments``
  always; Gemini CLI ``function_args`` with ``logPrompts`` on. Where the source kept only the
  file of an edit (IDE exports often drop the edit), the call carries only that file, as the
  span replay does: content is never invented; where a run's reads never name a range (an
  export that drops ``offset`` and ``limit``), Codex's read of such a call, whose command
  would name the part it reads, is sent with its arguments lost (``{}``), not as a ``cat`` of
  the whole file that the agent did not run;
- a call the source says its user turned down (``User rejected ...``, ``cancelled``) carries
  the agent's decision: Claude Code logs a ``tool_decision`` ``reject`` in place of its
  ``tool_result`` (none is logged for a rejected call; the arguments only in
  ``tool_parameters``), Gemini CLI ``decision`` ``reject`` (Codex records decisions in events
  not read here);
- the result only where the agent sends it (Codex ``output``: the source's result, or the
  failure's words when the source has no result); a failure is ``success`` false with the
  source's words (Claude Code: ``error_type`` always, the message ``error`` only with
  details).

Nothing here imports ``otel_loopguard``: these files are inputs of the code under test (the
figures come from ``figures.py``'s replay of them).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shlex
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the corpus package lives in tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus import replay

FAMILY = "ide"
_STEP_NS = 1_000_000_000
_START_NS = 1_760_000_000 * _STEP_NS
_TOOL_MS = "120"
_CLAUDE_VALUE_CHARS = 512
_CLAUDE_INPUT_CHARS = 4_096
_PER_LINE = 500
"""Log records per request line (the Collector's file exporter writes one batch a line)."""


@dataclass(frozen=True, slots=True)
class Level:
    """One agent at one level of opt-in."""

    agent: str
    setting: str
    """The setting, as the user writes it."""
    arguments: bool
    """Whether the tool events carry the call's arguments at this level."""

    @property
    def key(self) -> str:
        """The level's name in figures and test bounds."""
        return f"{self.agent} | {self.setting}"


LEVELS = (
    Level("claude-code", "telemetry on (default)", arguments=False),
    Level("claude-code", "OTEL_LOG_TOOL_DETAILS=1", arguments=True),
    Level("codex", "[otel] exporter (default)", arguments=True),
    Level("gemini-cli", "logPrompts: false", arguments=False),
    Level("gemini-cli", "logPrompts: true (default)", arguments=True),
)
"""Every agent at every level of opt-in that changes what its tool events carry."""


# --- tools: what each call does, and how each agent names it ----------------------------------
_ROLES = {
    "shell": "bash, run_terminal_cmd, run_terminal_command, run_in_terminal, exec_command, shell, "
             "run_shell_command, shell_command",
    "read": "read, read_file",
    "edit": "edit, edit_file, search_replace, replace_string_in_file, multiedit, apply_patch, "
            "replace",
    "write": "write, create_file, write_file",
    "grep": "grep, grep_search, ripgrep_raw_search, search_file_content",
    "glob": "glob, glob_file_search, file_search",
    "list": "ls, list_dir, list_directory",
    "todo": "todowrite, todo_write, manage_todo_list, write_todos, update_plan",
    "web_search": "websearch, web_search, google_web_search",
    "web_fetch": "webfetch, web_fetch, fetch_webpage",
    "task": "task, agent",
    "ask": "askuserquestion, ask_question, request_user_input",
}
ROLE_OF = {name.strip(): role for role, names in _ROLES.items() for name in names.split(",")}
"""Base tool name (lower case, version suffix dropped) -> what the call does."""

NATIVE_TOOLS = {
    "claude-code": {"shell": "Bash", "read": "Read", "edit": "Edit", "write": "Write",
                    "grep": "Grep", "glob": "Glob", "list": "Bash", "todo": "TodoWrite",
                    "web_search": "WebSearch", "web_fetch": "WebFetch", "task": "Task",
                    "ask": "AskUserQuestion"},
    "codex": {"shell": "shell", "read": "shell", "edit": "apply_patch", "write": "apply_patch",
              "grep": "shell", "glob": "shell", "list": "shell", "todo": "update_plan",
              "web_search": "web_search", "ask": "request_user_input"},
    "gemini-cli": {"shell": "run_shell_command", "read": "read_file", "edit": "replace",
                   "write": "write_file", "grep": "search_file_content", "glob": "glob",
                   "list": "list_directory", "todo": "write_todos",
                   "web_search": "google_web_search", "web_fetch": "web_fetch"},
}
"""Each agent's own tool for each job (documented tool lists; Codex works through its shell)."""


_SAME_ARGUMENTS = frozenset({"todo", "web_search", "task", "ask"})
"""Jobs whose arguments are kept as the source has them (no agent-specific shape to map)."""


def base_name(tool: str) -> str:
    """Return a tool's name in lower case without a version suffix (``read_file_v2``)."""
    name = tool.lower()
    head, _, tail = name.rpartition("_v")
    return head if head and tail.isdigit() else name


def mcp_parts(tool: str) -> tuple[str, str] | None:
    """Return (server, tool) of an MCP tool as Claude Code or Cursor names it, else None."""
    if tool.startswith("mcp__") and tool.count("__") >= 2:
        server, name = tool[5:].split("__", 1)
        return server, name
    if tool.startswith("mcp-") and tool.count("-") >= 2:
        server, _, name = tool[4:].rpartition("-")
        return server, name
    if tool.startswith("mcp_") and tool.count("_") >= 2:
        server, name = tool[4:].split("_", 1)
        return server, name
    return None


def _pick(args: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = args.get(key)
        if value not in (None, ""):
            return value
    return None


def _clean(mapping: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if value is not None}


_PATH_KEYS = ("file_path", "target_file", "filePath", "path", "absolute_path", "relative_path",
              "file")
_DIR_KEYS = ("path", "target_directory", "targetDirectory", "relative_path", "directory",
             "dir_path")


@dataclass(slots=True)
class _Call:
    """What a call does, read from the source's arguments whatever the harness named them."""

    role: str
    args: dict[str, Any]
    ranges_kept: bool = True
    """Whether the source keeps a read's range (one of its run's reads names one)."""

    def path(self) -> Any:
        return _pick(self.args, *_PATH_KEYS)

    def command(self) -> Any:
        found = _pick(self.args, "command", "cmd")
        if isinstance(found, list):
            return shlex.join(str(word) for word in found)
        return found

    def edit(self) -> tuple[Any, Any, Any]:
        """(old text, new text, a diff or patch), each None when the source has none."""
        return (_pick(self.args, "old_string", "oldString", "old_str"),
                _pick(self.args, "new_string", "newString", "new_str"),
                _pick(self.args, "diff", "code_edit", "patch", "input", "instructions"))

    def content(self) -> Any:
        return _pick(self.args, "content", "contents", "file_text", "code", "diff")

    def pattern(self) -> Any:
        """The search term; ``""`` when the source has the key empty (the export dropped it)."""
        keys = ("pattern", "query", "regex", "glob_pattern", "searchTerm", "search_term")
        found = _pick(self.args, *keys)
        return "" if found is None and any(self.args.get(k) == "" for k in keys) else found

    def directory(self) -> Any:
        return _pick(self.args, *_DIR_KEYS)

    def lines(self) -> tuple[Any, Any]:
        return (_pick(self.args, "offset", "start_line", "startLine", "start_line_one_indexed"),
                _pick(self.args, "limit", "end_line", "endLine",
                      "end_line_one_indexed_inclusive"))


# --- each agent's arguments ------------------------------------------------------------------
def _claude_args(call: _Call) -> dict[str, Any]:
    a = call.args
    old, new, diff = call.edit()
    offset, limit = call.lines()
    shapes: dict[str, Callable[[], dict[str, Any]]] = {
        "shell": lambda: {"command": call.command(), "description": a.get("description"),
                          "timeout": a.get("timeout")},
        "read": lambda: {"file_path": call.path(), "offset": offset, "limit": limit},
        "edit": lambda: {"file_path": call.path(), "old_string": old, "new_string": new,
                         "diff": diff if old is None and new is None else None},
        "write": lambda: {"file_path": call.path(), "content": call.content()},
        "grep": lambda: {"pattern": call.pattern(), "path": call.directory(),
                         "glob": _pick(a, "glob", "includePattern", "include"),
                         "-i": _pick(a, "caseInsensitive", "-i"),
                         "output_mode": _pick(a, "output_mode", "outputMode")},
        "glob": lambda: {"pattern": call.pattern(), "path": call.directory()},
        "list": lambda: {"command": _ls(call.directory())},
        "web_fetch": lambda: {"url": _pick(a, "url", "target_file"), "prompt": a.get("prompt")},
    }
    return _clean(shapes[call.role]()) if call.role in shapes else a


def _gemini_args(call: _Call) -> dict[str, Any]:
    a = call.args
    old, new, diff = call.edit()
    offset, limit = call.lines()
    shapes: dict[str, Callable[[], dict[str, Any]]] = {
        "shell": lambda: {"command": call.command(), "description": a.get("description")},
        "read": lambda: {"absolute_path": call.path(), "offset": offset, "limit": limit},
        "edit": lambda: {"file_path": call.path(), "old_string": old, "new_string": new,
                         "instruction": diff if old is None and new is None else None},
        "write": lambda: {"file_path": call.path(), "content": call.content()},
        "grep": lambda: {"pattern": call.pattern(), "path": call.directory(),
                         "include": _pick(a, "glob", "includePattern", "include")},
        "glob": lambda: {"pattern": call.pattern(), "path": call.directory()},
        "list": lambda: {"path": call.directory()},
        "web_fetch": lambda: {"prompt": " ".join(str(v) for v in (
            _pick(a, "prompt"), _pick(a, "url", "target_file")) if v) or None},
    }
    return _clean(shapes[call.role]()) if call.role in shapes else a


def _codex_args(call: _Call) -> dict[str, Any]:
    """Codex's arguments: an argv list for its shell, a patch for ``apply_patch``."""
    a = call.args
    if call.role in ("grep", "glob") and call.pattern() == "":
        # the export dropped the search term: no command can say so; send what is known
        return _clean({"pattern": "", "path": call.directory()})
    if call.role == "read" and not call.ranges_kept and call.lines() == (None, None):
        return {}  # the part it read is lost: no command can say which
    if call.role in ("shell", "read", "grep", "glob", "list"):
        command = _codex_command(call)
        if command is None:  # the source dropped what the command needs
            return _clean({"file_path": call.path()}) if call.path() else {}
        return {"command": ["bash", "-lc", command], "workdir": "/repo"}
    if call.role in ("edit", "write"):
        patch = _codex_patch(call)
        return {"input": patch} if patch else _clean({"file_path": call.path()})
    return a


def _codex_command(call: _Call) -> str | None:
    if call.role == "shell":
        command = call.command()
        return None if command is None else str(command)
    if call.role == "read":
        path, (offset, limit) = call.path(), call.lines()
        if path is None:
            return None
        if offset is None and limit is None:
            return f"cat {shlex.quote(str(path))}"
        first = int(offset or 1) if str(offset or 1).isdigit() else 1
        last = first + int(limit) - 1 if str(limit or "").isdigit() else "$"
        return f"sed -n '{first},{last}p' {shlex.quote(str(path))}"
    if call.role == "grep":
        pattern = call.pattern()
        if pattern is None:
            return None
        words = ["rg", "-n"]
        if _pick(call.args, "caseInsensitive", "-i") is True:
            words.append("-i")
        include = _pick(call.args, "glob", "includePattern", "include")
        if include:
            words += ["--glob", str(include)]
        words += ["-e", str(pattern)]
        if call.directory():
            words.append(str(call.directory()))
        return shlex.join(words)
    if call.role == "glob":
        pattern, where = call.pattern(), call.directory()
        if pattern is None and where is None:
            return None
        words = ["rg", "--files"] + (["-g", str(pattern)] if pattern else [])
        return shlex.join(words + ([str(where)] if where else []))
    return _ls(call.directory())


def _ls(directory: Any) -> str | None:
    return None if directory is None else f"ls -la {shlex.quote(str(directory))}"


def _codex_patch(call: _Call) -> str | None:
    path = call.path()
    if path is None:
        return None
    if call.role == "write":
        content = call.content()
        if content is None:
            return None
        body = "\n".join("+" + line for line in str(content).split("\n"))
        return f"*** Begin Patch\n*** Add File: {path}\n{body}\n*** End Patch"
    old, new, diff = call.edit()
    if old is None and new is None and diff is None:
        return None
    if diff is not None and old is None and new is None:
        body = str(diff)
    else:
        body = "\n".join(["@@", *("-" + line for line in str(old or "").split("\n")),
                          *("+" + line for line in str(new or "").split("\n"))])
    return f"*** Begin Patch\n*** Update File: {path}\n{body}\n*** End Patch"


_DECLINED = re.compile(
    r"^\W*(?:cancell?ed|declined)\W*$|\buser (?:rejected|declined|denied|cancell?ed)\b|"
    r"(?:rejected|declined|denied|cancell?ed|interrupted) by (?:the )?user|"
    r"tell claude what to do differently", re.IGNORECASE)
"""A source's words for a call its user turned down (``User rejected update to a.py``, Gemini
CLI's ``cancelled``, Cline's ``The user denied this operation``)."""


def declined(error: str | None) -> bool:
    """Whether the source says the user turned the call down: Claude Code then logs the tool
    decision ``reject`` (a ``tool_decision`` event), Gemini CLI ``decision`` ``reject``."""
    return bool(error) and _DECLINED.search(error) is not None


def native_call(agent: str, tool: str, args: Any, *,
                ranges_kept: bool = True) -> tuple[str, Any]:
    """Return (tool name, arguments) of one source call as ``agent`` would make it.

    ``ranges_kept``: the source keeps a read's range (``keeps_ranges``).
    """
    mapping = args if isinstance(args, dict) else {}
    mcp = mcp_parts(tool)
    if mcp is not None:
        server, name = mcp
        named = {"claude-code": f"mcp__{server}__{name}", "codex": f"{server}__{name}",
                 "gemini-cli": name}
        return named[agent], args
    role = ROLE_OF.get(base_name(tool))
    native = NATIVE_TOOLS[agent].get(role or "")
    if role is None or native is None:
        return tool, args
    if native == tool or role in _SAME_ARGUMENTS:  # the agent's own call, or no shape to map
        return native, args
    call = _Call(role, mapping, ranges_kept)
    shaped = {"claude-code": _claude_args, "codex": _codex_args,
              "gemini-cli": _gemini_args}[agent](call)
    return native, shaped


# --- records -----------------------------------------------------------------------------------
def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": str(value)}


def _iso(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_id_of(run_id: str) -> str:
    """The session (conversation) id a run is re-expressed under, the same for every agent."""
    return str(uuid.UUID(bytes=hashlib.sha256(run_id.encode()).digest()[:16], version=4))


def _cut(value: Any) -> Any:
    """Claude Code's cut of ``tool_input``: each string over 512 characters truncated."""
    if isinstance(value, str):
        return value[:_CLAUDE_VALUE_CHARS]
    if isinstance(value, dict):
        return {key: _cut(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_cut(inner) for inner in value]
    return value


@dataclass(slots=True)
class _Session:
    """The records of one run as one agent sends them (time, body, attributes)."""

    level: Level
    run: dict[str, Any]
    records: list[tuple[int, Any, dict[str, Any]]]
    clock: int
    ranges_kept: bool = True
    prompt: int = 0
    sequence: int = 0

    @property
    def session(self) -> str:
        return session_id_of(self.run["id"])

    def emit(self, body: Any, attributes: dict[str, Any]) -> None:
        self.clock += _STEP_NS
        self.sequence += 1
        agent = self.level.agent
        common: dict[str, Any] = {"event.timestamp": _iso(self.clock)}
        if agent == "claude-code":
            common.update({"session.id": self.session, "user.id": "corpus",
                           "terminal.type": "vscode", "prompt.id": f"prompt-{self.prompt}",
                           "event.sequence": self.sequence})
        elif agent == "codex":
            common.update({"conversation.id": self.session, "app.version": "0.46.0",
                           "auth_mode": "ApiKey", "originator": "codex_cli_rs",
                           "terminal.type": "vscode", "model": self._model(),
                           "slug": self._model()})
        else:
            common.update({"session.id": self.session, "installation.id": "corpus",
                           "interactive": True})
        self.records.append((self.clock, body, {**common, **attributes}))

    def _model(self) -> str:
        return str(self.run.get("model") or "unknown")

    def prompt_event(self) -> None:
        self.prompt += 1
        agent = self.level.agent
        if agent == "claude-code":
            self.emit("claude_code.user_prompt", {"event.name": "user_prompt",
                                                  "prompt_length": "0"})
        elif agent == "codex":
            self.emit(None, {"event.name": "codex.user_prompt", "prompt": "[REDACTED]"})
        else:
            self.emit("User prompt.", {"event.name": "gemini_cli.user_prompt",
                                       "prompt_id": self._prompt_id()})

    def _prompt_id(self) -> str:
        return f"{self.session}########{self.prompt}"

    def model_event(self) -> None:
        agent, model = self.level.agent, self._model()
        if agent == "claude-code":
            self.emit("claude_code.api_request", {"event.name": "api_request", "model": model,
                                                  "duration_ms": 1000,
                                                  "query_source": "repl_main_thread"})
        elif agent == "codex":  # twice, as Codex logs it: the stream's note, then the tokens
            self.emit(None, {"event.name": "codex.sse_event", "event.kind": "response.completed",
                             "duration_ms": "1000"})
            self.emit(None, {"event.name": "codex.sse_event", "event.kind": "response.completed",
                             "input_token_count": "0", "output_token_count": "0",
                             "tool_token_count": "0"})
        else:
            self.emit(f"API response from {model}.", {
                "event.name": "gemini_cli.api_response", "model": model, "status_code": 200,
                "duration_ms": 1000, "prompt_id": self._prompt_id()})

    def tool_event(self, index: int, call: dict[str, Any]) -> None:
        agent = self.level.agent
        tool, args = native_call(agent, call["tool"], call["args"],
                                 ranges_kept=self.ranges_kept)
        failed = bool(call["error"])
        digest = hashlib.sha256(f"{self.run['id']}:{index}".encode()).hexdigest()
        if agent == "claude-code":
            attrs = self._claude(tool, args, call, digest)
            self.emit(f"claude_code.{attrs['event.name']}", attrs)
        elif agent == "codex":
            attrs = {"event.name": "codex.tool_result", "tool_name": tool,
                     "call_id": f"call_{digest[:24]}", "arguments": json.dumps(args),
                     "duration_ms": _TOOL_MS, "success": "false" if failed else "true",
                     "mcp_server": mcp_parts(call["tool"])[0] if mcp_parts(call["tool"]) else "",
                     "mcp_server_origin": ""}
            output = call["result"] if call["result"] is not None else call["error"]
            if output is not None:
                attrs["output"] = output
            self.emit(None, attrs)
        else:
            attrs = {"event.name": "gemini_cli.tool_call", "function_name": tool,
                     "duration_ms": int(_TOOL_MS), "success": not failed,
                     "decision": "reject" if declined(call["error"]) else "auto_accept",
                     "prompt_id": self._prompt_id(),
                     "tool_type": "mcp" if mcp_parts(call["tool"]) else "native",
                     "call_id": f"{tool}-{self.clock // 1_000_000}-{digest[:8]}"}
            if self.level.arguments:
                attrs["function_args"] = json.dumps(args, indent=2)
            if failed:
                attrs.update({"error": call["error"], "error.message": call["error"],
                              "error_type": "execution_failed",
                              "error.type": "execution_failed"})
            body = f"Tool call: {tool}. Decision: auto_accept. Success: {str(not failed).lower()}."
            self.emit(body, attrs)

    def _claude(self, tool: str, args: Any, call: dict[str, Any],
                digest: str) -> dict[str, Any]:
        """Return the attributes of a call's ``tool_result``, or of its ``tool_decision``
        ``reject`` when its user turned it down (Claude Code logs no result for such a call)."""
        failed = bool(call["error"])
        mcp = mcp_parts(call["tool"])
        rejected = declined(call["error"])
        attrs: dict[str, Any] = {
            "event.name": "tool_decision", "tool_name": "mcp_tool" if mcp else tool,
            "tool_use_id": f"toolu_01{digest[:22]}", "decision": "reject",
            "source": "user_reject", "tool_source": "mcp" if mcp else "builtin",
        } if rejected else {
            "event.name": "tool_result", "tool_name": "mcp_tool" if mcp else tool,
            "tool_use_id": f"toolu_01{digest[:22]}", "success": "false" if failed else "true",
            "duration_ms": _TOOL_MS, "decision_type": "accept", "decision_source": "config",
            "tool_input_size_bytes": str(len(json.dumps(call["args"])))}
        if failed and not rejected:
            attrs["error_type"] = "ShellError" if tool == "Bash" else "Error"
        if not self.level.arguments:
            return attrs
        if not rejected:  # a decision has no input, only the parameters below
            if failed:
                attrs["error"] = call["error"]
            attrs["tool_input"] = json.dumps(_cut(args))[:_CLAUDE_INPUT_CHARS]
        params: dict[str, Any] = {}
        if tool == "Bash" and isinstance(args, dict) and args.get("command"):
            command = str(args["command"])
            params = _clean({"bash_command": command.split(" ", 1)[0], "full_command": command,
                             "timeout": args.get("timeout"),
                             "description": args.get("description")})
        elif mcp:
            params = {"mcp_server_name": mcp[0], "mcp_tool_name": mcp[1]}
        if params:
            attrs["tool_parameters"] = json.dumps(params)
        return attrs


RESOURCES = {
    "claude-code": ({"service.name": "claude-code", "service.version": "2.1.214",
                     "os.type": "linux", "host.arch": "amd64"},
                    "com.anthropic.claude_code.events"),
    "codex": ({"service.name": "codex_cli_rs", "service.version": "0.46.0", "env": "dev"},
              "codex_otel.log_only"),
    "gemini-cli": ({"service.name": "gemini-cli", "service.version": "v22.17.0"}, "gemini-cli"),
}
"""Resource and scope (logger) of each agent, as ``tests/_agent_sessions.py`` has them."""


def keeps_ranges(run: dict[str, Any]) -> bool:
    """Whether one of the run's reads names the part of the file it reads (its export keeps
    ranges, so a read without one read the whole file)."""
    return any(ROLE_OF.get(base_name(call["tool"])) == "read" and isinstance(call["args"], dict)
               and _Call("read", call["args"]).lines() != (None, None)
               for call in replay.calls_of(run))


def session_records(run: dict[str, Any], level: Level,
                    index: int) -> list[tuple[int, Any, dict[str, Any]]]:
    """Return the log records of one run as ``level``'s agent sends them, in order."""
    session = _Session(level, run, [], _START_NS + index * 100_000 * _STEP_NS,
                       keeps_ranges(run))
    session.prompt_event()
    position = 0
    for turn in run["turns"]:
        if turn.get("input") and position:
            session.prompt_event()
        session.model_event()
        for call in turn["calls"]:
            position += 1
            session.tool_event(position, call)
    return session.records


def _request(level: Level, run: dict[str, Any],
             records: list[tuple[int, Any, dict[str, Any]]]) -> dict[str, Any]:
    resource, scope = RESOURCES[level.agent]
    if level.agent == "gemini-cli":
        resource = {**resource, "session.id": session_id_of(run["id"])}
    codex = level.agent == "codex"
    log_records = []
    for time_ns, body, attributes in records:
        record: dict[str, Any] = {
            # Codex leaves time_unix_nano at 0: its time is the observed time
            "timeUnixNano": "0" if codex else str(time_ns),
            "observedTimeUnixNano": str(time_ns), "severityNumber": 9, "severityText": "INFO",
            "attributes": [{"key": key, "value": _value(value)}
                           for key, value in attributes.items()]}
        if body is not None:
            record["body"] = {"stringValue": body}
        log_records.append(record)
    return {"resourceLogs": [{
        "resource": {"attributes": [{"key": k, "value": _value(v)} for k, v in resource.items()]},
        "scopeLogs": [{"scope": {"name": scope, "version": resource["service.version"]},
                       "logRecords": log_records}]}]}


def write_logs(runs: Iterable[dict[str, Any]], level: Level, out: Path) -> int:
    """Write the runs as ``level``'s agent's log events, Collector file format; count sessions."""
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for count, run in enumerate(runs, 1):
            records = session_records(run, level, count)
            for at in range(0, len(records), _PER_LINE):
                request = _request(level, run, records[at:at + _PER_LINE])
                handle.write(json.dumps(request, separators=(",", ":")) + "\n")
    return count


def run_key(level: Level, run_id: str) -> str:
    """The run id ``check`` reports a re-expressed session under (``<agent>:<session>``)."""
    return f"{level.agent}:{session_id_of(run_id)}"


# --- figures -------------------------------------------------------------------------------------
def native_figures(config: Any = None, *, runs: Path = replay.RUNS,
                   labels: Path = replay.LABELS) -> dict[str, Any]:
    """Run the ide family, as each agent at each level sends it, through ``check``'s engine.

    Returns ``CorpusFigures`` per ``Level.key``, each one group (the level's key).
    """
    from corpus.figures import CorpusFigures, replay_file  # figures imports the package

    known = replay.load_labels(labels)
    stored = [run for run in replay.iter_runs(runs) if run["family"] == FAMILY]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for level in LEVELS:
            seeds = {run_key(level, run["id"]): {
                "run": run["id"], "group": level.key, "label": known[run["id"]]["label"],
                "loop_start": known[run["id"]].get("loop_start"),
                "borderline": known[run["id"]].get("borderline")} for run in stored}
            path = Path(tmp) / f"{level.agent}-{len(out)}.jsonl"
            write_logs(stored, level, path)
            outcomes = replay_file(path, seeds, config)
            missing = sorted({run["id"] for run in stored} - set(outcomes))
            if missing:
                raise ValueError(f"{level.key}: sessions check did not report: {missing[:5]}")
            out[level.key] = CorpusFigures([outcomes[run["id"]] for run in stored])
    return out


def format_section(figures: dict[str, Any]) -> str:
    """The figures as Markdown: one row per agent and level, then the runs behind each."""
    from corpus.figures import format_table

    lines = ["| agent | opt-in | runs | loops | caught | healthy flagged "
             "| healthy at replan or stop | budget only | precision | recall |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    details: list[str] = []
    for key, result in figures.items():
        agent, setting = key.split(" | ")
        c = result.counts()
        lines.append(f"| {agent} | `{setting}` | {c['runs']} | {c['loops']} | {c['caught']} "
                     f"| {c['healthy_flagged']} | {c['replan_or_stop_on_healthy']} "
                     f"| {c['budget_only']} | {_ratio(c['precision'])} "
                     f"| {_ratio(c['recall'])} |")
        table = format_table(result, heading="level").splitlines()
        details += ["", f"**{agent}, `{setting}`**", "", *table[5:]]
    return "\n".join(lines + details) + "\n"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


SECTION_TITLE = "## Coding agents' own log events: the ide family re-expressed"
SECTION_INTRO = (
    "Generated by `tests/corpus/native_agents.py` (called by `figures.py`). Each run of the\n"
    "ide family is sent as Claude Code, Codex CLI and Gemini CLI send their tool events, at\n"
    "each level of opt-in (what the level sends: `docs/coding-agents.md`), written as the\n"
    "Collector's file exporter writes logs and read by `check`. Tools are named as each agent\n"
    "names its own tool for the job; arguments and results appear only where the agent sends\n"
    "them (results: Codex only). The `ide` row of the first table is the same runs as\n"
    "spans, with the arguments and results the sources captured.\n")


def section(figures: dict[str, Any] | None = None) -> str:
    """The whole FIGURES.md section, title included."""
    return f"{SECTION_TITLE}\n\n{SECTION_INTRO}\n{format_section(figures or native_figures())}"


if __name__ == "__main__":
    sys.stdout.write(section())
