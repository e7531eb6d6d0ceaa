"""Per-call kinds of shell-like and editor tools: the command table, arguments, config, engine.

``tests/data/shell_commands.jsonl`` holds 353 command lines that coding agents really ran,
labelled by hand: Terminal-Bench and ScienceAgentBench rollouts of the pi coding agent, and
SWE-bench trajectories (mini-swe-agent style command lists and Qwen3-Coder tool calls), taken from
public repositories. Each line is ``{"kind", "source", "command"}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import Action, ConfigError, LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.kinds import (
    DEFAULT_COMMAND_KINDS,
    MAX_COMMAND_CHARS,
    CallKindClassifier,
)

DATA = Path(__file__).resolve().parent / "data" / "shell_commands.jsonl"
_CORPUS = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(name="classifier")
def _classifier() -> CallKindClassifier:
    return CallKindClassifier()


class TestRealCommands:
    def test_corpus_is_a_few_hundred_labelled_lines(self) -> None:
        """The corpus holds a few hundred distinct commands covering every kind but exempt."""
        commands = [row["command"] for row in _CORPUS]
        assert len(commands) >= 300
        assert len(set(commands)) == len(commands)
        assert {row["kind"] for row in _CORPUS} == {"read", "mutating", "default", "poll"}

    @pytest.mark.parametrize("row", _CORPUS, ids=[f"{i}-{r['kind']}" for i, r in
                                                   enumerate(_CORPUS)])
    def test_kind(self, classifier: CallKindClassifier, row: dict[str, str]) -> None:
        """A command line that an agent ran gets the kind it was labelled with."""
        assert classifier.command_kind(row["command"]) == row["kind"]


TRICKY = [
    ("cd dir && python x.py", "default"),
    ("VAR=1 pytest", "default"),
    ("A=1 B=2 python -m pytest tests/ -q", "default"),
    ("grep -rn foo src | head -20", "read"),
    ("cat a.py | wc -l", "read"),
    ("python x.py 2>&1 | tail -20", "default"),
    ("ls -la 2>&1", "read"),
    ("ls > /dev/null", "read"),
    ("grep -r x . 2>/dev/null", "read"),
    ("echo hi >&2", "read"),
    ("echo hi 1>&2 2>/dev/null", "read"),
    ("echo x > out.txt", "mutating"),
    ("echo 'import os' >> fix.py", "mutating"),
    ("pytest &> log.txt", "mutating"),
    ("python run.py 2>&1 | tee run.log", "mutating"),
    ("cat <<'EOF' > test_x.py\nimport os\nif a > b: print(1)\nEOF", "mutating"),
    ("cat > a.py << EOF\nx\nEOF", "mutating"),
    ("python - <<'EOF'\nprint(1 > 0)\nEOF", "default"),
    ("python - <<'EOF'\nprint(1 > 0)\nopen('x', 'w')\nEOF", "mutating"),
    ("cat <<EOF\nrm -rf /\nEOF", "read"),
    ("tee test_a.py <<'EOF'\nx = 1\nEOF", "mutating"),
    ("git diff", "read"),
    ("git diff HEAD -- a.py | head -50", "read"),
    ("git checkout -- a.py", "mutating"),
    ("git -C repo status", "read"),
    ("git stash list", "read"),
    ("git stash", "mutating"),
    ("git branch -a", "read"),
    ("git branch -D old", "mutating"),
    ("git apply --check fix.patch", "read"),
    ("git apply fix.patch", "mutating"),
    ("git clean -n", "read"),
    ("git clean -fd", "mutating"),
    ("git config --list", "read"),
    ("git config user.name x", "mutating"),
    ("sed -n '1,20p' a.py", "read"),
    ("sed -i 's/a/b/' a.py", "mutating"),
    ("sed -i.bak 's/a/b/' a.py", "mutating"),
    ("sed -Ei 's/a/b/' a.py", "mutating"),
    ("sed -e 's/x/y/' a.py", "read"),
    ("perl -pi -e 's/a/b/' a.py", "mutating"),
    ("perl -ne 'print if /x/' a.py", "default"),
    ("echo \"unbalanced", "read"),
    ("grep -r 'oops src && rm -rf build", "read"),
    ("echo 'it''s' && rm x", "mutating"),
    ("", None),
    ("   \n\t ", None),
    ("# just a comment, don't run", "read"),
    ("cd /testbed", "read"),
    ("export A=1; source .venv/bin/activate", "read"),
    ("timeout 60 pip install x", "mutating"),
    ("sudo -u root apt-get install -y jq", "mutating"),
    ("nohup python server.py > server.log 2>&1 &", "mutating"),
    ("env | grep PATH", "read"),
    ("env FOO=1 pytest", "default"),
    ("command -v python3", "read"),
    ("which python && python --version", "read"),
    ("bash -lc 'cat a.py'", "read"),
    ("bash -c \"sed -i 's/a/b/' f\"", "mutating"),
    ("bash run.sh", "default"),
    ("sh -c 'sh -c \"sh -c ls\"'", "default"),
    ("./run_tests.sh", "default"),
    ("find . -name '*.py' -exec grep -l x {} \\;", "read"),
    ("find . -name '*.pyc' -exec rm {} +", "mutating"),
    ("find . -name '*.pyc' -delete", "mutating"),
    ("find . -name x | xargs rm", "mutating"),
    ("find . -name x | xargs -I {} grep -n y {}", "read"),
    ("python -m pip install -e .", "mutating"),
    ("python3 -m pip list", "read"),
    ("python -m pytest -x", "default"),
    ("python setup.py install", "mutating"),
    ("python setup.py build_ext --inplace", "default"),
    ("tar tzf x.tar.gz", "read"),
    ("tar -tzf x.tar.gz", "read"),
    ("tar xzf x.tar.gz", "mutating"),
    ("npm test", "default"),
    ("npm install", "mutating"),
    ("npm ls", "read"),
    ("make", "default"),
    ("sleep 10 && tail -5 log.txt", "poll"),
    ("sleep 5", "exempt"),
    ("cd /repo && sleep 30", "exempt"),
    ("wait", "exempt"),
    ("sleep 5 && echo done", "poll"),
    ("sleep 5 > /tmp/out", "mutating"),
    ("find . -name x -exec sleep 1 \\;", "read"),
    ("tail -f server.log", "poll"),
    ("sleep 5; python train.py", "default"),
    ("(cd sub && make test)", "default"),
    ("(cd sub && rm -rf build)", "mutating"),
    ("for f in *.py; do wc -l $f; done", "read"),
    ("for f in *.py; do sed -i 's/a/b/' $f; done", "mutating"),
    ("if grep -q x f; then echo yes; else rm f; fi", "mutating"),
    ("while read f; do cat $f; done < list.txt", "read"),
    ("case $x in a|b) echo a;; *) rm y;; esac", "mutating"),
    ("case $x in rm|mv) echo word;; esac", "read"),
    ("n=$(grep -c x f); echo $n", "read"),
    ("rg -n x -f <(printf 'a\\nb') .", "read"),
    ("diff <(sort a) <(sort b)", "read"),
    ("ls \\\n  -la", "read"),
    ("curl -sL https://example.com | head", "default"),
    ("curl -sSLo out.tgz https://example.com", "mutating"),
    ("kill -9 1234", "mutating"),
    ("chmod +x run.sh && ./run.sh", "default"),  # the script's run: chmod only prepares it
    ("mkdir -p out && touch out/x", "mutating"),
    ("open reproduce.py", "read"),
    ("edit 12:14", "mutating"),
    ("ruff format --check .", "read"),
    ("ruff format .", "mutating"),
    ("black --check src", "read"),
    ("! grep -q x f", "read"),
    ("docker-compose down -v && docker-compose up -d", "mutating"),  # the standalone CLI
    ("docker-compose restart bff", "mutating"),
    ("docker compose stop bff", "mutating"),
    ("docker-compose logs bff", "read"),
    ("docker compose ps", "read"),
    ("docker-compose exec bff ls", "default"),
    ("kubectl rollout status deploy/web", "poll"),  # waits for the rollout: a poll, no change
    ("kubectl rollout restart deploy/web", "mutating"),
    ("kubectl wait --for=condition=ready pod/x", "poll"),
    ("kubectl top pods", "read"),
    ("gh run watch 123", "poll"),
    ("gh run list --limit 1", "poll"),  # a CI run's status, looked at again until it is done
    ("gh pr checks 5 --watch", "poll"),
    ("gh pr view 5", "read"),
    ("helm status web", "read"),
]


class TestTrickyCommands:
    @pytest.mark.parametrize(("command", "kind"), TRICKY, ids=[c[:40] for c, _ in TRICKY])
    def test_kind(self, classifier: CallKindClassifier, command: str, kind: str | None) -> None:
        """Compound lines, redirections, heredocs, wrappers and quoting get their kind."""
        assert classifier.command_kind(command) == kind

    def test_huge_command_is_cut(self, classifier: CallKindClassifier) -> None:
        """Only the first MAX_COMMAND_CHARS characters are read: a late write is not seen."""
        padding = "echo " + "x" * (2 * MAX_COMMAND_CHARS)
        assert classifier.command_kind(padding + "; rm -rf build") == "read"
        assert classifier.command_kind("rm -rf build; " + padding) == "mutating"

    def test_huge_heredoc_write_is_seen(self, classifier: CallKindClassifier) -> None:
        """A heredoc write of a 1 MB file is mutating: its first line names the file."""
        command = "cat <<'EOF' > big.py\n" + "x = 1\n" * 200_000 + "EOF"
        assert classifier.command_kind(command) == "mutating"

    @pytest.mark.parametrize("command", ["'", '"', "\\", "$(", "<<", "<<'", ")))", "(((",
                                         "a ; ; && || |", "case", "case x in", "\x00\x01",
                                         "echo ${#x}", "<(", ">", "2>&", "cat <<EOF > "])
    def test_odd_input_never_raises(self, classifier: CallKindClassifier, command: str) -> None:
        """Malformed shell text gets a kind (or None), never an exception."""
        assert classifier.command_kind(command) in (None, "read", "mutating", "default", "poll")

    def test_caches_are_bounded(self, classifier: CallKindClassifier) -> None:
        """The caches of command and argument texts hold at most 512 entries each."""
        for i in range(2000):
            assert classifier.kind("bash", json.dumps({"command": f"cat file{i}.py"})) == "read"
        assert len(classifier._outcomes) <= 512
        assert len(classifier._by_arguments) <= 512

    def test_argument_cache_keeps_tools_apart(self, classifier: CallKindClassifier) -> None:
        """The same argument text of a shell tool and of a command-word tool is read apart."""
        assert classifier.kind("bash", "-i s/a/b/ f") == "default"
        assert classifier.kind("sed", "-i s/a/b/ f") == "mutating"
        assert classifier.kind("bash", "-i s/a/b/ f") == "default"


RUNNERS = [
    # the runners of the brief: the wrapped command decides
    ("npx prettier --write src", "mutating"),
    ("pnpm exec eslint --fix .", "mutating"),
    ("bunx prettier --write .", "mutating"),
    ("uvx ruff format", "mutating"),
    ("uv run ruff format .", "mutating"),
    ("uv run black .", "mutating"),
    ("poetry run black .", "mutating"),
    ("pipx run black .", "mutating"),
    ("python -m black .", "mutating"),
    ("python3 -m isort .", "mutating"),
    ("yarn prettier --write .", "mutating"),
    ("npm exec -- prettier --write .", "mutating"),
    ("npx jest", "default"),
    ("uv run pytest", "default"),
    ("python -m pytest", "default"),
    ("python -m pip install x", "mutating"),
    ("npx tsc --noEmit", "default"),
    ("uv run python script.py", "default"),
    ("npx prettier --check .", "default"),
    ("pipx run black --check .", "read"),
    ("uvx ruff check .", "default"),
    ("uv run ruff check --fix .", "mutating"),
    # the runners' own options, versions and aliases
    ("npx -y prettier --write .", "mutating"),
    ("npx --yes -- prettier --write .", "mutating"),
    ("npx -p prettier prettier --write .", "mutating"),
    ("npx prettier@3.3.3 --write src/a.ts", "mutating"),
    ("npm exec --package=x -- prettier --write .", "mutating"),
    ("npm x prettier --write .", "mutating"),
    ("pnpm --filter web exec eslint --fix .", "mutating"),
    ("pnpm dlx prettier --write .", "mutating"),
    ("pnpx prettier --write .", "mutating"),
    ("bun x prettier --write .", "mutating"),
    ("yarn dlx prettier --write .", "mutating"),
    ("yarn run prettier --write .", "mutating"),
    ("uv run --with dep ruff format .", "mutating"),
    ("uv run -m black .", "mutating"),
    ("uv run -m pytest -x", "default"),
    ("uv run python -m black .", "mutating"),
    ("uv tool run --from ruff ruff check --fix .", "mutating"),
    ("uvx ruff@0.6.0 format src/a.py", "mutating"),
    ("uvx --from 'ruff==0.6' ruff format .", "mutating"),
    ("poetry run -C dir black .", "mutating"),
    ("poetry -C dir run black .", "mutating"),
    ("pipx run --spec black==24 black .", "mutating"),
    ("python -u -m black .", "mutating"),
    ("python -X dev -m black .", "mutating"),
    ("python -Werror -B -m pip install x", "mutating"),
    ("python -OO -m pytest", "default"),
    ("python -mpip install x", "mutating"),
    ("sudo npx prettier --write .", "mutating"),
    ("cd web && npx prettier --write src", "mutating"),
    ("bash -lc 'uv run ruff format .'", "mutating"),
    # the runner's own subcommands after its global options
    ("pnpm --filter web install", "mutating"),
    ("npm -w pkg install", "mutating"),
    ("yarn --cwd web add x", "mutating"),
    # not clear: left as before (running a program)
    ("npx -c 'prettier --write .'", "default"),
    ("pnpm exec -c 'eslint --fix .'", "default"),
    ("uv run --unknown-option x ruff format .", "default"),
    ("python -c 'import sys' -m black", "default"),
    ("python script.py -m black", "default"),
    ("npx", "default"),
    ("uv run", "default"),
    ("npm run format", "default"),
    ("yarn test", "default"),
    ("yarn run test", "default"),
    ("pnpm test", "default"),
    ("yarn watch", "default"),
    ("yarn install", "mutating"),
]


class TestPackageRunners:
    @pytest.mark.parametrize(("command", "kind"), RUNNERS, ids=[c[:40] for c, _ in RUNNERS])
    def test_kind(self, classifier: CallKindClassifier, command: str, kind: str) -> None:
        """A package runner (npx, uv run, poetry run, python -m...) gets the kind of what it
        runs; with an option whose meaning is unknown it stays a program run."""
        assert classifier.command_kind(command) == kind

    @pytest.mark.parametrize(("command", "target"), [
        ("npx prettier --write src/a.ts", "src/a.ts"),
        ("uv run ruff format src/b.py", "src/b.py"),
        ("uv run pytest tests/test_a.py -q", "tests/test_a.py"),
        ("npx eslint --fix src/a.ts src/b.ts", "src/b.ts"),
    ])
    def test_target(self, classifier: CallKindClassifier, command: str, target: str) -> None:
        """The target is that of the wrapped command: the file it changes or runs."""
        assert classifier.target("bash", {"command": command}) == target

    @pytest.mark.parametrize(("command", "target"), [
        ("cd /app/project && conda env create -f environment.yml", "/app/project/environment.yml"),
        ("cd /app && cat > src/a.py <<'EOF'\nx = 1\nEOF", "/app/src/a.py"),
        ("cd /app; cd sub && sed -i s/a/b/ ../x.py", "/app/x.py"),
        ("cd /app && sed -i s/a/b/ /etc/x.conf", "/etc/x.conf"),
        ("cd src && sed -i s/a/b/ x.py", "x.py"),  # from a directory the line does not name
        ("cd /app && pip install numpy==1.26 scipy", "scipy"),  # a package, not a path
        ("cat > a.txt; cd /x", "a.txt"),  # the cd comes after the write
    ])
    def test_target_after_cd(self, classifier: CallKindClassifier, command: str,
                             target: str) -> None:
        """A relative file after ``cd DIR`` of the same line is ``DIR``'s file: the target
        other calls name by its absolute path."""
        assert classifier.target("bash", {"command": command}) == target

    @pytest.mark.parametrize(("command", "target"), [
        ("sed -i s/a/b/ a.py && python test.py", None),
        ("cat <<'EOF' > r/i.rst\nx\nEOF\ncd r && sphinx-build . _build", None),
        ("sed -i s/a/b/ a.py && cat a.py", "a.py"),  # a read after it: still the change's
        ("sed -i s/a/b/ a.py && echo done", "a.py"),
        ("python a.py && sed -i s/a/b/ a.py", "a.py"),  # the change comes last
    ])
    def test_no_target_when_a_program_runs_after_the_change(
            self, classifier: CallKindClassifier, command: str, target: str | None) -> None:
        """A line that changes a file and then runs a program exits with the program's status:
        it stays a change, but its failure names no file."""
        assert classifier.command_kind(command) == "mutating"
        assert classifier.target("bash", {"command": command}) == target

    @pytest.mark.parametrize("command", [
        'mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR" && cargo test -p net',
        "export A=1 && mkdir -p out && cargo test", "mkdir -p build && cd build && cmake .."])
    def test_a_program_after_only_mkdir_and_chmod_is_the_lines(
            self, classifier: CallKindClassifier, command: str) -> None:
        """Making a directory or setting its mode only prepares for the program the line runs
        after it: the line is the program's, so its failure is a failing run, counted anew
        after each other change (a RepoLaunch setup rerunning such a test line after each
        install warned as a failing change of the same line). A file written before the
        program keeps the line a change."""
        assert classifier.command_kind(command) == "default"
        for changed in ("mkdir -p out && echo x > out/a && cargo test",
                        "mkdir -p out && sed -i s/a/b/ a.py && cargo test"):
            assert classifier.command_kind(changed) == "mutating"
        assert classifier.command_kind("mkdir -p out") == "mutating"

    def test_script_runner_reads_only_specific_rules(self) -> None:
        """``yarn X`` runs a package script X when there is one: only a table key with a
        subcommand or an option (``prettier --write``) makes X the command, also a user's."""
        classifier = CallKindClassifier(LoopGuardConfig.create(
            command_kinds={"biome format --write": "mutating", "lint": "read"}))
        assert classifier.command_kind("yarn biome format --write .") == "mutating"
        assert classifier.command_kind("yarn lint") == "default"


