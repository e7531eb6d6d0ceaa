"""``check``'s progress on stderr: across the files of a directory, on a terminal only."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from otel_loopguard.cli import main

ROOT = Path(__file__).resolve().parent.parent
LOOPING = ROOT / "examples" / "traces" / "looping_agent.jsonl"
HEALTHY = ROOT / "examples" / "traces" / "healthy_agent.jsonl"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


@pytest.fixture(name="traces")
def _traces(tmp_path: Path) -> Path:
    """A directory of 40 trace files (in two sub-folders), the looping example in each."""
    for index in range(40):
        folder = tmp_path / f"day-{index % 2}"
        folder.mkdir(exist_ok=True)
        shutil.copy(LOOPING, folder / f"run-{index:03d}.jsonl")
    return tmp_path


class TestProgress:
    def test_directory_progress_on_a_terminal(self, traces: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """On a terminal, stderr names the file reached ([i/n]) and ends with what was read;
        stdout (the report) has none of it."""
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main(["check", "--format", "json", str(traces)]) == 1
        err = terminal.getvalue()
        first = err.split("\r\x1b[K")[1]
        assert first.startswith("[1/40] ") and first.endswith("/day-0/run-000.jsonl")
        assert err.count("\r\x1b[K") >= 2  # the first file, then the last line at least
        out = capsys.readouterr().out
        spans = json.loads(out)["summary"]["spans"]
        assert spans == 40 * 14
        assert err.endswith(f"\r\x1b[K40 files, {spans:,} spans read\n")
        assert err.count("\n") == 1
        assert "\r" not in out and "[1/40]" not in out

    def test_redraws_are_throttled(self, traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A redraw at most every 0.1 s: 40 small files read at once draw far fewer lines."""
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        main(["check", str(traces)])
        assert terminal.getvalue().count("\r\x1b[K") < 40

    def test_no_progress_when_stderr_is_not_a_terminal(
            self, traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Into a pipe or a CI log, stderr carries no progress at all."""
        assert main(["check", str(traces)]) == 1
        err = capsys.readouterr().err
        assert "\r" not in err and "files," not in err and "[1/40]" not in err

    def test_no_progress_for_one_small_file(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A single file under 8 MiB reads too fast to need any."""
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        main(["check", str(LOOPING)])
        assert terminal.getvalue() == ""


def _filler_lines(spans: int, per_line: int = 1000) -> str:
    """Lines of one other trace's small spans: after 10,000 of them a finished trace is released
    and reported while the input is still being read."""
    lines = []
    for start in range(0, spans, per_line):
        batch = [{"traceId": "ab" * 16, "spanId": f"{index + 1:016x}", "name": "step",
                  "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
                 for index in range(start, min(start + per_line, spans))]
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}))
    return "\n".join(lines) + "\n"


def _shown(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Check ``folder`` with stdout and stderr on one terminal; return the lines it shows (the
    text after each line's last "erase the line")."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    main(["check", "-q", "--color", "never", str(folder)])
    return [line.rsplit("\r\x1b[K", 1)[-1] for line in terminal.getvalue().split("\n")]


def test_a_run_reported_while_the_progress_shows_starts_a_clean_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run released while its file's progress line shows is not glued to that line."""
    (tmp_path / "a.jsonl").write_text(LOOPING.read_text(encoding="utf-8")
                                      + _filler_lines(10_500), encoding="utf-8")
    shutil.copy(HEALTHY, tmp_path / "b.jsonl")
    flagged = [line for line in _shown(tmp_path, monkeypatch) if "6143f831f09ff9b0" in line]
    assert flagged == ["STOP  run 6143f831f09ff9b0e86f1d11d41297b6 [support_triage@v3]: "
                       "7 tool calls"]


def test_a_bad_record_named_while_the_progress_shows_starts_a_clean_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad record's message on stderr is not glued to the progress line either."""
    first = tmp_path / "a.jsonl"
    first.write_text("{bad\n" + LOOPING.read_text(encoding="utf-8"), encoding="utf-8")
    shutil.copy(HEALTHY, tmp_path / "b.jsonl")
    assert f"otel-loopguard: {first}:1: invalid JSON: Expecting property name enclosed in " \
           "double quotes at column 2" in _shown(tmp_path, monkeypatch)


def test_strict_stop_message_starts_a_clean_line(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--strict``'s one line for the bad record that stops it is not glued to the progress."""
    first = tmp_path / "a.jsonl"
    first.write_text("{bad\n", encoding="utf-8")
    shutil.copy(HEALTHY, tmp_path / "b.jsonl")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["check", "--strict", str(tmp_path)]) == 2
    assert terminal.getvalue().endswith(
        f"\r\x1b[Kotel-loopguard: {first}:1: invalid JSON: Expecting property name enclosed "
        "in double quotes at column 2\n")
