"""PowerShell lines get the kind of what they do, as POSIX lines do (Codex CLI on Windows).

Codex CLI on Windows sends ``["powershell.exe", "-NoLogo", "-Command", SCRIPT]``; read as a
POSIX line, a ``Set-Content`` was a program run, so the reads around it looked repeated: a real
session, replayed with arguments only, got two ``repeat`` warnings on a file re-read after each
of its edits.
"""

from __future__ import annotations

import json

import pytest
from _calls import by, call, run

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.kinds import CallKindClassifier


def _ps(script: str) -> dict[str, object]:
    return {"command": ["powershell.exe", "-NoLogo", "-Command", script],
            "workdir": "C:\\Users\\dev\\repo"}


@pytest.fixture(scope="module")
def classifier() -> CallKindClassifier:
    return CallKindClassifier(LoopGuardConfig())


@pytest.mark.parametrize(("arguments", "kind", "target"), [
    (_ps("Get-Content -Raw -Path '.specify/memory/constitution.md'"), "read",
     ".specify/memory/constitution.md"),
    (_ps("Get-ChildItem -Recurse -Path '.specify'"), "read", ".specify"),
    (_ps("Test-Path '.specify/templates/commands'"), "read", ".specify/templates/commands"),
    (_ps("Set-Content -Path 'docs/a.md' -Value @'\nline one\n'@"), "mutating", "docs/a.md"),
    (_ps("$path = '.specify/templates/plan-template.md';\n$content = Get-Content -Raw -Path "
         "$path;\n$content = $content -replace 'a','b';\nSet-Content -Path $path -Value $content"),
     "mutating", ".specify/templates/plan-template.md"),
    (_ps("Copy-Item a.txt -Destination b.txt"), "mutating", "b.txt"),
    (_ps("if (Test-Path out) { Remove-Item out -Recurse -Force }"), "mutating", "out"),
    (_ps("[IO.File]::WriteAllText('b.txt', $text)"), "mutating", None),
    (_ps("Get-Process | Select-Object -First 5 | Out-String"), "read", None),
    (_ps("Start-Sleep -Seconds 5; Get-Content build.log -Tail 20"), "poll", "build.log"),
    (_ps("Start-Sleep -Seconds 5"), "exempt", None),
    (_ps("git status; Get-Content README.md"), "read", "README.md"),
    (_ps("python -m pytest -q"), "default", None),
    (_ps("Invoke-Build -Task Test"), "default", None),
    ({"command": "Get-Content -Raw README.md"}, "read", "README.md"),
    ({"command": "Set-Content notes.txt 'done'"}, "mutating", "notes.txt"),
])
def test_a_powershell_line_gets_the_kind_of_its_strongest_command(
        classifier: CallKindClassifier, arguments: dict[str, object], kind: str,
        target: str | None) -> None:
    text = json.dumps(arguments)
    assert classifier.kind("shell", text) == kind
    assert classifier.target("shell", text) == target


@pytest.mark.parametrize("command", [
    "apt-get install -y jq", "docker-compose up -d", "git status", "if [ -f x ]; then rm x; fi",
    "X=1 make", "echo $HOME > where.txt",
])
def test_a_posix_line_is_not_read_as_powershell(classifier: CallKindClassifier,
                                                command: str) -> None:
    """Hyphenated POSIX commands are lower case, and POSIX assigns without ``$``."""
    reader = classifier._reader  # the POSIX reader's own answer
    assert classifier.command_kind(command) == reader.analyze(command)[0]


def test_reading_a_file_again_after_each_edit_is_no_repeat() -> None:
    """Arguments only (no results captured): the same Get-Content after each Set-Content of
    the file is a read with no result, and each edit a change: nothing repeats. The same
    program run again between calls that change nothing repeats."""
    def between(again: dict[str, object],
                steps: list[dict[str, object]]) -> list[dict[str, object]]:
        calls = [again]
        for step in steps:
            calls += [step, again]
        return calls

    read = call("shell", _ps("Get-Content -Raw -Path 'docs/plan.md'"))
    edits = [call("shell", _ps(f"Set-Content -Path 'docs/plan.md' -Value 'v{n}'"))
             for n in range(4)]
    assert by(run(between(read, edits)), "repeat") == {}
    build = call("shell", _ps("Invoke-Build -Task Test"))
    says = [call("shell", _ps(f"Write-Output 'v{n}'")) for n in range(4)]
    assert by(run(between(build, says)), "repeat") == {5: "warn", 7: "warn", 9: "replan"}