class TestArguments:
    @pytest.mark.parametrize(("arguments", "kind"), [
        ({"command": "cat a.py"}, "read"),
        ({"cmd": "rm a.py"}, "mutating"),
        ({"script": "pytest"}, "default"),
        ({"code": "ls"}, "read"),
        ({"input": "touch x"}, "mutating"),
        ({"command_line": "git status"}, "read"),
        ({"bash_command": "sed -i s/a/b/ core.py"}, "mutating"),  # a harness's own key
        ({"shell_command": "head -40 core.py"}, "read"),
        # Terminal-Bench's Terminus: keys typed into a tmux pane, Enter as a newline
        ({"keystrokes": "cat > run.sh << 'EOF'\necho hi\nEOF\n", "is_blocking": True,
          "timeout_sec": 5}, "mutating"),
        ({"keystrokes": "ls -la\n", "is_blocking": True}, "read"),
        ({"keystrokes": "C-c", "is_blocking": False}, "default"),
        ({"commands": ["cd x", "git diff"]}, "read"),
        ({"commands": ["git diff", "git commit -m x"]}, "mutating"),
        ('{"command": "sed -i s/a/b/ f", "timeout": 10}', "mutating"),
        (b'{"command": "cat f"}', "read"),
        ("grep -n x f", "read"),
        ({"command": ["bash", "-lc", "cd x && pytest"]}, "default"),
        ({"command": ["bash", "-lc", "echo x > f"]}, "mutating"),
        ({"command": ["ls", "-la", "a b"]}, "read"),
        (["rm", "-f", "x"], "mutating"),
        ('["bash", "-c", "cat x"]', "read"),
        ({"action": {"type": "exec", "command": ["rm", "x"]}}, "mutating"),
        ({"command": ["apply_patch", "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n"
                                     "*** End Patch\n"]}, "mutating"),  # Codex CLI's edit
        ({"command": ["bash", "-lc", "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: b.py\n"
                                     "+x = 1\n*** End Patch\nEOF"]}, "mutating"),
        ("{not json} > out.txt", "mutating"),
    ], ids=lambda v: str(v)[:40])
    def test_command_text(self, classifier: CallKindClassifier, arguments: Any,
                          kind: str) -> None:
        """The command comes from the usual argument keys, JSON text, plain text or argv."""
        assert classifier.kind("bash", arguments) == kind

    @pytest.mark.parametrize("arguments", [
        None, {}, {"timeout": 5}, 42, {"command": 3}, {"command": ["ls", 1]}, "",
        '{"command": ""}', '{"command": "cat <<EOF > f\\n' + "x" * (1 << 20) + '"}'],
        ids=lambda v: str(v)[:30])
    def test_no_command_text(self, classifier: CallKindClassifier, arguments: Any) -> None:
        """Without command text (arguments not captured) a shell call has no kind of its own."""
        assert classifier.kind("bash", arguments) is None


