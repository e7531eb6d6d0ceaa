"""Convert public agent trajectories into OTLP/JSON lines of OTel GenAI spans.

One trace per run: an ``invoke_agent`` root span, a ``chat`` span per model turn and an
``execute_tool`` span per tool call, in the order the agent made them. Two kinds of input:

* **extracts** (``extracts/*.txt``): the compact, line-per-call form this corpus stores. Each
  run was read in its public source and written down call by call (see README.md). Results are
  stored as digests of their equivalence class within the run (two calls get the same digest
  exactly when the source shows the same output), so no source text is copied beyond the
  commands themselves.
* **raw trajectories**, when a copy of the source file is at hand: SWE-agent ``.traj``
  (0.x, with a ``trajectory`` list), mini-swe-agent ``.traj.json`` (v1 text actions and v2 tool
  calls) and tau2-bench simulation files. Results are then digests of the real output text.

Usage::

    python tests/corpus/convert.py                      # extracts/*.txt -> runs.jsonl.gz
    python tests/corpus/convert.py --raw FILE... -o out.jsonl
    python tests/corpus/convert.py --raw FILE... --tokens -o out.jsonl   # licence unknown

Extract format (one run per file; ``#`` starts a comment line)::

    run <id>
    source <owner/repo>
    path <path in the repo>
    commit <sha or ->
    license <SPDX id>
    agent <harness>            # becomes gen_ai.prompt.name (the run's template)
    model <model>
    label loop|healthy
    reason <one line>
    ---
    bash <command> => <result>         # a model turn calling one tool
    + bash <command> => <result>       # another call in the same model turn (parallel)
    ! <why>                            # a model turn the harness rejected: no tool call
    tool <name> <json args> => <result>  # any other tool, arguments as JSON
    editor <subcommand> <path> [k=v ...] => <result>   # str_replace_editor

For a source whose licence does not allow copying its text (``license unknown``), every
argument string is a per-run token (``v1``, ``v2``...: the same token means the same value), except
what the call-kind classifier reads: a shell command keeps its command words, subcommands,
options, operators and numbers (``cd v1 && git status -sb``, ``sleep v3``), and an ``action``,
``operation`` or ``mode`` keeps its one-word value. The parser rejects any other text.

A command may hold ``\\n`` for a newline. ``<result>`` is ``oN`` (the N-th distinct output of
the run; the same ``oN`` again means the same output), ``empty``, optionally followed by
``rc=N`` (exit status; non-zero makes the span ERROR with ``exit code N``) or
``err="message"`` (the harness said the call failed, with this message).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus._shell_words import COMMAND_KEYS, KEYWORDS, MODULE_RUNNERS, WRAPPERS

HERE = Path(__file__).resolve().parent
EXTRACTS = HERE / "extracts"
OUTPUT = HERE / "runs.jsonl.gz"
LABELS = EXTRACTS / "labels.json"

_STEP_NS = 1_000_000_000  # one second per span: ordering is what matters, not durations
_RESULT_RE = re.compile(
    r"^(?P<id>o\d+|empty)(?:\s+rc=(?P<rc>-?\d+))?(?:\s+err=\"(?P<err>[^\"]*)\")?$")
_HEADER_KEYS = ("run", "source", "path", "commit", "license", "agent", "model", "label", "reason")
UNKNOWN_LICENSE = "unknown"
"""The ``license`` of a source whose text may not be copied: arguments are stored as tokens."""
_TOKEN = re.compile(r"[a-z]{1,2}\d+")
"""A per-run token standing for an argument value (``v1``, ``d3``): equal tokens, equal values."""
_LITERAL = re.compile(r"'?[\d,]+[a-z]?'?")
"""Numbers and line ranges (``5``, ``'1,240p'``), kept in a tokenized command line."""
_SHELL_KEYS = frozenset({"command", "cmd", "script"})
_SUBCOMMAND_KEYS = frozenset({"action", "operation", "mode", "subcommand"})
"""Keys whose one-word value says what a call does (``view``, ``poll``): kept as it is."""
_SUBCOMMAND = re.compile(r"[a-z_]{1,32}")
_WORD = re.compile(r"""'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'"]+""")
_SEPARATORS = frozenset({"&&", "||", "|", "|&", ";", "&", "(", ")", "\n"})
_REDIRECT = re.compile(r"\d*(?:>>|>\||>&|>|<<<|<<|<)\d*|&>>?")
_KEY_PREFIXES = frozenset(" ".join(key.split()[:n]) for key in COMMAND_KEYS
                          for n in range(1, len(key.split()) + 1))


