"""Python scripts given inline on a command line that write a file are edits of that file.

Codex CLI and other coding agents edit files with ``python3 - <<'PY' ... PY`` when their edit
tool rejects a patch. A success on the file, whatever tool wrote it, ends the streak of rejected
edits of it (spec: ``mutating_failure``, "with no success on that target in between"): a real
Codex session was stopped at its 4th rejected ``apply_patch``, two of them before and two after
a working Python edit of the same file.
"""

from __future__ import annotations

import pytest
from _calls import by, call, run

from otel_loopguard.kinds._shell import ShellReader, default_rules

SPEC = "/home/dev/project/specs/spec.md"
PY_EDIT = (f"python3 - <<'PY'\nfrom pathlib import Path\npath = Path('{SPEC}')\n"
           "text = path.read_text()\npath.write_text(text.replace('a', 'b'))\nPY")
REJECTED = "apply_patch verification failed: Failed to find expected lines in " + SPEC


@pytest.fixture(scope="module")
def reader() -> ShellReader:
    return ShellReader(default_rules())


@pytest.mark.parametrize(("line", "outcome"), [
    (PY_EDIT, ("mutating", SPEC)),
    ("python3 -c \"open('notes.txt', 'w').write('x')\"", ("mutating", "notes.txt")),
    ("cd /srv/app && python3 <<EOF\nopen('out.json', 'a').write('{}')\nEOF",
     ("mutating", "/srv/app/out.json")),
    ("python -u - <<\"EOF\"\nimport json\njson.dump(d, open('o.json', 'w'))\nEOF",
     ("mutating", "o.json")),
    # two files named: a change, of no one file
    ("python3 - <<'PY'\nfrom pathlib import Path\nPath('b.txt').write_text("
     "Path('a.txt').read_text())\nPY", ("mutating", None)),
    # a change and then a program run: the line's exit status is the program's
    ("python3 - <<'PY'\nopen('b.txt', 'w')\nPY\npytest -q", ("mutating", None)),
])
def test_a_script_that_writes_a_file_changes_it(reader: ShellReader, line: str,
                                                outcome: tuple[str, str | None]) -> None:
    assert reader.analyze(line) == outcome


@pytest.mark.parametrize("line", [
    "python3 - <<'PY'\nprint(open('a.txt').read())\nPY",
    "python3 -c \"import sys; print(sys.version)\"",
    "python3 -c \"open('a.txt', 'rb').read()\"",
    "python3 script.py out.txt",
    "python -m pytest <<EOF\nopen('b', 'w')\nEOF",  # the module reads no script
])
def test_a_script_that_writes_nothing_runs_a_program(reader: ShellReader, line: str) -> None:
    assert reader.analyze(line)[0] == "default"


def _shell(command: str, result: str = "", error: str | None = None) -> dict[str, object]:
    return call("shell_command", {"command": command}, result, error=error)


def _patch(n: int) -> dict[str, object]:
    patch = f"*** Begin Patch\n*** Update File: {SPEC}\n@@\n-old {n}\n+new {n}\n*** End Patch"
    return call("apply_patch", {"input": patch}, error=REJECTED)


def test_a_working_script_edit_ends_the_streak_of_rejected_patches() -> None:
    """Two rejected patches, the file edited by a script, two more rejected: no finding;
    the four back to back still warn at 3 and stop at 4."""
    calls = [_patch(1), _patch(2), _shell(PY_EDIT), _shell(f"cat {SPEC}", "spec"),
             _patch(3), _patch(4)]
    assert by(run(calls), "mutating_failure") == {}
    assert by(run([_patch(n) for n in range(4)]), "mutating_failure") == {3: "warn", 4: "stop"}
    edit = call("edit_file", {"path": SPEC, "old": "a", "new": "b"}, "ok")  # path=...
    assert by(run([_patch(1), _patch(2), edit, _patch(3), _patch(4)]), "mutating_failure") == {}


def test_a_success_of_another_tool_elsewhere_or_on_a_record_does_not_end_it() -> None:
    """Only the same file ends the streak: a script writing another file does not, nor does
    another tool's success on the same id (an id names a record of its own tool's)."""
    other = PY_EDIT.replace(SPEC, "/home/dev/project/other.md")
    calls = [_patch(1), _patch(2), _shell(other), _patch(3), _patch(4)]
    assert by(run(calls), "mutating_failure") == {4: "warn", 5: "stop"}
    failed = [call("write_file", {"id": "42", "content": f"v{n}"}, error="record is locked")
              for n in range(4)]
    records = [*failed[:2], call("edit_file", {"id": "42", "text": "x"}, "ok"), *failed[2:]]
    assert by(run(records), "mutating_failure") == {4: "warn", 5: "stop"}
    same_tool = [*failed[:2], call("write_file", {"id": "42", "content": "x"}, "ok"),
                 *failed[2:]]
    assert by(run(same_tool), "mutating_failure") == {}


def test_each_heredoc_is_its_own_interpreters(reader: ShellReader) -> None:
    """A line that patches with one script and tests with another: the test run decides the
    line's exit status (no target), as for ``sed -i ... && pytest``; two scripts that write
    nothing leave the line a program run."""
    patch = "python - <<'PY'\nfrom pathlib import Path\nPath('m.py').write_text('x')\nPY"
    check = "python - <<'PY'\nimport m\nprint(m.x)\nPY"
    assert reader.analyze(f"cp m.py m.py.bak && {patch}\n{check}") == ("mutating", None)
    assert reader.analyze(f"{check}\n{check}") == ("default", None)
    assert reader.analyze(f"{check}\n{patch}") == ("mutating", "m.py")
