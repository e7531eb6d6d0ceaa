"""BrowserGym's demo agent (gpt-4o) on WorkArena tasks, converted to the corpus format (family ``browsing``).

Source: github.com/ServiceNow/BrowserGym, pull request #301 (``refs/pull/301/head``, from the
fork Nid989/BrowserGym), commit f9da75984ce200c3f088baed9ca784ebfcd1df84 (2025-01-04), folder
``results/``. Licence: Apache-2.0 (the repository's LICENSE; a pull request to it is a
contribution under that licence), so results are kept as text (content ``full``), long ones
capped as FORMAT.md says.

Harness: BrowserGym's experiment loop with the fork's ``demo_agent/agent.py`` (``DemoAgent``)
on WorkArena's ServiceNow tasks (ordering catalog items, menus, knowledge-base search), models
gpt-4o-2024-08-06, gpt-4o-2024-11-20 and ``gpt-4o`` (as the 2024-12 runs record it), temperature
0. Each step the agent is shown the goal, the open tabs, the page's accessibility tree (and its
pruned HTML when so configured), the history of its past answers and the last action's error;
it answers in words and one action in a code block, which
``HighLevelActionSet(subsets=["chat", "tab", "nav", "bid", "infeas"], strict=False,
multiaction=False)`` parses: ``click('a413')``, ``fill('a93', 'text')``,
``select_option('a245', '6')``, ``scroll(0, 200)``, ``goto(url)``, ``go_back()``,
``send_msg_to_user(text)``, ``noop()``... An episode ends when the task's validator says done
(mostly once an order is placed), when the agent sends ``send_msg_to_user`` or
``report_infeasible``, or after 100 steps. Some runs leave ServiceNow for apple.com, amazon.com
or bestbuy.com in a new tab.

Runs taken: every run the pull request committed under ``results/`` (four folders: 2024-12-30,
two batches of 2025-01-02, 2025-01-03), chosen without looking at them; a run with no model
answer at all (its only step is the first observation) is left out.

How the records map to turns and calls: each run folder holds ``step_<n>.pkl.gz``, pickled
``StepInfo`` objects, read here with a standard-library unpickler that turns every class it does
not know into a plain attribute holder (the screenshots' numpy arrays included, which are not
read). Step ``n``'s ``action`` is the model's whole answer to observation ``n``: one turn. Its
``output`` is the text before the last code block; its call is the action in that code block
(or, when there is no code block, the first ``name(...)`` of a BrowserGym action in the text),
``tool`` the action's name and ``args`` its arguments named as BrowserGym's action functions name
them (``bid``, ``value``, ``options``, ``delta_x``...). The call's ``result`` is what the agent is
shown next, from observation ``n + 1``: the open tabs as the agent's prompt lists them, the page's
accessibility tree and, when there is one, the ``# Error message from last action`` and its text
(the pruned HTML, which repeats the page, is left out). ``error`` is the first line of
``last_action_error`` of observation ``n + 1`` when not empty (a timeout, a bid not found, a
multi-action the parser refused: it searches the whole answer, prose included, for call-like
text, so an answer whose prose holds ``bids('252', '269')`` is refused though its code block
holds one action; the call stored is the code block's action, with that error). An answer with
no action in it is a turn without a call; the harness's error for it is the next turn's
``input`` (no answer of these runs lacks an action). The first turn's ``input`` is the goal.
When a run stopped with no observation after its last action (one run, whose last step
recorded none), that call's result is null and the run's content is ``partial``.

Usage: ``python tests/corpus/sources/browsing_browsergym_workarena.py GIT_DIR`` (a clone of
ServiceNow/BrowserGym with the pull request's refs, read with ``git show``/``ls-tree`` only);
writes ``tests/corpus/runs/browsing/browsergym_workarena.jsonl.gz``.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

SOURCE = "ServiceNow/BrowserGym"
COMMIT = "f9da75984ce200c3f088baed9ca784ebfcd1df84"
ROOT = "results"
SLUG = "browsergym_workarena"
OUT = Path(__file__).resolve().parents[1] / "runs" / "browsing" / f"{SLUG}.jsonl.gz"

PARAMS = {  # BrowserGym's action functions (core/action/functions.py) and their parameters
    "send_msg_to_user": ["text"],
    "report_infeasible": ["reason"],
    "noop": ["wait_ms"],
    "fill": ["bid", "value"],
    "check": ["bid"],
    "uncheck": ["bid"],
    "select_option": ["bid", "options"],
    "click": ["bid", "button", "modifiers"],
    "dblclick": ["bid", "button", "modifiers"],
    "hover": ["bid"],
    "press": ["bid", "key_comb"],
    "focus": ["bid"],
    "clear": ["bid"],
    "drag_and_drop": ["from_bid", "to_bid"],
    "scroll": ["delta_x", "delta_y"],
    "goto": ["url"],
    "go_back": [],
    "go_forward": [],
    "new_tab": [],
    "tab_close": [],
    "tab_focus": ["index"],
    "upload_file": ["bid", "file"],
}
CODE_BLOCK = re.compile(r"```(?:python)?\s*(.*?)```", re.S)
CALL = re.compile(r"\b(" + "|".join(PARAMS) + r")\s*\(")


class _Loose:
    """Stands in for any class the unpickler does not know: keeps what it is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = args
        self.__dict__.update(kwargs)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self._state = state


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in {"set", "frozenset", "tuple", "list", "dict"}:
            return super().find_class(module, name)
        return type(name, (_Loose,), {})


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000 and the hash and length of the whole."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def load_step(raw: bytes) -> Any:
    return _Unpickler(io.BytesIO(gzip.decompress(raw))).load()