@dataclass(slots=True)
class Call:
    """One tool call: name, arguments, result digest (or text), failure."""

    tool: str
    arguments: dict[str, Any]
    result: str
    error: str | None = None


@dataclass(slots=True)
class Turn:
    """One model turn and the calls it made (none when the harness rejected it)."""

    calls: list[Call] = field(default_factory=list)
    rejected: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class Run:
    """A converted run with its provenance and label."""

    meta: dict[str, str]
    turns: list[Turn]

    @property
    def run_id(self) -> str:
        """The run's identifier."""
        return self.meta["run"]

    @property
    def tool_calls(self) -> int:
        """How many tool calls the run made."""
        return sum(len(turn.calls) for turn in self.turns)


def digest(text: str) -> str:
    """Return a stable digest of a result, after collapsing whitespace as the signature does."""
    normal = " ".join(text.split())
    if not normal:
        return ""
    return "sha256:" + hashlib.sha256(normal.encode()).hexdigest()[:32]


# ----------------------------------------------------------------------------- tokens


def command_skeleton(command: str, operand: Callable[[str], str]) -> str:
    """Return ``command`` with what the call-kind classifier reads kept and the rest replaced.

    Kept: the command word of each simple command (after a wrapper such as ``timeout`` or
    ``sudo``, the wrapped command's too), subcommand words that lead to a key of the command table
    (``git status``, ``pip install``), options (``-la``, ``--short``), operators and redirections.
    Every other word (paths, patterns, messages, scripts) is passed to ``operand`` and replaced by
    what it returns. This is what a source whose text may not be copied keeps of a command line.
    """
    out: list[str] = []
    head: str | None = None
    for word in _WORD.findall(command.replace("\n", " \n ")):
        if head in MODULE_RUNNERS and out[-1] == "-m":  # python -m pip: pip is the command
            out.append(word)
            head = word
        elif word in _SEPARATORS:
            out.append(word)
            head = None
        elif _REDIRECT.fullmatch(word) or word.startswith("-"):
            out.append(word)
        elif head is None and (word in KEYWORDS or "=" in word.split("/")[0]):
            name, equals, value = word.partition("=")
            out.append(f"{name}={operand(value)}" if equals and value else word)
        elif head is None or (head in WRAPPERS and not _LITERAL.fullmatch(word)
                              and not _TOKEN.fullmatch(word)):
            out.append(word)
            head = word
        elif f"{head} {word}" in _KEY_PREFIXES:
            out.append(word)
            head = f"{head} {word}"
        else:
            out.append(operand(word))
    return " ".join(out).replace(" \n ", "\n")


def tokenize_arguments(arguments: Any, tokens: dict[str, str]) -> Any:
    """Replace each argument value by a per-run token; shell commands keep their skeleton."""

    def token(value: str) -> str:
        return tokens.setdefault(value, f"v{len(tokens) + 1}")

    def walk(value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            if key in _SHELL_KEYS:
                return command_skeleton(value, token)
            if key in _SUBCOMMAND_KEYS and _SUBCOMMAND.fullmatch(value):
                return value
            return token(value)
        return value

    return walk(arguments, None)


def check_tokenized(arguments: Any) -> None:
    """Raise ValueError naming the first argument text that is neither a token nor a skeleton."""

    def operand(word: str) -> str:
        if not word or _TOKEN.fullmatch(word) or _LITERAL.fullmatch(word):
            return word
        raise ValueError(f"argument text {word!r} is not a token (license unknown)")

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key in _SHELL_KEYS:
                command_skeleton(value, operand)
            elif not (key in _SUBCOMMAND_KEYS and _SUBCOMMAND.fullmatch(value)):
                operand(value)

    walk(arguments, None)


# ----------------------------------------------------------------------------- extracts


def parse_extract(text: str, name: str = "<extract>") -> Run:
    """Parse one extract file; raise ValueError naming the line that is wrong."""
    meta: dict[str, str] = {}
    turns: list[Turn] = []
    lines = text.splitlines()
    body = False
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if not body:
                if line == "---":
                    body = True
                    continue
                key, _, value = line.partition(" ")
                if key not in _HEADER_KEYS:
                    raise ValueError(f"unknown header {key!r}")
                meta[key] = value.strip()
                continue
            _parse_step(line, meta["run"], turns)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"{name}:{number}: {exc}") from None
    missing = [key for key in _HEADER_KEYS if key not in meta]
    if missing:
        raise ValueError(f"{name}: missing header(s) {', '.join(missing)}")
    if meta["label"] not in ("loop", "healthy"):
        raise ValueError(f"{name}: label must be loop or healthy, got {meta['label']!r}")
    if meta["license"] == UNKNOWN_LICENSE:
        for index, call in enumerate((c for t in turns for c in t.calls), 1):
            try:
                check_tokenized(call.arguments)
            except ValueError as exc:
                raise ValueError(f"{name}: call {index}: {exc}") from None
    return Run(meta, turns)