class TestModes:
    @pytest.mark.parametrize(("tool", "mode"), [
        ("bash", "shell"), ("Bash", "shell"), ("execute_bash", "shell"),
        ("run_terminal_cmd", "shell"), ("mcp__desktop__execute_command", "shell"),
        ("command", "shell"),  # RepoLaunch's shell action
        ("str_replace_editor", "editor"), ("str_replace_based_edit_tool", "editor"),
        ("Edit", "editor"), ("Read", "editor"), ("view_file", "editor"),
        ("cat", "command"), ("sed", "command"), ("git", "command"), ("Grep", "command"),
        ("search", None), ("read_file", None), ("edit_file", None), ("write_file", None),
        ("python", None), ("test", None), ("echo", None), ("find", None),
    ])
    def test_default_modes(self, classifier: CallKindClassifier, tool: str,
                           mode: str | None) -> None:
        """Shell, editor and command-word tools are found by name; listed tools keep their kind."""
        assert classifier.mode(tool) == mode

    def test_other_tools_are_not_classified(self, classifier: CallKindClassifier) -> None:
        """A tool that is neither shell nor editor nor a command word gets None."""
        assert classifier.kind("web_search", {"command": "rm -rf /"}) is None

    def test_command_word_tool(self, classifier: CallKindClassifier) -> None:
        """A tool named after a command is a shell call of that command with its arguments."""
        assert classifier.kind("sed", {"args": "-n 1,5p a.py"}) == "read"
        assert classifier.kind("sed", "-i s/a/b/ a.py") == "mutating"
        assert classifier.kind("sed", {"command": "sed -i s/a/b/ a.py"}) == "mutating"
        assert classifier.kind("git", "diff") == "read"
        assert classifier.kind("git", {"command": "commit -m x"}) == "mutating"
        assert classifier.kind("cat", {"path": "a.py"}) == "read"
        assert classifier.kind("rm", None) == "mutating"

    def test_command_word_tools_off(self) -> None:
        """``command_word_tools = false`` leaves tools named like commands to their names."""
        classifier = CallKindClassifier(LoopGuardConfig.create(command_word_tools=False))
        assert classifier.mode("cat") is None
        assert classifier.mode("bash") == "shell"

    def test_configured_kind_wins(self) -> None:
        """A tool with a configured kind is never classified per call."""
        config = LoopGuardConfig.create(tools={"bash": {"kind": "exempt"}})
        assert CallKindClassifier(config).kind("bash", {"command": "rm x"}) is None

    def test_listed_tools_keep_their_kind(self) -> None:
        """A tool listed in mutating_tools or read_tools is not classified per call."""
        config = LoopGuardConfig.create(mutating_tools=["bash"], read_tools=["cat"])
        classifier = CallKindClassifier(config)
        assert classifier.mode("bash") is None
        assert classifier.mode("cat") is None

    def test_per_tool_flags(self) -> None:
        """``shell = true`` / ``editor = true`` classify a tool; ``false`` turns it off."""
        config = LoopGuardConfig.create(tools={
            "sandbox": {"shell": True}, "exec": {"shell": False}, "nb": {"editor": True},
            "cat": {"shell": False}, "Edit": {"editor": False}})
        classifier = CallKindClassifier(config)
        assert classifier.kind("sandbox", {"command": "rm x"}) == "mutating"
        assert classifier.mode("exec") is None
        assert classifier.mode("cat") is None
        assert classifier.mode("Edit") is None
        assert classifier.kind("nb", {"command": "view"}) == "read"

    def test_custom_tool_lists(self) -> None:
        """``shell_tools`` and ``editor_tools`` replace the default names."""
        config = LoopGuardConfig.create(shell_tools=["Sandbox"], editor_tools=["notebook"])
        classifier = CallKindClassifier(config)
        assert classifier.mode("sandbox") == "shell"
        assert classifier.mode("bash") is None
        assert classifier.kind("notebook", {"command": "insert"}) == "mutating"


