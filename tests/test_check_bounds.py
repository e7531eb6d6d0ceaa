"""``check`` on hostile inputs: memory bounded by what is open, caps on every path, bad files
in a directory named once and skipped. Real files, real FIFOs and sockets; no timing asserts
(a hang is caught by the subprocess timeout, a generous upper bound)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.cli import main
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.checker import Checker
from otel_loopguard.types import SpanRecord

ROOT = Path(__file__).resolve().parent.parent
LOOPING = ROOT / "examples" / "traces" / "looping_agent.jsonl"
MIB = 1 << 20


def _runs(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = main(["check", "--format", "json", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)["runs"], captured.err


def _check_process(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``check`` in a process of its own (a hang fails the test instead of stalling it)."""
    return subprocess.run([sys.executable, "-m", "otel_loopguard", "check", "--format", "json",
                           *argv], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)


def _char_device() -> str:
    """Return a character device (``/dev/zero`` would feed zeros forever if it were read)."""
    for path in ("/dev/zero", "/dev/full", "/dev/urandom", "/dev/null"):
        if os.path.exists(path) and stat.S_ISCHR(os.stat(path).st_mode):
            return path
    pytest.skip("no character device here")


# --- 6. check DIR never hangs and never gives up on good files ---------------------------------
class TestDirectories:
    def test_special_files_are_named_once_and_the_good_ones_reported(
            self, tmp_path: Path) -> None:
        """A FIFO (nobody writes to it), a socket, a device, a symlink loop and a dangling
        link under the directory: each named once, the good file's runs reported, exit 2."""
        (tmp_path / "good.jsonl").write_bytes(LOOPING.read_bytes())
        os.mkfifo(tmp_path / "pipe")
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(tmp_path / "sock"))
        os.symlink(_char_device(), tmp_path / "device")
        os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
        os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
        os.symlink(tmp_path / "missing", tmp_path / "dangling")
        try:
            done = _check_process(str(tmp_path))
        finally:
            server.close()
        runs = json.loads(done.stdout)["runs"]
        named = {name: done.stderr.count(str(tmp_path / name)) for name in
                 ("pipe", "sock", "device", "loop-a", "loop-b", "dangling", "good.jsonl")}
        assert done.returncode == 2
        assert named == {"pipe": 1, "sock": 1, "device": 1, "loop-a": 1, "loop-b": 1,
                         "dangling": 1, "good.jsonl": 0}
        assert "symbolic link loop" in done.stderr and "a FIFO" in done.stderr
        assert runs and any(run["findings"] for run in runs)

    @pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
    def test_an_unreadable_file_is_named_and_the_others_read(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "a.jsonl").write_bytes(LOOPING.read_bytes())
        locked = tmp_path / "b.jsonl"
        locked.write_bytes(LOOPING.read_bytes())
        locked.chmod(0)
        code, runs, err = _runs(capsys, str(tmp_path))
        assert code == 2 and runs
        assert err.count(str(locked)) == 1 and "permission denied" in err.lower()

    def test_a_missing_path_beside_a_good_one(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        code, runs, err = _runs(capsys, str(LOOPING), str(tmp_path / "nope.jsonl"))
        assert code == 2 and runs
        assert err.count("nope.jsonl") == 1 and "no such file" in err

    def test_strict_stops_at_the_first(self, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        os.mkfifo(tmp_path / "pipe")
        assert main(["check", "--strict", str(tmp_path)]) == 2
        assert "not a regular file (a FIFO)" in capsys.readouterr().err


# --- 5. caps on lines and decompression ---------------------------------------------------------
def _traced_peak(*argv: str) -> tuple[int, int]:
    """Run ``check`` in this process; return its exit code and its peak traced memory."""
    tracemalloc.start()
    try:
        code = main(["check", "--format", "json", "-o", os.devnull, *argv])
        return code, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class TestCaps:
    def test_a_giant_line_is_refused_before_it_is_held(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A 24 MiB line between good lines, a 1 MiB cap: named by its line and skipped, the
        good lines read, and the peak memory stays far under the line's size."""
        good = LOOPING.read_bytes()
        path = tmp_path / "big.jsonl"
        with path.open("wb") as out:
            out.write(good)
            out.write(b'{"resourceSpans": [' + b" " * (24 * MIB) + b"]}\n")
            out.write(good)
        lines = good.count(b"\n")
        code, peak = _traced_peak("--max-line-bytes", "1MiB", str(path))
        err = capsys.readouterr().err
        assert code == 2
        assert f"big.jsonl:{lines + 1}: line longer than the 1 MiB limit" in err
        assert peak < 8 * MIB

    def test_gzip_of_blank_lines_is_skipped_within_the_caps(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """256 MiB of newlines and spaces (a 250 KiB gzip), then a looping run: read through,
        the run found on the right line, memory bounded by a chunk."""
        path = tmp_path / "blank.jsonl.gz"
        with gzip.open(path, "wb", compresslevel=1) as out:
            for _ in range(128):
                out.write(b"\n" * MIB + b" " * MIB)
            out.write(LOOPING.read_bytes())
        code, peak = _traced_peak(str(path))
        assert code == 1  # the looping run is flagged; no bad record
        assert peak < 16 * MIB

    def test_a_zstd_frame_stops_at_the_cap(self, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """A zstd frame inflating to 256 MiB (one 'line' that never ends) against an 8 MiB
        line cap: named, and the memory held stays near the cap, not the frame."""
        path = tmp_path / "bomb.zst"
        compressor = zstandard.ZstdCompressor(level=3)
        with path.open("wb") as raw, compressor.stream_writer(raw) as out:
            out.write(b"{")
            for _ in range(256):
                out.write(b" " * MIB)
        code, peak = _traced_peak("--max-line-bytes", "8MiB", str(path))
        err = capsys.readouterr().err
        assert code == 2 and "longer than the 8 MiB limit" in err
        assert peak < 3 * 8 * MIB

    def test_framed_zstd_messages_are_capped_each(self, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
        """The file exporter's framing, one message inflating to 64 MiB: named by its message
        number and skipped, held at most up to the line cap."""
        bomb = zstandard.ZstdCompressor().compress(b"{" + b" " * (64 * MIB))
        path = tmp_path / "framed.bin"
        path.write_bytes(struct.pack(">I", len(bomb)) + bomb)
        code, peak = _traced_peak("--max-line-bytes", "4MiB", str(path))
        err = capsys.readouterr().err
        assert code == 2 and "framed.bin:1: message decompresses to more than the 4 MiB" in err
        assert peak < 4 * 4 * MIB


    def test_a_framed_message_over_the_line_cap_is_skipped_unheld(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The file exporter's ``format: proto`` framing, uncompressed: a 13 MiB message
        between two good ones against a 1 MiB cap is named by its number and skipped as it
        is read (never held), and the message after it is still read."""
        from google.protobuf.json_format import ParseDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        def message(line: bytes, padding: int = 0) -> bytes:
            doc = json.loads(line)
            for resource in doc["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if span.get(key):
                                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                        span.setdefault("attributes", []).append(
                            {"key": "padding", "value": {"stringValue": "x" * padding}})
            data = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
            return struct.pack(">I", len(data)) + data

        good = message(LOOPING.read_bytes())
        big = message((ROOT / "examples" / "traces" / "healthy_agent.jsonl").read_bytes(),
                      padding=MIB)  # 13 spans: 13 MiB
        path = tmp_path / "framed.bin"
        path.write_bytes(good + big + good)
        code, peak = _traced_peak("--max-line-bytes", "1MiB", str(path))
        err = capsys.readouterr().err
        assert code == 2
        assert "framed.bin:2: message larger than the 1 MiB limit (--max-line-bytes); " \
               "skipped" in err
        assert "1 bad input record skipped" in err
        assert peak < 8 * MIB

# --- 5. memory bounded by what is open ------------------------------------------------------------
def _span(trace: int, span: int, *, root: bool) -> SpanRecord:
    return SpanRecord(f"{trace:032x}", f"{span:016x}", None if root else "e" * 16,
                      "execute_tool search", span, span + 1,
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})


def test_a_trace_whose_spans_stop_arriving_is_closed_after_grace_spans() -> None:
    """A trace without its root, then 250 spans of other traces: with ``grace_spans=100``
    it is checked and released while the input goes on, not at the end."""
    checker = Checker(grace_spans=100)
    closed_at: dict[str, int] = {}
    spans = [_span(1, i + 1, root=False) for i in range(5)]
    spans += [_span(1000 + i, 5000 + i, root=True) for i in range(250)]
    for index, span in enumerate(spans):
        for report in checker.add(span):
            closed_at.setdefault(report.run_id, index)
    assert closed_at[f"{1:032x}"] <= 5 + 100
    assert len(checker._traces) <= 101


def test_a_trace_that_goes_on_after_being_checked_is_counted_once() -> None:
    """Spans of a trace after it was released as idle are a piece checked on its own: counted
    in ``split_traces``, once per trace, however many pieces it comes in."""
    checker = Checker(grace_spans=100)
    spans, other = [], 1000
    for piece in range(3):
        spans += [_span(1, piece * 10 + i + 1, root=False) for i in range(3)]
        spans += [_span(other + i, 5000 + other + i, root=True) for i in range(150)]
        other += 150
    spans += [_span(2, 1, root=True)]
    reports = list(checker.run(spans))
    assert [r.tool_calls for r in reports if r.run_id == f"{1:032x}"] == [3, 3, 3]
    assert checker.split_traces == 1


def test_a_conversations_trace_that_goes_on_is_not_counted_apart() -> None:
    """With ``run_key = conversation``, a later piece of a trace naming its conversation joins
    the conversation's run, which stays open: it is not counted as checked apart."""
    def span(trace: int, number: int) -> SpanRecord:
        record = _span(trace, number, root=False)
        return SpanRecord(record.trace_id, record.span_id, record.parent_span_id, record.name,
                          record.start_time_ns, record.end_time_ns,
                          {**record.attributes, "gen_ai.conversation.id": "c-1"})

    checker = Checker(LoopGuardConfig.create(run_key="conversation"), grace_spans=100)
    spans = [span(1, 1), *(_span(1000 + i, 5000 + i, root=True) for i in range(150)),
             span(1, 2)]
    reports = list(checker.run(spans))
    assert [r.tool_calls for r in reports if r.run_id == "c-1"] == [2]
    assert checker.split_traces == 0


def test_check_says_when_a_trace_went_on_after_being_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """More than ``max_runs`` traces open at once: the oldest is checked while it goes on,
    and ``check`` says so, with what to do; input in which no trace goes on says nothing."""
    def line(trace: int, span: int, parent: str | None) -> str:
        record = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}",
                  "name": "execute_tool search", "startTimeUnixNano": str(span),
                  "endTimeUnixNano": str(span + 1), "attributes": [
                      {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                      {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}}]}
        if parent:
            record["parentSpanId"] = parent
        return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [record]}]}]})

    lines = [line(1, 1, "e" * 16), *(line(100 + i, 200 + i, None) for i in range(4)),
             line(1, 2, "e" * 16)]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    config = tmp_path / "loopguard.toml"
    config.write_text("[loopguard]\nmax_runs = 2\n")
    code, runs, err = _runs(capsys, "--config", str(config), str(path))
    assert code == 0
    assert [r["tool_calls"] for r in runs if r["run_id"] == f"{1:032x}"] == [1, 1]
    assert "note: 1 trace went on after being checked: the later spans were checked as a " \
           "run of their own" in err
    assert "more than max_runs = 2 traces are open: raise max_runs" in err
    _, _, err = _runs(capsys, str(path))
    assert "went on after being checked" not in err