def parse_action(text: str) -> tuple[str, dict[str, Any], str | None] | None:
    """(tool, args, text before the action) of the action in an answer, or None."""
    blocks = [(m.start(), m.group(1)) for m in CODE_BLOCK.finditer(text)]
    candidates = [(start, body) for start, body in reversed(blocks) if CALL.search(body)]
    if candidates:
        start, body = candidates[0]
        code = body.strip()
        before = text[:start]
    else:
        match = CALL.search(text)
        if match is None:
            return None
        start = match.start()
        code = text[start:].strip().splitlines()[0]
        before = text[:start]
    match = CALL.search(code)
    assert match is not None
    code = code[match.start():]
    try:
        node = ast.parse(code.strip().splitlines()[0] if "\n" in code else code, mode="eval").body
    except SyntaxError:
        node = None
    name = match.group(1)
    args: dict[str, Any] = {}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        names = PARAMS[name]
        try:
            for i, arg in enumerate(node.args):
                args[names[i] if i < len(names) else f"arg{i}"] = ast.literal_eval(arg)
            for keyword in node.keywords:
                args[keyword.arg or "kwargs"] = ast.literal_eval(keyword.value)
        except ValueError:
            args = {"code": code.strip()}
    else:
        args = {"code": code.strip()}
    return name, args, before.strip() or None


def shown(obs: dict[str, Any]) -> str:
    """What the demo agent's next prompt shows of an observation (the HTML left out)."""
    active = obs.get("active_page_index")
    state = getattr(active, "_state", None)
    index = None
    if isinstance(state, tuple) and len(state) == 5 and isinstance(state[4], bytes):
        index = int.from_bytes(state[4][:8], "little", signed=True) if state[4] else None
    lines = ["# Currently open tabs"]
    for i, (url, title) in enumerate(
        zip(obs.get("open_pages_urls") or (), obs.get("open_pages_titles") or (), strict=False)
    ):
        active_mark = " (active tab)" if i == index else ""
        lines.append(f"Tab {i}{active_mark}\n  Title: {title}\n  URL: {url}")
    lines.append("# Current page Accessibility Tree")
    lines.append(obs.get("axtree_txt") or "")
    if obs.get("last_action_error"):
        lines.append("# Error message from last action")
        lines.append(obs["last_action_error"])
    return "\n".join(lines).strip()