def _parse_step(line: str, run_id: str, turns: list[Turn]) -> None:
    if line.startswith("!"):
        turns.append(Turn(rejected=line[1:].strip() or "rejected"))
        return
    joined = line.startswith("+ ")
    if joined:
        line = line[2:]
        if not turns or turns[-1].rejected is not None:
            raise ValueError("'+' call without a model turn before it")
    action, sep, outcome = line.rpartition(" => ")
    if not sep:
        raise ValueError("a call needs ' => <result>'")
    call = _parse_action(action.strip())
    match = _RESULT_RE.match(outcome.strip())
    if match is None:
        raise ValueError(f"bad result {outcome.strip()!r}")
    ident = match["id"]
    call.result = "" if ident == "empty" else digest(f"{run_id}:{ident}")
    rc = match["rc"]
    if match["err"] is not None:
        call.error = match["err"]
    elif rc is not None and int(rc) != 0:
        call.error = f"exit code {rc}"
    if joined:
        turns[-1].calls.append(call)
    else:
        turns.append(Turn(calls=[call]))


def _parse_action(action: str) -> Call:
    kind, _, rest = action.partition(" ")
    if kind == "bash":
        return Call("bash", {"command": rest.replace("\\n", "\n")}, "")
    if kind == "editor":
        words = shlex.split(rest)
        if len(words) < 2:
            raise ValueError("editor needs a subcommand and a path")
        args: dict[str, Any] = {"command": words[0], "path": words[1]}
        for word in words[2:]:
            key, _, value = word.partition("=")
            args[key] = json.loads(value) if value[:1] in "[{" or value.isdigit() else value
        return Call("str_replace_editor", args, "")
    if kind == "tool":
        name, _, payload = rest.partition(" ")
        return Call(name, json.loads(payload) if payload.strip() else {}, "")
    raise ValueError(f"unknown call kind {kind!r}")


# ----------------------------------------------------------------------------- raw formats


def parse_raw(path: Path) -> list[Run]:
    """Convert a raw trajectory file (SWE-agent, mini-swe-agent or tau2-bench)."""
    doc = json.loads(path.read_text())
    meta = {"run": path.stem.removesuffix(".traj"), "source": "-", "path": str(path),
            "commit": "-", "license": "-", "label": "unlabelled", "reason": "-"}
    if isinstance(doc, dict) and "simulations" in doc:
        return list(_tau2_runs(doc, meta))
    if isinstance(doc, dict) and isinstance(doc.get("trajectory"), list) and doc["trajectory"] \
            and "action" in doc["trajectory"][0]:
        return [Run({**meta, "agent": "swe-agent", "model": "-"}, _swe_agent_turns(doc))]
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return [Run({**meta, "agent": "mini-swe-agent", "model": "-"}, _mini_turns(doc))]
    raise ValueError(f"{path}: not a SWE-agent, mini-swe-agent or tau2-bench trajectory")