class TestEditor:
    @pytest.mark.parametrize(("tool", "arguments", "kind"), [
        ("str_replace_editor", {"command": "view", "path": "/a.py"}, "read"),
        ("str_replace_editor", {"command": "create", "path": "/a.py", "file_text": "x"},
         "mutating"),
        ("str_replace_editor", {"command": "str_replace", "path": "/a.py"}, "mutating"),
        ("str_replace_editor", {"command": "insert", "path": "/a.py"}, "mutating"),
        ("str_replace_editor", {"command": "undo_edit", "path": "/a.py"}, "mutating"),
        ("str_replace_based_edit_tool", '{"command": "view", "path": "/a.py"}', "read"),
        ("text_editor", {"command": "write"}, "mutating"),
        ("edit", {"edits": [], "path": "a.py"}, "mutating"),
        ("Write", {"file_path": "a.py", "content": "x"}, "mutating"),
        ("Read", {"file_path": "a.py"}, "read"),
        ("view_file", {"path": "a.py"}, "read"),
        ("create_file", {"path": "a.py"}, "mutating"),
        ("file_editor", {"command": "view", "path": "/a.py"}, "read"),  # OpenHands SDK
        ("file_editor", {"command": "str_replace", "path": "/a.py"}, "mutating"),
        ("replace_string_in_file", {"filePath": "a.py", "oldString": "x"}, "mutating"),
        ("apply_diff", {"path": "a.py", "diff": "x"}, "mutating"),
        ("replace_file_content", {"TargetFile": "a.py"}, "mutating"),
        ("replace_file_str", {"file_name": "a.md", "old_str": "x", "new_str": "y"},
         "mutating"),  # browser-use
        ("str_replace_editor", {"command": "frobnicate"}, "mutating"),
        ("str_replace_editor", None, "mutating"),
    ])
    def test_kind(self, classifier: CallKindClassifier, tool: str, arguments: Any,
                  kind: str) -> None:
        """An editor call's kind comes from its subcommand, else from the tool's name."""
        assert classifier.kind(tool, arguments) == kind