def _closings(reports: Any, pulled: list[int]) -> list[tuple[str, int, int]]:
    """Return (run, tool calls, spans read when it closed) of each report."""
    return [(report.run_id, report.tool_calls, pulled[0]) for report in reports]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.integers(1, 6)), max_size=40),
       st.integers(1, 6), st.integers(1, 3))
def test_run_closes_traces_where_add_does(runs: list[tuple[int, bool, int]], grace: int,
                                          max_runs: int) -> None:
    """``run`` skips asking whether a trace is due while one trace's spans follow each other;
    its reports, and the span after which each comes, are those of ``add`` span by span."""
    spans, number = [], 0
    for trace, root, count in runs:  # runs of spans of one trace, a root among them or not
        for index in range(count):
            number += 1
            spans.append(_span(trace, number % 23, root=root and index == count - 1))
    config = LoopGuardConfig.create(max_runs=max_runs)
    pulled = [0]

    def counted() -> Any:
        for span in spans:
            pulled[0] += 1
            yield span

    streamed = _closings(Checker(config, grace_spans=grace).run(counted()), pulled)
    checker, one_by_one = Checker(config, grace_spans=grace), []
    for index, span in enumerate(spans):
        one_by_one += [(r.run_id, r.tool_calls, index + 1) for r in checker.add(span)]
    one_by_one += [(r.run_id, r.tool_calls, len(spans)) for r in checker.flush()]
    assert streamed == one_by_one
