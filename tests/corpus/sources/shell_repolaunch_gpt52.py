"""Convert RepoLaunch setup-phase runs of GPT-5.2 (repository environment setup) into corpus runs.

Source: github.com/SWE-bench-Live/RepoLaunch-trajectory-archive, commit
e068854f5e74252b1f312036aade64e5eda1ebdf (its HEAD, 2026-06-07), folders
``{c,cpp,cs,go,java,js,rust,ts,windows_tasks}/playground/<owner>__<repo>-<n>/``: each holds
``instance.json``, ``result.json``, ``setup.log`` and ``organize.log``; ``<lang>/config.json``
names the model, ``azure/gpt-5.2-20251211`` (c, rust) or ``azure/gpt-5.2-codex-20260114`` (the
others; the log's cost notes agree: LiteLLM priced the first and printed ``nan`` for the second).
The repository has no licence, so results are stored as digests (``content: "hashed"``); the
model's text and its commands are kept.

Agent: Microsoft's RepoLaunch (github.com/microsoft/RepoLaunch), a LangGraph workflow of ReAct
agents that builds a repository's test environment inside a Docker container (a Linux
container, or Windows Server with PowerShell for ``windows_tasks``). Its setup phase (config
``mode.setup``, logged to ``setup.log``) is: locate documentation files and choose a base image
(single LLM calls, no agent: the log's lines before ``----------Start setup
conversation----------``, skipped), then the setup agent (at most 80 steps, 90 on Windows),
then a verify agent that reruns the tests and reports (at most 20 steps); when it reports an
issue the setup agent gets a second trial (``max_trials`` 2), followed by a second
verification. The organize phase (``organize.log``: a second conversation, which writes the
rebuild and per-test commands once the image exists) is left out.

Runs taken (chosen without looking at their content): every instance folder with a
``setup.log`` whose agent part holds at least one model message, a ``random.Random(2026)
.sample`` of ``SAMPLE`` (120) of their sorted ``setup.log`` paths. Of the 1,436 instance
folders, 1,433 have a ``setup.log``, 2 of whose blobs are missing from the snapshot
(``cs/.../JasperFx__wolverine-2485``, ``java/.../strimzi__strimzi-kafka-operator-12590``) and
1 has no model message (``rust/.../tensorzero__tensorzero-7214``: the API refused the first
call, its prompt over the context limit), which leaves 1,430. Two logs
(``go/.../vitessio__vitess-19560`` and ``-19672``) hold several launches of the pipeline, one
after another (``Using language:`` starts each; the earlier ones were cut off); the run is the
last launch, which ``result.json`` reports on.

What the log is: Python logging text (``<date> <time>,<ms> - <message>``). Each model response
is logged as LangChain's ``pretty_repr`` (an ``Ai Message`` rule, a blank line, the response's
text) and each message the harness sends back as a ``Human Message`` whose text starts with
``Observation:``. Between them are the harness's own lines (``----------Start verify
conversation----------``, ``Verification failed due to: ...``, ``The setup is successful``,
``setup state: ...``, ``!!! Exception: ...``). The archive's last commit ("update instance cost")
wrote LLM cost notes into the logs (``\\n\\n -- <step_cost> input_tok: ..., output_tok: ...,
cost_usd: ... </step_cost>`` after a response's first ``</command>`` or at its end, and ``   --
<step_cost> ... </step_cost>`` at the end of other lines, sometimes several times, sometimes in
the wrong place); the converter deletes them first. With them deleted, 1,310 of the logs equal
the setup part of the same log at the commit before (ff1a05defbcfc6e72eca741e7eaae46d4e105a00,
which still had the organize phase appended) but for line breaks the cost update normalised
(``\\r``, ``\\x1e``...); the other 121 were replaced by re-runs. Neither the system prompts nor
the first message of a conversation (task, repository tree, related files) are logged, and
the harness also sends the model, unlogged, the list of commands it has run so far and only the
last 40 messages (20 when verifying).

How messages map to turns and calls: every ``Ai Message`` is one turn (``agent`` ``setup`` or
``verify``, after the conversation it belongs to). The action is read as RepoLaunch's action
parsers read it (``launch/agent/setup/setup.py``, ``verify.py``; the prompt's tool list names
the actions): the first non-empty ``<command>...</command>`` anywhere in the response, else the
first non-empty ``<search>...</search>`` (setup only), else ``<stop>`` with ``</stop>`` (setup
only), else the first non-empty ``<issue>...</issue>`` (verify only: the verifier's verdict,
``None`` for a good setup). A response can hold more than one tag (the model repeating or
changing its action, or adding ``<issue>None</issue>`` after a command): only that first action
runs, and the others stay in the turn's ``output``. Each action is one call named as the
harness names it: ``command`` (``{"command": ...}``: a bash line, or a PowerShell one on
Windows), ``search`` (``{"query": ...}``, a web search whose result is the JSON of its hits),
``stop`` (``{}``: ends the conversation; the harness sends nothing back, so its result is null)
and ``issue`` (``{"issue": ...}``: ends the verification; its result is what the harness echoes,
the text lower-cased, empty for ``None``). A call's result is the text of the next ``Human
Message`` after ``Observation:\\n`` (the logging's line end removed), hashed; a ``command``'s
error is ``Exited due to timeout`` when the harness killed it (its ``**Exited due to
timeout**`` line, exit code 124), ``exit code N`` when the observation ends with a non-zero
``exit code: N``, else null. The turn's ``output`` is the response's text without the executed
action's tag (every copy of it) and the ``Action:`` labels left empty, null when nothing is
left (the codex model often answers with a bare tag); a response that is the same text twice
(some are: ``Thought: ... Action: ...`` printed twice) is taken once. A response with no action
(often the codex model's closing summary) gets ``Please using following format after `Action:
` to make a valid action choice: ...`` back, the harness's format reminder: a turn with no
call, the reminder the next turn's ``input``. The verify agent of this version crashes on such
a response (``!!! Exception: 'NoneType' object has no attribute 'action'``), which ends the
run. The first turn of a second setup trial gets as ``input`` the harness's retry message
(``RETRY``, fixed text from RepoLaunch's ``setup.py``; the log does not print it): by then the
setup agent also sees the verify agent's messages, which are the run's verify turns before it.

How a run ends: the verify agent's ``<issue>None</issue>`` (the harness then commits the
image), its second issue report (there is no third trial), its step limit, or an exception
(the LLM API refusing an over-long prompt, the Windows container's pipe closing, a container
that never started); a few logs just stop after a model response. A call whose observation
never came keeps a null result.

Usage: ``python tests/corpus/sources/shell_repolaunch_gpt52.py MIRROR_GIT_DIR [--plain OUT]``
where MIRROR_GIT_DIR is a bare clone of the archive (read with ``git ls-tree``/``cat-file``
only); writes ``tests/corpus/runs/shell/repolaunch-gpt52.jsonl.gz``. With ``--plain OUT`` it
writes the same runs to OUT with each result's text (capped as FORMAT.md says) instead of its
digest, for reading only, never for the corpus.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from _store import blob, cap, digest, git, write_runs

SOURCE = "SWE-bench-Live/RepoLaunch-trajectory-archive"
COMMIT = "e068854f5e74252b1f312036aade64e5eda1ebdf"
LICENCE = "none"
HARNESS = "RepoLaunch (LangGraph ReAct agent, setup phase)"
SLUG = "repolaunch-gpt52"
SAMPLE = 120
SEED = 2026
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"

RETRY = ("Test cases did not run successfully. The setup of the repository is not successful so "
         "far... Please try again to setup dependencies, build the repo and run tests!")

_COST_BLOCK = re.compile(r"\n\n -- <step_cost> input_tok: [^<\n]*</step_cost>(?:\n|\Z)")
_COST_INLINE = re.compile(r"   -- <step_cost> input_tok: [^<\n]*</step_cost>")
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ", re.M)
_LAUNCH = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - Using language:", re.M)
_MESSAGE = re.compile(r"\n?=+ (Ai|Human) Message =+\n\n")
_START = re.compile(r"^-{10}Start (setup|verify) conversation-{10}")
_END = re.compile(r"^-{10}End (setup|verify) conversation-{10}")
_EXIT = re.compile(r"\nexit code: (-?\d+)\n*\Z")
_ACTION_LABEL = re.compile(r"^[ \t]*Action:[ \t]*$", re.M)


def events(log: str) -> list[tuple[str, str, str]]:
    """The agent part of the log's last launch: (conversation, kind, text) in order.

    kind is ``start`` (a conversation begins), ``ai``, ``human`` (the message's text) or
    ``log`` (any other line of the harness); conversation is ``setup``, ``verify`` or ``""``.
    """
    text = _COST_INLINE.sub("", _COST_BLOCK.sub("", log))
    launches = [m.start() for m in _LAUNCH.finditer(text)]
    if launches:
        text = text[launches[-1]:]
    marks = list(_RECORD.finditer(text))
    found: list[tuple[str, str, str]] = []
    phase = ""
    started = False
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        body = text[mark.end():end]
        if body.endswith("\n"):
            body = body[:-1]  # the logging handler's line end
        start = _START.match(body)
        if start:
            phase, started = start.group(1), True
            found.append((phase, "start", ""))
            continue
        if not started:
            continue
        message = _MESSAGE.match(body)
        if message:
            found.append((phase, message.group(1).lower(), body[message.end():]))
        elif _END.match(body):
            phase = ""
        else:
            found.append((phase, "log", body))
    return found


def _tag(response: str, tag: str) -> re.Match[str] | None:
    match = re.search(f"<{tag}>(.*?)</{tag}>", response, re.S)
    return match if match and match.group(1) else None


def parse_action(response: str, phase: str) -> tuple[str, re.Match[str] | None] | None:
    """The action RepoLaunch's parser takes from a response: (name, its tag match) or None."""
    if "<think>" in response:
        response = response.split("</think>")[1] if "</think>" in response else ""
    command = _tag(response, "command")
    if command:
        return "command", command
    if phase == "setup":
        search = _tag(response, "search")
        if search:
            return "search", search
        if "<stop>" in response and "</stop>" in response:
            return "stop", re.search(r"<stop>.*?</stop>", response, re.S)
        return None
    issue = _tag(response, "issue")
    return ("issue", issue) if issue else None


def _undouble(text: str) -> str:
    """A response that is the same text twice (but for spaces at line ends), taken once."""
    text = "\n".join(line.rstrip() for line in text.splitlines())
    middle = len(text) // 2
    for cut in range(max(1, middle - 3), min(len(text), middle + 4)):
        first = text[:cut].strip()
        if first and first == text[cut:].strip():
            return first
    return text


def output_of(response: str, action: tuple[str, re.Match[str] | None] | None) -> str | None:
    text = _undouble(response.strip())
    if action is not None and action[1] is not None:
        tag = "\n".join(line.rstrip() for line in action[1].group(0).split("\n"))
        text = text.replace(tag, "")
        text = _ACTION_LABEL.sub("", text)
        text = re.sub(r"\n{3,}", "\n\n", text)
    text = text.strip()
    return text or None


def _error(observation: str) -> str | None:
    code = _EXIT.search(observation)
    if code is None or code.group(1) == "0":
        return None
    if code.group(1) == "124" and "\n**Exited due to timeout**\n" in observation:
        return "Exited due to timeout"
    return f"exit code {code.group(1)}"


def convert(log: str, plain: bool) -> list[dict[str, Any]]:
    """The turns of one setup.log."""
    turns: list[dict[str, Any]] = []
    pending: str | None = None
    waiting: dict[str, Any] | None = None  # the call whose observation comes next
    setup_trials = 0
    for phase, kind, text in events(log):
        if kind == "start":
            waiting, pending = None, None
            if phase == "setup":
                setup_trials += 1
                if setup_trials > 1:
                    pending = RETRY
        elif kind == "ai":
            action = parse_action(text, phase)
            turn: dict[str, Any] = {"agent": phase, "input": pending,
                                    "output": output_of(text, action), "calls": []}
            pending, waiting = None, None
            if action is not None:
                name, match = action
                if name == "stop":
                    args: dict[str, Any] = {}
                else:
                    key = {"command": "command", "search": "query", "issue": "issue"}[name]
                    args = {key: match.group(1).strip()}
                call = {"tool": name, "args": args, "result": None, "error": None}
                turn["calls"].append(call)
                if name != "stop":
                    waiting = call
            turns.append(turn)
        elif kind == "human":
            observation = text[len("Observation:\n"):] if text.startswith("Observation:\n") \
                else text
            if waiting is not None:
                waiting["result"] = cap(observation) if plain else digest(observation)
                if waiting["tool"] == "command":
                    waiting["error"] = _error(observation)
                waiting = None
            else:
                pending = observation  # the harness's format reminder
    return turns


def listing(git_dir: Path) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Instance folders, setup.log blob per folder, model per language folder."""
    folders: set[str] = set()
    logs: dict[str, str] = {}
    configs: dict[str, str] = {}
    for line in git(git_dir, "ls-tree", "-r", "-z", COMMIT).decode().split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        sha = meta.split()[2]
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "playground":
            folders.add("/".join(parts[:3]))
            if parts[3] == "setup.log":
                logs["/".join(parts[:3])] = sha
        elif len(parts) == 2 and parts[1] == "config.json":
            configs[parts[0]] = sha
    models = {}
    for lang, sha in configs.items():
        model = json.loads(blob(git_dir, sha) or b"{}")["model_config"]["model"]
        models[lang] = model.removeprefix("azure/")
    return sorted(folders), logs, models


def run_id(folder: str) -> str:
    lang, _, instance = folder.split("/")
    return re.sub(r"[^a-z0-9_.-]+", "-", f"shell-{SLUG}-{lang}-{instance}".lower())


def main(argv: list[str]) -> None:
    git_dir = Path(argv[0])
    plain_out = Path(argv[argv.index("--plain") + 1]) if "--plain" in argv else None
    head = git(git_dir, "rev-parse", "HEAD").decode().strip()
    if head != COMMIT:
        sys.exit(f"the mirror's HEAD is {head}, not {COMMIT}")
    folders, logs, models = listing(git_dir)
    texts: dict[str, str] = {}
    missing = 0
    for folder in folders:
        if folder not in logs:
            continue
        data = blob(git_dir, logs[folder])
        if data is None:
            missing += 1
            continue
        text = data.decode("utf-8", errors="replace")
        if any(kind == "ai" for _, kind, _ in events(text)):
            texts[f"{folder}/setup.log"] = text
    print(f"{len(folders)} instance folders, {len(logs)} setup.log, {missing} missing blobs, "
          f"{len(texts)} with a model message")
    chosen = random.Random(SEED).sample(sorted(texts), SAMPLE)
    runs = []
    for path in sorted(chosen):
        folder = path.removesuffix("/setup.log")
        runs.append({
            "id": run_id(folder),
            "family": "shell",
            "source": SOURCE,
            "path": path,
            "commit": COMMIT,
            "licence": LICENCE,
            "harness": HARNESS,
            "model": models[folder.split("/")[0]],
            "content": "hashed",  # stop calls and calls cut by the run's end have a null result
            "turns": convert(texts[path], plain=plain_out is not None),
        })
    write_runs(runs, plain_out or OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