class TestTargets:
    @pytest.mark.parametrize(("tool", "arguments", "target"), [
        ("bash", {"command": "cat <<'EOF' > test_x.py\nx\nEOF"}, "test_x.py"),
        ("bash", {"command": "cd /testbed && sed -i 's/a/b/' pkg/a.py"}, "/testbed/pkg/a.py"),
        ("bash", {"command": "cp a.py b.py"}, "b.py"),
        ("bash", {"command": "cd x && python reproduce.py 2>&1 | tail"}, "reproduce.py"),
        ("bash", {"command": "python -m pytest tests/test_a.py -q"}, "tests/test_a.py"),
        ("bash", {"command": "./run.sh --fast"}, "./run.sh"),
        ("bash", {"command": "head -n 20 a.py"}, "a.py"),
        ("bash", {"command": "git diff"}, None),
        ("bash", {"command": "python -c 'print(1)'"}, None),
        ("bash", None, None),
        ("str_replace_editor", {"command": "view", "path": "/a.py"}, "path=/a.py"),
        ("Edit", {"file_path": "b.py", "old_string": "x"}, "file_path=b.py"),
        ("apply_patch", {"input": "*** Begin Patch\n*** Update File: src/m.py\n@@\n-x\n+y"},
         "src/m.py"),
        # Codex CLI's edits through its shell tool: the patch's file, as for the tool
        ("shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/m.py\n"
                                              "@@\n-x\n+y\n*** End Patch\n"]}, "src/m.py"),
        ("shell", {"command": ["bash", "-lc", "apply_patch <<'EOF'\n*** Begin Patch\n"
                                              "*** Add File: b.py\n+x = 1\n*** End Patch\nEOF"]},
         "b.py"),
        ("bash", {"command": "git apply <<'EOF'\n--- a/c.py\n+++ b/c.py\n@@\n-x\n+y\nEOF"},
         "c.py"),
        ("fetch", {"url": "https://example.com/a"}, "url=https://example.com/a"),
        ("get_order", {"order_id": 42, "verbose": True}, "order_id=42"),
        ("pay", {"order_id": 7, "payment_method_id": "gc_1"}, "order_id=7, payment_method_id=gc_1"),
        ("search", {"query": "paris"}, None),
        ("search", "not a mapping", None),
    ])
    def test_target(self, classifier: CallKindClassifier, tool: str, arguments: Any,
                    target: str | None) -> None:
        """A call's target is the file it writes or reads, the script it runs, or its id."""
        assert classifier.target(tool, arguments) == target