def first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip()[:200] if lines else ""


def goal_of(obs: dict[str, Any]) -> str | None:
    goal = obs.get("goal_object")
    if goal:
        return "\n".join(part.get("text", "") for part in goal if isinstance(part, dict)) or None
    users = [m["message"] for m in obs.get("chat_messages") or () if m.get("role") == "user"]
    return "\n".join(users) or None


def turns_of(steps: list[Any]) -> tuple[list[dict[str, Any]], str | None]:
    turns: list[dict[str, Any]] = []
    model = None
    pending = goal_of(steps[0].obs) if steps and steps[0].obs else None
    for n, step in enumerate(steps):
        answer = step.action
        if answer is None:
            continue  # the last observation: no answer to it
        info = step.agent_info if isinstance(step.agent_info, dict) else {}
        model = model or (info.get("model_info") or {}).get("model_name")
        following = steps[n + 1].obs if n + 1 < len(steps) else None  # None: not recorded
        parsed = parse_action(answer)
        turn: dict[str, Any] = {"agent": None, "input": pending, "output": None, "calls": []}
        pending = None
        if parsed is None:
            turn["output"] = answer
            if following is not None and following.get("last_action_error"):
                pending = "# Error message from last action\n" + following["last_action_error"]
        else:
            tool, args, before = parsed
            turn["output"] = before
            error = None
            result = None
            if following is not None:
                result = cap(shown(following))
                if following.get("last_action_error"):
                    error = first_line(following["last_action_error"]) or "error"
            turn["calls"].append({"tool": tool, "args": args, "result": result, "error": error})
        turns.append(turn)
    return turns, model


def run_folders(git_dir: Path) -> list[str]:
    """Every run folder of every batch folder under ``results/``."""
    folders = []
    batches = git(git_dir, "ls-tree", "-d", "--name-only", "-z", COMMIT, ROOT + "/")
    for batch in filter(None, batches.decode().split("\0")):
        runs = git(git_dir, "ls-tree", "-d", "--name-only", "-z", COMMIT, batch + "/")
        folders.extend(filter(None, runs.decode().split("\0")))
    return sorted(folders)


def run_id(folder: str) -> str:
    name = folder.rsplit("/", 1)[1]
    stamp, _, rest = name.partition("_DemoAgentArgs_on_workarena.servicenow.")
    task = re.sub(r"[^a-z0-9_-]+", "-", rest.lower()).strip("-")
    return f"browsing-{SLUG.replace('_', '-')}-{stamp}-{task}"


def convert(git_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for folder in run_folders(git_dir):
        files = git(git_dir, "ls-tree", "--name-only", "-z", COMMIT, folder + "/").split(b"\0")
        numbers = sorted(
            int(m.group(1))
            for f in files
            if (m := re.search(rb"/step_(\d+)\.pkl\.gz$", f))
        )
        steps = [
            load_step(git(git_dir, "show", f"{COMMIT}:{folder}/step_{n}.pkl.gz")) for n in numbers
        ]
        turns, model = turns_of(steps)
        if not turns:
            continue  # no model answer at all
        runs.append(
            {
                "id": run_id(folder),
                "family": "browsing",
                "source": SOURCE,
                "path": folder,
                "commit": COMMIT,
                "licence": "Apache-2.0",
                "harness": "BrowserGym DemoAgent (WorkArena)",
                "model": model or "gpt-4o",
                "content": "partial"
                if any(c["result"] is None for t in turns for c in t["calls"])
                else "full",
                "turns": turns,
            }
        )
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    runs = convert(git_dir)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    OUT.write_bytes(buffer.getvalue())
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
