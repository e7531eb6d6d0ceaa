"""Compressed trace files: gzip and zstandard (as the Collector's file exporter writes them),
capped so that a small file cannot expand without bound."""

from __future__ import annotations

import gzip
import json
import os
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard
from _otlp_files import proto_message, scripted_spans

from otel_loopguard.cli import main
from otel_loopguard.cli._check import parse_size
from otel_loopguard.exceptions import TraceFileError
from otel_loopguard.replay._compressed import format_bytes
from otel_loopguard.testing import AgentScript
from otel_loopguard.tracefile import iter_spans

ROOT = Path(__file__).resolve().parent.parent
LOOPING = ROOT / "examples" / "traces" / "looping_agent.jsonl"
HEALTHY = ROOT / "examples" / "traces" / "healthy_agent.jsonl"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


def _runs(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = main(["check", "--format", "json", *argv])
    captured = capsys.readouterr()
    runs = json.loads(captured.out)["runs"]
    for run in runs:  # the same runs, whatever file they were read from
        run.pop("file", None)
        run.pop("line", None)
    return code, runs, captured.err


def _framed(*messages: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


@pytest.fixture(name="plain_runs")
def _plain_runs(capsys: pytest.CaptureFixture[str]) -> list[Any]:
    _, runs, _ = _runs(capsys, str(HEALTHY), str(LOOPING))
    return runs


def _both() -> bytes:
    return HEALTHY.read_bytes() + LOOPING.read_bytes()


class TestZstd:
    def test_one_stream(self, tmp_path: Path, plain_runs: list[Any],
                        capsys: pytest.CaptureFixture[str]) -> None:
        """A ``.zst`` file (the Collector's native compression) reads like the plain file."""
        path = tmp_path / "traces.jsonl.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(_both()))
        assert _runs(capsys, str(path)) == (1, plain_runs, "")

    def test_several_frames(self, tmp_path: Path, plain_runs: list[Any],
                            capsys: pytest.CaptureFixture[str]) -> None:
        """Frames one after another (flushes, rotation, concatenated files) are all read."""
        compress = zstandard.ZstdCompressor().compress
        path = tmp_path / "traces.zst"
        path.write_bytes(compress(HEALTHY.read_bytes()) + compress(LOOPING.read_bytes()))
        assert _runs(capsys, str(path)) == (1, plain_runs, "")

    def test_each_message_compressed_in_the_framing(self, tmp_path: Path,
                                                    plain_runs: list[Any],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
        """The file exporter's default with ``compression: zstd``: every message compressed
        on its own, each behind its 4-byte length (JSON and protobuf alike)."""
        compress = zstandard.ZstdCompressor().compress
        path = tmp_path / "traces.zst"
        path.write_bytes(_framed(compress(HEALTHY.read_bytes().strip()),
                                 compress(LOOPING.read_bytes().strip())))
        assert _runs(capsys, str(path)) == (1, plain_runs, "")
        spans = scripted_spans(({}, _loop))
        path.write_bytes(_framed(compress(proto_message(spans))))
        code, runs, _ = _runs(capsys, str(path))
        assert (code, [r["action"] for r in runs]) == (1, ["stop"])

    def test_truncated(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = zstandard.ZstdCompressor().compress(_both())
        path = tmp_path / "cut.zst"
        path.write_bytes(data[: len(data) - 10])
        code, _, err = _runs(capsys, str(path))
        assert code == 2
        assert f"{path}: cannot read: truncated zstd data" in err

    def test_without_zstandard(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
        """Without the optional dependency: one line naming the extra to install."""
        path = tmp_path / "traces.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(_both()))
        monkeypatch.setitem(sys.modules, "zstandard", None)
        assert main(["check", str(path)]) == 2
        assert capsys.readouterr().err.splitlines()[0] == (
            f"otel-loopguard: {path}: reading .zst needs the zstd extra: "
            "pip install 'zstandard>=0.22'")
        code, runs, err = _runs(capsys, str(path), str(LOOPING))  # the other files are read
        assert (code, [run["action"] for run in runs]) == (2, ["stop"])
        assert "needs the zstd extra" in err


def _loop(agent: AgentScript) -> None:
    for _ in range(5):
        agent.turn()
        agent.tool("search", {"q": "refunds"}, "no results")


class TestDecompressionCap:
    def test_gzip_over_the_cap(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Reading stops at the cap; the file is reported too large, exit 2."""
        path = tmp_path / "big.jsonl.gz"
        path.write_bytes(gzip.compress(LOOPING.read_bytes() * 40))
        code, _, err = _runs(capsys, "--max-decompressed", "64KiB", str(path))
        assert code == 2
        assert err.splitlines()[0] == (f"otel-loopguard: {path}: too large: decompressed size "
                                       "exceeds the limit of 64 KiB")

    def test_the_lines_within_the_cap_are_read(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """The lines that end before the cap are checked, though the read that crossed it
        held them (they were dropped with the rest of that read)."""
        path = tmp_path / "big.jsonl.gz"
        within = _both()
        path.write_bytes(gzip.compress(within + LOOPING.read_bytes() * 40))
        code, runs, err = _runs(capsys, "--max-decompressed", str(len(within) + 100), str(path))
        assert (code, [run["action"] for run in runs]) == (2, ["continue", "stop"])
        assert "too large" in err

    def test_under_the_cap(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "ok.jsonl.gz"
        path.write_bytes(gzip.compress(_both()))
        code, runs, err = _runs(capsys, "--max-decompressed", "64KiB", str(path))
        assert (code, len(runs), err) == (1, 2, "")

    def test_zstd_over_the_cap(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "big.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(LOOPING.read_bytes() * 40))
        code, _, err = _runs(capsys, "--max-decompressed", "64k", str(path))
        assert code == 2
        assert f"{path}: too large: decompressed size exceeds the limit of 64 KiB" in err

    def test_a_compressed_message_over_the_cap(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """Messages compressed one by one count against the same cap."""
        compress = zstandard.ZstdCompressor().compress
        message = compress(LOOPING.read_bytes().strip())
        path = tmp_path / "framed.zst"
        path.write_bytes(_framed(*[message] * 20))
        code, runs, err = _runs(capsys, "--max-decompressed", "64KiB", str(path))
        assert code == 2
        assert len(runs) == 1
        assert f"{path}: too large: decompressed size exceeds the limit of 64 KiB" in err

    def test_a_gzip_bomb_stops_at_once(self, tmp_path: Path) -> None:
        """256 MiB of zeros in 256 KB of gzip: rejected from its first bytes, nothing held."""
        deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = bytes(1 << 20)
        with (tmp_path / "bomb.gz").open("wb") as handle:
            for _ in range(256):
                handle.write(deflate.compress(zeros))
            handle.write(deflate.flush())
        errors: list[TraceFileError] = []
        assert list(iter_spans(str(tmp_path / "bomb.gz"), on_error=errors.append)) == []
        assert [e.reason for e in errors] == [
            "unrecognised content: neither OTLP/JSON nor OTLP protobuf (it starts with zero "
            "bytes only)"]

    @pytest.mark.parametrize(("text", "size"), [
        ("1073741824", 1 << 30), ("1GiB", 1 << 30), ("512MiB", 512 << 20), ("64k", 64 << 10),
        ("2G", 2 << 30), ("100 MB", 100 << 20)])
    def test_sizes(self, text: str, size: int) -> None:
        assert parse_size(text) == size

    @pytest.mark.parametrize(("text", "reason"), [
        ("-1", "not a size in bytes"), ("1.5G", "not a size in bytes"),
        ("lots", "not a size in bytes"), ("1T", "not a size in bytes"),
        ("0", "a size must be more than 0 and at most 1024GiB: '0'"),
        ("0k", "more than 0"), ("1025G", "at most 1024GiB"),
        ("99999999999999999999G", "at most 1024GiB")])
    def test_bad_sizes(self, text: str, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
        for option in ("--max-decompressed", "--max-line-bytes"):
            with pytest.raises(SystemExit) as info:
                main(["check", option, text, str(LOOPING)])
            assert info.value.code == 2
            err = capsys.readouterr().err
            assert reason in err and option in err and "Traceback" not in err

    def test_format_bytes(self) -> None:
        assert [format_bytes(n) for n in (1 << 30, 1536 << 10, 1000)] == [
            "1 GiB", "1536 KiB", "1000 bytes"]