class TestConfigTable:
    def test_extend(self) -> None:
        """An entry of ``command_kinds`` classifies a command the built-in table does not know."""
        config = LoopGuardConfig.create(command_kinds={"deploy-tool push": "mutating",
                                                       "./report.sh": "read"})
        classifier = CallKindClassifier(config)
        assert classifier.command_kind("deploy-tool push prod") == "mutating"
        assert classifier.command_kind("deploy-tool status") == "default"
        assert classifier.command_kind("./report.sh --all") == "read"

    def test_override(self) -> None:
        """An entry wins over the built-in one for the same command."""
        config = LoopGuardConfig.create(command_kinds={"cat": "default", "git  diff": "exempt"})
        classifier = CallKindClassifier(config)
        assert classifier.command_kind("cat a.py") == "default"
        assert classifier.command_kind("git diff") == "exempt"
        assert classifier.command_kind("git status && git diff") == "read"
        assert DEFAULT_COMMAND_KINDS["cat"] == "read"

    def test_keys_are_folded(self) -> None:
        """Whitespace inside a key is folded: ``git   diff`` is ``git diff``."""
        config = LoopGuardConfig.create(command_kinds={" terraform   apply ": "mutating"})
        assert dict(config.command_kinds) == {"terraform apply": "mutating"}

    @pytest.mark.parametrize(("value", "message"), [
        ({"terraform apply": "changes"},
         r"command_kinds\.terraform apply must be one of \('read', 'mutating', 'poll', "
         r"'exempt', 'default'\), got 'changes'"),
        ({"  ": "read"}, r"command_kinds: every key must be a command"),
        ("make=default", r"command_kinds must be a table of command -> kind"),
        (["make"], r"command_kinds must be a table"),
    ])
    def test_validation_names_the_setting(self, value: Any, message: str) -> None:
        """A bad table raises ConfigError naming the setting and the bad entry."""
        with pytest.raises(ConfigError, match=message):
            LoopGuardConfig.create(command_kinds=value)

    def test_from_env(self) -> None:
        """``LOOPGUARD_COMMAND_KINDS`` takes command=kind pairs."""
        config = LoopGuardConfig.from_env(
            {"LOOPGUARD_COMMAND_KINDS": "terraform apply=mutating, make = default"})
        assert dict(config.command_kinds) == {"terraform apply": "mutating", "make": "default"}

    @pytest.mark.parametrize(("raw", "message"), [
        ("make:default", r"LOOPGUARD_COMMAND_KINDS must be a table of command -> kind"),
        ("make=build", r"LOOPGUARD_COMMAND_KINDS\.make must be one of"),
    ])
    def test_from_env_errors(self, raw: str, message: str) -> None:
        """A malformed ``LOOPGUARD_COMMAND_KINDS`` raises naming the variable."""
        with pytest.raises(ConfigError, match=message):
            LoopGuardConfig.from_env({"LOOPGUARD_COMMAND_KINDS": raw})

    def test_from_toml(self, tmp_path: Path) -> None:
        """``[loopguard.command_kinds]`` and per-tool ``shell``/``editor`` load from TOML."""
        path = tmp_path / "loopguard.toml"
        path.write_text('[loopguard]\nshell_tools = ["sandbox"]\n'
                        '[loopguard.command_kinds]\n"terraform apply" = "mutating"\n'
                        '[loopguard.tools.nb]\neditor = true\nstagnation_warn = 4\n',
                        encoding="utf-8")
        config = LoopGuardConfig.from_file(path)
        classifier = CallKindClassifier(config)
        assert classifier.kind("sandbox", "terraform apply") == "mutating"
        assert classifier.kind("nb", {"command": "view"}) == "read"
        assert config.threshold("nb", "stagnation_warn") == 4

    def test_env_kind_keeps_the_files_flags(self, tmp_path: Path) -> None:
        """``LOOPGUARD_TOOL_KINDS`` sets a kind and keeps the file's flags and thresholds."""
        path = tmp_path / "loopguard.toml"
        path.write_text("[loopguard.tools.box]\nshell = true\nstagnation_warn = 4\n",
                        encoding="utf-8")
        config = LoopGuardConfig.load(path, environ={"LOOPGUARD_TOOL_KINDS": "box=read"})
        override = config.tools["box"]
        assert (override.kind, override.shell, dict(override.thresholds)) == (
            "read", True, {"stagnation_warn": 4})

    @pytest.mark.parametrize(("tools", "message"), [
        ({"x": {"shell": "yes"}}, r"tools\.x\.shell must be true or false, got 'yes'"),
        ({"x": {"editor": 1}}, r"tools\.x\.editor must be true or false, got 1"),
        ({"x": {"shell": True, "editor": True}},
         r"tools\.x: shell and editor cannot both be true"),
    ])
    def test_per_tool_flag_errors(self, tools: dict[str, Any], message: str) -> None:
        """Bad per-tool flags raise ConfigError naming the tool and the flag."""
        with pytest.raises(ConfigError, match=message):
            LoopGuardConfig.create(tools=tools)

    @pytest.mark.parametrize("name", ["shell_tools", "editor_tools"])
    def test_tool_lists_are_validated(self, name: str) -> None:
        """``shell_tools`` and ``editor_tools`` must be lists of strings."""
        with pytest.raises(ConfigError, match=rf"{name} must be a list of strings"):
            LoopGuardConfig.create(**{name: "bash"})