def _swe_agent_turns(doc: dict[str, Any]) -> list[Turn]:
    turns = []
    for step in doc["trajectory"]:
        action = str(step.get("action", "")).strip()
        if not action:
            turns.append(Turn(rejected="no action"))
            continue
        observation = str(step.get("observation") or "")
        failed = "Your changes have NOT been applied" in observation
        turns.append(Turn(calls=[Call("bash", {"command": action}, digest(observation),
                                      "edit not applied" if failed else None)]))
    return turns


_BASH_BLOCK = re.compile(r"```(?:bash|sh)?\s*\n(.*?)\n```", re.DOTALL)
_RC = re.compile(r"<returncode>(-?\d+)</returncode>")


def _mini_turns(doc: dict[str, Any]) -> list[Turn]:
    messages = doc["messages"]
    turns: list[Turn] = []
    pending: dict[str, Call] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            turns.append(_mini_assistant_turn(message, messages[index + 1:index + 2], pending))
        elif role == "tool" and message.get("tool_call_id") in pending:
            _fill_result(pending.pop(message["tool_call_id"]), message)
    return turns


def _mini_assistant_turn(message: dict[str, Any], following: list[dict[str, Any]],
                         pending: dict[str, Call]) -> Turn:
    usage = ((message.get("extra") or {}).get("response") or {}).get("usage") or {}
    turn = Turn(input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"))
    for tool_call in message.get("tool_calls") or []:
        function = tool_call.get("function") or {}
        arguments = json.loads(function.get("arguments") or "{}")
        call = Call(function.get("name") or "bash", arguments, "")
        pending[tool_call.get("id", "")] = call
        turn.calls.append(call)
    if not turn.calls:
        blocks = _BASH_BLOCK.findall(str(message.get("content") or ""))
        if len(blocks) == 1:
            call = Call("bash", {"command": blocks[0].strip()}, "")
            if following and following[0].get("role") == "user":
                _fill_result(call, following[0])
            turn.calls.append(call)
        else:
            turn.rejected = f"{len(blocks)} actions"
    return turn


def _fill_result(call: Call, message: dict[str, Any]) -> None:
    content = str(message.get("content") or "")
    extra = message.get("extra") or {}
    output = extra.get("raw_output")
    call.result = digest(content if output is None else str(output))
    code = extra.get("returncode")
    if code is None:
        found = _RC.search(content)
        code = int(found.group(1)) if found else 0
    if int(code) != 0:
        call.error = f"exit code {code}"


def _tau2_runs(doc: dict[str, Any], meta: dict[str, str]) -> Iterator[Run]:
    for simulation in doc["simulations"]:
        turns: list[Turn] = []
        by_id: dict[str, Call] = {}
        for message in simulation.get("messages", []):
            if message.get("role") == "assistant" and message.get("tool_calls"):
                turn = Turn()
                for tool_call in message["tool_calls"]:
                    call = Call(tool_call["name"], tool_call.get("arguments") or {}, "")
                    by_id[tool_call.get("id", "")] = call
                    turn.calls.append(call)
                turns.append(turn)
            elif message.get("role") == "tool" and message.get("id") in by_id:
                call = by_id.pop(message["id"])
                content = str(message.get("content") or "")
                call.result = digest(content)
                if message.get("error"):
                    call.error = content[:200]
        yield Run({**meta, "run": f"{meta['run']}/{simulation.get('task_id')}",
                   "agent": "tau2-bench", "model": "-"}, turns)


# ----------------------------------------------------------------------------- OTLP output


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def run_to_otlp(run: Run, index: int) -> dict[str, Any]:
    """Return one ``ExportTraceServiceRequest`` (OTLP/JSON) holding the run's trace."""
    trace_id = hashlib.sha256(run.run_id.encode()).hexdigest()[:32]
    counter = iter(range(1, 1 << 30))

    def span_id() -> str:
        return hashlib.sha256(f"{trace_id}:{next(counter)}".encode()).hexdigest()[:16]

    base = 1_700_000_000 * _STEP_NS + index * 10_000 * _STEP_NS
    root_id = span_id()
    spans: list[dict[str, Any]] = []
    clock = base + 1
    template = run.meta.get("agent", "agent")
    for turn in run.turns:
        chat = {"traceId": trace_id, "spanId": span_id(), "parentSpanId": root_id,
                "name": f"chat {run.meta.get('model', '')}".strip(), "kind": 3,
                "startTimeUnixNano": str(clock), "endTimeUnixNano": str(clock + 1),
                "attributes": [_attr("gen_ai.operation.name", "chat"),
                               _attr("gen_ai.prompt.name", template),
                               _attr("gen_ai.request.model", run.meta.get("model", ""))],
                "status": {}}
        if turn.input_tokens is not None:
            chat["attributes"].append(_attr("gen_ai.usage.input_tokens", turn.input_tokens))
        if turn.output_tokens is not None:
            chat["attributes"].append(_attr("gen_ai.usage.output_tokens", turn.output_tokens))
        spans.append(chat)
        clock += 2
        for call in turn.calls:
            attributes = [_attr("gen_ai.operation.name", "execute_tool"),
                          _attr("gen_ai.tool.name", call.tool),
                          _attr("gen_ai.tool.call.arguments",
                                json.dumps(call.arguments, sort_keys=True)),
                          _attr("gen_ai.tool.call.result", call.result)]
            status: dict[str, Any] = {}
            if call.error is not None:
                status = {"code": 2, "message": call.error}
                attributes.append(_attr("error.type", "tool_error"))
            spans.append({"traceId": trace_id, "spanId": span_id(), "parentSpanId": root_id,
                          "name": f"execute_tool {call.tool}", "kind": 1,
                          "startTimeUnixNano": str(clock), "endTimeUnixNano": str(clock + 1),
                          "attributes": attributes, "status": status})
            clock += 2
    root = {"traceId": trace_id, "spanId": root_id, "name": f"invoke_agent {template}",
            "kind": 1, "startTimeUnixNano": str(base), "endTimeUnixNano": str(clock + 1),
            "attributes": [_attr("gen_ai.operation.name", "invoke_agent"),
                           _attr("gen_ai.agent.name", template),
                           _attr("gen_ai.prompt.name", template),
                           _attr("loopguard.corpus.run", run.run_id)],
            "status": {}}
    service = {"key": "service.name", "value": {"stringValue": f"corpus-{template}"}}
    return {"resourceSpans": [{"resource": {"attributes": [service]},
                               "scopeSpans": [{"scope": {"name": "loopguard.corpus"},
                                               "spans": [root, *spans]}]}]}


def trace_id_of(run_id: str) -> str:
    """Return the trace id ``run_to_otlp`` gives a run."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def load_extracts(directory: Path = EXTRACTS) -> list[Run]:
    """Parse every extract of the corpus, sorted by file name."""
    return [parse_extract(path.read_text(), path.name)
            for path in sorted(directory.glob("*.txt"))]


def write_runs(runs: Iterable[Run], out: Path) -> int:
    """Write the runs as OTLP/JSON lines (gzip when ``out`` ends with .gz); return the count."""
    lines = [json.dumps(run_to_otlp(run, index), separators=(",", ":")) + "\n"
             for index, run in enumerate(runs, 1)]
    data = "".join(lines).encode()
    # mtime=0 keeps the archive byte-for-byte stable when the extracts have not changed
    out.write_bytes(gzip.compress(data, mtime=0) if out.suffix == ".gz" else data)
    return len(lines)


def labels_json(runs: Iterable[Run]) -> str:
    """Return ``extracts/labels.json``: per excerpt its label, reason, provenance and trace id."""
    table = {run.run_id: {**{key: run.meta[key] for key in _HEADER_KEYS if key != "run"},
                          "trace_id": trace_id_of(run.run_id), "tool_calls": run.tool_calls}
             for run in runs}
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", nargs="+", type=Path, help="raw trajectory files to convert")
    parser.add_argument("--tokens", action="store_true",
                        help="store the argument values of raw files as per-run tokens")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    try:
        runs = [run for path in args.raw for run in parse_raw(path)] if args.raw \
            else load_extracts()
    except ValueError as exc:
        print(f"convert: {exc}", file=sys.stderr)
        return 2
    if args.raw and args.tokens:
        for run in runs:
            tokens: dict[str, str] = {}
            for call in (c for turn in run.turns for c in turn.calls):
                call.arguments = tokenize_arguments(call.arguments, tokens)
    count = write_runs(runs, args.output)
    if not args.raw:
        LABELS.write_text(labels_json(runs))
    print(f"wrote {count} run(s) to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
