"""``check`` as a CI gate: copies counted once, nothing to check is an error, never a traceback."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _otlp_files import json_line, proto_message, scripted_spans

from otel_loopguard.cli import main
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay import Checker
from otel_loopguard.replay._dedupe import _TRACE_COST, SpanDeduplicator
from otel_loopguard.testing import AgentScript
from otel_loopguard.tracefile import iter_spans

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = ROOT / "examples" / "traces" / "healthy_agent.jsonl"
LOOPING = ROOT / "examples" / "traces" / "looping_agent.jsonl"
NO_SPANS = "nothing to check: no spans in"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


def _one_401(agent: AgentScript) -> None:
    """One call failing with a permanent error: a warning at most, never a stop."""
    agent.turn()
    agent.tool("crm_lookup", {"id": 7}, error="401 unauthorized")
    agent.turn()
    agent.tool("search_kb", {"q": "refund"}, "found it")


def _check_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["check", "--format", "json", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _rename_traces(line: str, start: int) -> str:
    """Give every trace of an OTLP/JSON line a new id (``start``, ``start + 1`` ...)."""
    ids: dict[str, str] = {}

    def new(match: re.Match[str]) -> str:
        ids.setdefault(match.group(1), f"{start + len(ids):032x}")
        return f'"traceId":"{ids[match.group(1)]}"'

    return re.sub(r'"traceId":"([0-9a-f]{32})"', new, line)


class TestDuplicatedSpans:
    @pytest.fixture(name="one_401")
    def _one_401_file(self, tmp_path: Path) -> Path:
        path = tmp_path / "one-401.jsonl"
        path.write_text(json_line(scripted_spans(({}, _one_401))) + "\n", encoding="utf-8")
        return path

    def test_the_same_file_twice_is_no_false_stop(self, one_401: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
        """One 401 read twice was two identical failures, a stop and exit 1; now it is one."""
        code, once, _ = _check_json(capsys, str(one_401))
        assert code == 0
        code, twice, err = _check_json(capsys, str(one_401), str(one_401))
        assert code == 0, err
        assert twice["runs"] == once["runs"]
        assert twice["summary"]["duplicate_spans"] == once["summary"]["spans"]
        assert twice["summary"]["spans"] == 2 * once["summary"]["spans"]

    def test_an_exporter_retry_inside_one_file(self, one_401: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """The same request written twice (a retried export) is counted once; the text says
        how many copies were dropped."""
        line = one_401.read_text(encoding="utf-8")
        one_401.write_text(line + line, encoding="utf-8")
        assert main(["check", str(one_401)]) == 0
        out = capsys.readouterr().out
        spans = line.count('"spanId"')
        assert out.endswith(f"1 run, 2 tool calls; 0 flagged; {spans} duplicate spans dropped\n")

    def test_overlapping_dumps_keep_the_verdicts(self, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        """Two dumps that share a run: every run is reported once, with its own verdict."""
        looping, healthy = LOOPING.read_text().strip(), HEALTHY.read_text().strip()
        (tmp_path / "a.jsonl").write_text(f"{healthy}\n{looping}\n", encoding="utf-8")
        (tmp_path / "b.jsonl").write_text(f"{looping}\n", encoding="utf-8")
        code, doc, _ = _check_json(capsys, str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
        assert code == 1
        assert [(r["tool_calls"], r["action"]) for r in doc["runs"]] == [
            (6, "continue"), (7, "stop")]

    def test_copies_after_the_trace_was_judged(self) -> None:
        """A copy arriving after its trace was assembled (a large file passed twice) is still
        recognised, so it cannot reopen the trace as a second run."""
        spans = list(iter_spans(str(LOOPING)))
        checker = Checker(grace_spans=1)
        reports = list(checker.run(spans + spans[:3] + spans))
        assert [r.tool_calls for r in reports] == [7]
        assert checker.duplicate_spans == len(spans) + 3

    def test_only_the_same_trace_and_span_id_is_a_copy(self) -> None:
        """The same span id in another trace is another span."""
        seen = SpanDeduplicator()
        assert seen.is_new("t1", "s1") and seen.is_new("t2", "s1") and seen.is_new("t1", "s2")
        assert not seen.is_new("t1", "s1")
        assert seen.duplicates == 1

    def test_memory_is_bounded(self) -> None:
        """Old traces move to compact arrays and are forgotten beyond the cap: a copy of a
        forgotten trace is new again (that is the price of bounded memory)."""
        cap = 2 * (2 + _TRACE_COST)  # two cold traces of two spans each
        seen = SpanDeduplicator(hot_traces=2, max_cold_ids=cap)
        for trace in ("a", "b", "c", "d"):
            for span in ("1", "2"):
                assert seen.is_new(trace, span)
        assert len(seen._hot) == 2 and seen._cold_ids == cap
        assert not seen.is_new("b", "2")  # cold, still known
        assert not seen.is_new("d", "1")  # hot
        seen.is_new("e", "1")  # cools c: a is forgotten
        assert seen._cold_ids <= cap
        assert seen.is_new("a", "1")
        assert seen.duplicates == 2


class TestNothingToCheck:
    @pytest.mark.parametrize(("name", "content", "reason"), [
        ("empty.jsonl", b"", None),
        ("blank.jsonl", b"\n\n  \n", None),
        ("empty-requests.jsonl", b"{}\n{\"resourceSpans\": []}\n", None),
        ("foo.json", b'{"foo": 1}\n', ":1: not an OTLP trace request: no resourceSpans"),
        ("logs.json", b'{"resourceLogs": []}\n', None),
        ("metrics.json", b'{"resourceMetrics": []}\n', ":1: an OTLP metrics request, not traces"),
        ("zeros.bin", bytes(4096), ": unrecognised content: neither OTLP/JSON nor OTLP protobuf "
                                   "(it starts with zero bytes only)"),
        ("program.bin", b"\x7fELF\x02\x01\x01" + bytes(9)
         + b"\xd0\x01\n{\x8b\x05\x00\xff\n[\x00\x10\x00\x00\n" * 200,
         ": unrecognised content: neither OTLP/JSON nor OTLP protobuf"),
        ("tail.bin", b"\x7fELF\x02\x01\x01" + bytes(9) + b"\xd0\x01" * 100
         + b"\n{\x8b\x05\x00\xff\x10\xd0\x01",
         ": unrecognised content: neither OTLP/JSON nor OTLP protobuf"),
    ], ids=["empty", "blank", "no-spans", "not-otlp", "logs", "metrics", "zero-filled",
            "executable", "executable-last-line"])
    def test_exits_2_with_a_message(self, tmp_path: Path, name: str, content: bytes,
                                    reason: str | None,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / name
        path.write_bytes(content)
        assert main(["check", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "0 runs, 0 tool calls; 0 flagged" + (
            "; 1 bad input record skipped" if reason else "") + "\n"
        errors = captured.err.splitlines()
        if reason is None:  # empty: --allow-empty would accept it
            assert errors == [f"otel-loopguard: {NO_SPANS} {path} (--allow-empty accepts "
                              "empty input)"]
        else:  # bad: --allow-empty would not help, and is not offered
            assert errors[0].startswith(f"otel-loopguard: {path}{reason}")
            skipped = "1 bad input record" if reason.startswith(":1:") else "1 input"  # whole
            assert errors[1:] == [f"otel-loopguard: {skipped} skipped"]
        assert "Traceback" not in captured.err

    def test_allow_empty(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--allow-empty`` lets a pipeline accept an empty dump on purpose."""
        path = tmp_path / "empty.jsonl"
        path.write_bytes(b"")
        assert main(["check", "--allow-empty", str(path)]) == 0
        assert capsys.readouterr().err == ""

    def test_allow_empty_still_reports_bad_records(self, tmp_path: Path) -> None:
        path = tmp_path / "foo.json"
        path.write_text('{"foo": 1}\n', encoding="utf-8")
        assert main(["check", "--allow-empty", str(path)]) == 2

    def test_an_empty_directory(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(tmp_path)]) == 2
        assert f"{NO_SPANS} {tmp_path} " in capsys.readouterr().err

    def test_spans_without_tool_calls_are_noted(self, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """Spans but no tool call: nothing could be detected, which the gate says."""
        path = tmp_path / "chat-only.jsonl"
        path.write_text(json_line(scripted_spans(({}, lambda agent: agent.turn()))) + "\n",
                        encoding="utf-8")
        assert main(["check", str(path)]) == 0
        assert capsys.readouterr().err == ("otel-loopguard: note: none of the 2 spans is a tool "
                                           "call, so only handoff loops could have been "
                                           "detected\n")


class TestPartlyBadInput:
    def test_a_binary_first_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Binary garbage on line 1 is one bad record; the good lines after it are checked
        (the first bytes used to make the whole file unrecognised)."""
        path = tmp_path / "damaged.jsonl"
        path.write_bytes(b"\x89PNG\x1a\x00\x00\x01garbage\xff\n" + HEALTHY.read_bytes()
                         + LOOPING.read_bytes())
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["continue", "stop"]
        assert err.splitlines() == [
            f"otel-loopguard: {path}:1: not JSON text: byte 0x89 at offset 0 is not UTF-8 "
            "(binary data?)",
            "otel-loopguard: 1 bad input record skipped"]

    @pytest.mark.parametrize(("damaged", "line", "reason"), [
        (b'{"resourceSpans": []}\n\x00\x01\x02\x03\n', 2, "invalid JSON"),
        (b'{"resourceSpans":[{"scopeSpans":[null]}]}\n', 1, ""),
        (b"\n\x89PNG\x00\x01garbage\n", 2, "not JSON text"),
    ], ids=["control-bytes-on-line-2", "a-shape-that-trips-a-decoder", "binary-after-a-newline"])
    def test_a_damaged_line_costs_that_line(self, tmp_path: Path, damaged: bytes, line: int,
                                            reason: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """Control bytes within the first bytes read, a shape a decoder trips on, binary bytes
        after a leading newline (which made the file look like protobuf) are reported as their
        line; the rest is still checked."""
        path = tmp_path / "damaged.jsonl"
        path.write_bytes(damaged + LOOPING.read_bytes())
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["stop"]
        assert err.startswith(f"otel-loopguard: {path}:{line}: {reason}")
        assert "Traceback" not in err

    @pytest.mark.parametrize("cut", [b",", b":", b"{", b"["])
    def test_a_first_line_cut_where_a_value_goes_on(self, tmp_path: Path, cut: bytes,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        """A JSON line cut short right after a comma, colon or opening bracket looks like the
        start of a pretty-printed document; when the next line is a whole request, the file
        is JSON Lines: the cut line is the one bad record and the lines after it are read
        (the whole file was read as one document, every good line lost)."""
        head = HEALTHY.read_bytes()
        path = tmp_path / "cut.jsonl"
        path.write_bytes(head[:head.index(cut, 100) + 1] + b"\n" + HEALTHY.read_bytes()
                         + LOOPING.read_bytes())
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["continue", "stop"]
        assert err.startswith(f"otel-loopguard: {path}:")
        assert err.endswith("otel-loopguard: 1 bad input record skipped\n")

    @pytest.mark.parametrize("second", [b"cut", b"{}", b"array", b"metrics"])
    def test_a_cut_first_line_then_another_bad_one(self, tmp_path: Path, second: bytes,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """A cut first line followed by a line that is no trace request (cut too, an empty
        object, a request in an array, a metrics request) is still JSON Lines when a whole
        request follows within a few lines: the good lines are read (the whole file was read
        as one document that did not parse, every run lost)."""
        head, looping = HEALTHY.read_bytes(), LOOPING.read_bytes()
        line = {b"cut": looping[:300], b"{}": b"{}", b"array": b"[" + head.strip() + b"]",
                b"metrics": b'{"resourceMetrics": []}'}[second]
        path = tmp_path / "cut.jsonl"
        path.write_bytes(head[:300] + b"\n" + line + b"\n" + head + looping)
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["continue", "stop"]
        assert err.startswith(f"otel-loopguard: {path}:1: invalid JSON")

    @pytest.mark.parametrize("damage", [bytes(70_000), b"\x89PNG\x01" * 25_000],
                             ids=["zero-bytes", "binary"])
    def test_a_long_damaged_first_line(self, tmp_path: Path, damage: bytes,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        """However long the damaged first line (past the first 64 KiB looked at), the good
        lines after it are read."""
        path = tmp_path / "damaged.jsonl"
        path.write_bytes(damage + b"\n" + HEALTHY.read_bytes() + LOOPING.read_bytes())
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["continue", "stop"]
        assert err.startswith(f"otel-loopguard: {path}:1: ")

    @pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
    def test_a_line_cut_after_a_comma_is_named_by_its_own_line(
            self, tmp_path: Path, newline: bytes, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON fails at the end of a line cut after a comma; the error names that line (it
        named the next one, at column 1, taking the line's newline for a line of its own)."""
        looping = LOOPING.read_bytes()
        cut = looping[:looping.index(b",", 100) + 1]
        path = tmp_path / "cut.jsonl"
        path.write_bytes(HEALTHY.read_bytes() + cut + newline + looping)
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert [r["action"] for r in doc["runs"]] == ["continue", "stop"]
        first = err.splitlines()[0]
        assert first.startswith(f"otel-loopguard: {path}:2: invalid JSON: Expecting ")
        assert first.endswith(f" at column {len(cut) + 1}")

    def test_framed_protobuf_with_a_zero_filled_tail(self, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        """A proto file cut short by preallocated zero bytes keeps the messages before them."""
        message = proto_message(scripted_spans(({}, _one_401)))
        path = tmp_path / "traces.binpb"
        path.write_bytes(struct.pack(">I", len(message)) + message + bytes(1024))
        code, doc, err = _check_json(capsys, str(path))
        assert code == 2
        assert doc["summary"]["tool_calls"] == 2
        assert f"{path}:2: unrecognised content" in err and "from here on" in err

    def test_many_bad_records_are_listed_up_to_100(self, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "bad.jsonl"
        path.write_text('{"foo": 1}\n' * 150 + LOOPING.read_text(), encoding="utf-8")
        assert main(["check", "-q", str(path)]) == 2
        errors = capsys.readouterr().err.splitlines()
        assert len(errors) == 100 + 2
        assert errors[100] == "otel-loopguard: more bad records not shown (the first 100 are)"
        assert errors[101] == "otel-loopguard: 150 bad input records skipped"


class TestDirectories:
    def test_read_recursively_in_sorted_order(self, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """Files under a directory are read in sorted path order; hidden ones are skipped."""
        looping, healthy = LOOPING.read_text().strip(), HEALTHY.read_text().strip()
        (tmp_path / "b" / "inner").mkdir(parents=True)
        (tmp_path / ".cache").mkdir()
        files = {"b/inner/z.jsonl": _rename_traces(looping, 3),
                 "a.jsonl": _rename_traces(healthy, 1), "b/c.jsonl": _rename_traces(looping, 2),
                 ".cache/old.jsonl": _rename_traces(looping, 9), ".hidden.jsonl": "garbage"}
        for name, text in files.items():
            (tmp_path / name).write_text(text + "\n", encoding="utf-8")
        code, doc, err = _check_json(capsys, str(tmp_path))
        assert (code, err) == (1, "")
        assert [r["run_id"] for r in doc["runs"]] == [f"{n:032x}" for n in (1, 2, 3)]

    def test_a_directory_as_config_is_a_config_error(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", "--config", str(tmp_path), str(LOOPING)]) == 2
        assert capsys.readouterr().err == (f"otel-loopguard: config error: {tmp_path}: is a "
                                           "directory, not a config file\n")


def _run_cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "otel_loopguard", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


class TestNeverATraceback:
    def test_a_closed_pipe(self, tmp_path: Path) -> None:
        """``check ... | head -1``: a real pipe closed by its reader is one line, exit 2."""
        line = LOOPING.read_text(encoding="utf-8").strip()
        path = tmp_path / "many.jsonl"
        path.write_text("".join(_rename_traces(line, n + 1) + "\n" for n in range(200)),
                        encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with subprocess.Popen([sys.executable, "-m", "otel_loopguard", "check", str(path)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) as check:
            assert check.stdout is not None and check.stderr is not None
            first = check.stdout.readline()
            check.stdout.close()  # what `head -1` does after its line
            err = check.stderr.read().decode()
            code = check.wait(timeout=120)
        assert first.startswith(b"STOP  run 00000000000000000000000000000001")
        assert code == 2
        assert err == ("otel-loopguard: output closed before the report was complete "
                       "(broken pipe)\n")

    @pytest.mark.parametrize(("content", "message"), [
        (b'[loopguard]\nstagnation_warn = "\xff\xfe"\n',
         "invalid TOML: not UTF-8 text (byte 0xff at offset 31)"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "invalid TOML: nested too deeply"),
        (b"x = " + b"{a=" * 3000 + b"1" + b"}" * 3000 + b"\n", "invalid TOML: nested too deeply"),
    ], ids=["not-utf8", "deep-arrays", "deep-tables"])
    def test_unreadable_config(self, tmp_path: Path, content: bytes, message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
        config = tmp_path / "c.toml"
        config.write_bytes(content)
        assert main(["check", "--config", str(config), str(LOOPING)]) == 2
        assert capsys.readouterr().err == f"otel-loopguard: config error: {config}: {message}\n"

    def test_huge_durations_are_refused_or_do_not_overflow(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``1e300`` seconds in a config is refused in one line (a year at most); the longest
        accepted TTL, and a huge window given to the stream in code, do not overflow the
        conversion to nanoseconds (serve, the live processor)."""
        config = tmp_path / "c.toml"
        config.write_text("[loopguard]\nrun_ttl_seconds = 1e300\n", encoding="utf-8")
        assert main(["check", "--config", str(config), str(LOOPING)]) == 2
        assert capsys.readouterr().err == (f"otel-loopguard: config error: {config}: "
                                           "run_ttl_seconds must be a number >= 1 and <= "
                                           "31536000, got 1e+300\n")
        config.write_text("[loopguard]\nrun_ttl_seconds = 31536000\n", encoding="utf-8")
        loaded = LoopGuardConfig.load(config)
        StreamingChecker(loaded, reorder_window_seconds=1e300)
        LoopGuardSpanProcessor(loaded).shutdown()
        assert main(["check", "--config", str(config), str(LOOPING)]) == 1

    def test_a_busy_port_for_demo(self, capsys: pytest.CaptureFixture[str]) -> None:
        import socket

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            assert main(["demo", "--duration", "0.1", "--quiet", "--metrics-port",
                         str(port)]) == 2
        err = capsys.readouterr().err
        assert err == (f"otel-loopguard: cannot serve /metrics on 127.0.0.1:{port} (Address "
                       "already in use)\n")
        assert len(err.splitlines()) == 1

    def test_an_unexpected_error_is_one_line(self, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        def boom(self: Checker, spans: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(Checker, "run", boom)
        assert main(["check", str(LOOPING)]) == 2
        assert capsys.readouterr().err == "otel-loopguard: unexpected error: RuntimeError: boom\n"

    def test_output_to_a_directory(self, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", "--output", str(tmp_path), str(LOOPING)]) == 2
        assert capsys.readouterr().err == (f"otel-loopguard: {tmp_path}: cannot write the "
                                           "report: is a directory\n")



def test_the_documented_usage_is_the_real_one(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md shows the usage ``check --help`` prints (80 columns)."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs[docs.index("## check"):]
    assert section.split("```text\n", 1)[1].split("\n```", 1)[0] == usage


def test_errors_cannot_forge_lines_either(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A file name with a newline (or anything quoted from input) stays on its one line."""
    missing = tmp_path / "x\nSTOP  run forged.jsonl"
    assert main(["check", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"otel-loopguard: {tmp_path}/x\\x0aSTOP  run forged.jsonl: no such file\n"


def test_parentless_tool_calls_get_a_note_once(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Tool spans with no parent and no conversation id are each a run of one: check says so
    once, with what to set, and still checks them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("execute_tool search", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "none"}):
            pass
    path = tmp_path / "lone.jsonl"
    path.write_text(json_line(exporter.get_finished_spans()) + "\n")
    assert main(["check", str(path)]) == 0  # three runs of one call: nothing to detect
    err = capsys.readouterr().err
    assert err.count("otel-loopguard: note:") == 1
    assert "3 tool calls with no parent span and no conversation id" in err