class _KindRecorder:
    """A detector that records the kind the engine gave each step."""

    name = "kind_recorder"

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def new_state(self) -> None:
        return None

    def observe(self, state: None, step: Any) -> None:
        self.kinds.append(step.kind)


def _bash(command: str, result: Any = "", error: bool = False) -> ToolCall:
    return ToolCall(tool="bash", arguments=json.dumps({"command": command}), result=result,
                    has_result=True, error=error, error_message="exit 1" if error else "")


class TestEngine:
    def test_steps_get_per_call_kinds(self) -> None:
        """Through ``process``, a heredoc write is mutating, a cat read, pytest default."""
        recorder = _KindRecorder()
        engine = LoopEngine(detectors=[recorder])
        run = engine.new_run()
        for call in (_bash("cat <<'EOF' > test_a.py\ndef test(): pass\nEOF"), _bash("cat a.py"),
                     _bash("cd /repo && pytest -q"),
                     ToolCall(tool="str_replace_editor", arguments={"command": "view",
                                                                    "path": "/a.py"}),
                     ToolCall(tool="str_replace_editor", arguments={"command": "str_replace",
                                                                    "path": "/a.py"}),
                     ToolCall(tool="bash"), ToolCall(tool="search", arguments={"q": "x"})):
            engine.process(run, call)
        assert recorder.kinds == ["mutating", "read", "default", "read", "mutating", "default",
                                  "default"]

    def test_non_shell_tools_keep_the_per_tool_cache(self) -> None:
        """A tool that is not classified per call is cached with its kind once."""
        engine = LoopEngine()
        run = engine.new_run()
        engine.process(run, ToolCall(tool="edit_file", arguments={"path": "a"}))
        engine.process(run, _bash("ls"))
        assert engine._kinds["edit_file"] == "mutating"
        assert engine._kinds["bash"] != "mutating"

    def test_configured_kind_wins(self) -> None:
        """``tools.bash.kind`` is the kind of every bash call."""
        recorder = _KindRecorder()
        engine = LoopEngine(LoopGuardConfig.create(tools={"bash": {"kind": "exempt"}}),
                            detectors=[recorder])
        run = engine.new_run()
        engine.process(run, _bash("rm -rf build"))
        engine.process(run, _bash("cat a.py"))
        assert recorder.kinds == ["exempt", "exempt"]

    def test_in_progress_shell_result_is_poll(self) -> None:
        """A default shell call whose result reports an in-progress state counts as poll."""
        recorder = _KindRecorder()
        engine = LoopEngine(detectors=[recorder])
        run = engine.new_run()
        engine.process(run, _bash("./job status", result='{"status": "running"}'))
        engine.process(run, _bash("cat log", result='{"status": "running"}'))
        assert recorder.kinds == ["poll", "read"]

    def test_failing_heredoc_write_is_a_mutating_failure(self) -> None:
        """The same heredoc write failing 3 times warns as a mutating failure; a cat does not."""
        engine = LoopEngine()
        run = engine.new_run()
        write = "cat <<'EOF' > /etc/app.conf\nkey = 1\nEOF"
        decisions = [engine.process(run, _bash(write, "Permission denied", True))
                     for _ in range(3)]
        assert decisions[-1].action is Action.WARN
        assert {e.detector for e in decisions[-1].evidence} >= {"mutating_failure"}
        other = engine.new_run()
        reads = [engine.process(other, _bash("cat missing.txt", "No such file", True))
                 for _ in range(2)]
        assert all("mutating_failure" not in {e.detector for e in d.evidence} for d in reads)

    def test_repeated_cat_is_a_reread(self) -> None:
        """The same ``cat`` with unchanged output, amid other reads, is a re-read."""
        engine = LoopEngine()
        run = engine.new_run()
        decisions = []
        for other in ("b.py", "c.py", "d.py"):
            decisions.append(engine.process(run, _bash("cat a.py", "same content")))
            engine.process(run, _bash(f"cat {other}", f"content of {other}"))
        assert "reread" in {e.detector for e in decisions[-1].evidence}

    def test_precheck_uses_the_call_kind(self) -> None:
        """``precheck`` predicts the mutating-failure stop of a 4th identical failing write."""
        engine = LoopEngine(LoopGuardConfig.create(mode="enforce"))
        write = "echo 'x' > /etc/app.conf"
        run = engine.new_run()
        for _ in range(3):
            engine.process(run, _bash(write, "Permission denied", True))
        decision = engine.precheck(run, "bash", json.dumps({"command": write}))
        assert decision.action is Action.STOP
        assert "mutating_failure" in {e.detector for e in decision.evidence}
        run = engine.new_run()
        for _ in range(2):
            engine.process(run, _bash("cat missing.txt", "No such file", True))
        decision = engine.precheck(run, "bash", json.dumps({"command": "cat missing.txt"}))
        assert "mutating_failure" not in {e.detector for e in decision.evidence}

    def test_wait_between_checks_that_progress_is_quiet(self) -> None:
        """``sleep 5`` between polls whose output grows is never stagnation; a stuck check is.

        The wait returns nothing each time by design: only the check after it reports a state.
        """
        engine = LoopEngine()
        run = engine.new_run()
        actions = []
        for index in range(20):
            actions.append(engine.process(run, _bash("tail -5 build.log", f"step {index}")).action)
            actions.append(engine.process(run, _bash("sleep 5")).action)
        assert set(actions) == {Action.CONTINUE}
        stuck = engine.new_run()
        for _ in range(3):
            decision = engine.process(stuck, _bash("tail -5 build.log", "step 3"))
            engine.process(stuck, _bash("sleep 5"))
        assert decision.action is Action.WARN
        assert "stagnation" in {e.detector for e in decision.evidence}
