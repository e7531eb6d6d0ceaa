"""``otel-loopguard serve`` on the command line: usage errors, banner, graceful stop."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from _signals import sigterm_when_handled

from otel_loopguard.cli import main


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` reads ``LOOPGUARD_*`` variables; the developer's own must not leak in."""
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


class TestUsage:
    def test_nothing_to_serve(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Turning both protocols off is a usage error (exit 2) with a one-line message."""
        assert main(["serve", "--no-grpc", "--no-http"]) == 2
        assert "nothing to serve" in capsys.readouterr().err

    @pytest.mark.parametrize(("content", "message"), [("", "is empty"), (None, "No such file")])
    def test_bad_token_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            content: str | None, message: str) -> None:
        """An empty or missing token file is a config error, not a server without auth."""
        path = tmp_path / "token"
        if content is not None:
            path.write_text(content)
        assert main(["serve", "--token-file", str(path)]) == 2
        assert message in capsys.readouterr().err

    @pytest.mark.parametrize(("args", "message"), [
        (["--max-queue", "0"], "--max-queue must be >= 1, got 0"),
        (["--request-timeout", "0"],
         "--request-timeout must be > 0 and <= 31536000 (one year), got 0.0"),
        (["--max-request-bytes", "9MiB", "--max-bytes-in-flight", "8MiB"],
         "--max-bytes-in-flight (8388608) must be >= --max-request-bytes (9437184)"),
        (["--max-runs", "0"], "--max-runs must be an integer >= 1, got 0"),
        (["--run-ttl", "0"], "--run-ttl must be a number >= 1 and <= 31536000, got 0.0"),
    ])
    def test_bad_limit(self, capsys: pytest.CaptureFixture[str], args: list[str],
                       message: str) -> None:
        """A limit out of range is refused in one line that names the flag the user typed,
        not the field of ``ReceiverOptions`` or ``LoopGuardConfig`` behind it."""
        assert main(["serve", "--no-grpc", "--no-http", *args]) == 2
        assert capsys.readouterr().err == f"otel-loopguard: config error: {message}\n"

    def test_a_bad_setting_in_the_file_is_named_as_the_files(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The same setting out of range in the config file is named as the file spells it."""
        path = tmp_path / "loopguard.toml"
        path.write_text("max_runs = 0\n")
        assert main(["serve", "--config", str(path), "--max-runs", "5"]) == 2
        assert capsys.readouterr().err == (f"otel-loopguard: config error: {path}: max_runs "
                                           "must be an integer >= 1, got 0\n")

    @pytest.mark.parametrize(("value", "message"), [
        ("70000", "must be a port number 0-65535, got '70000'"),
        ("-1", "must be a port number 0-65535, got '-1'"),
        ("http", "not a port number: 'http'")])
    @pytest.mark.parametrize("flag", ["--grpc-port", "--http-port"])
    def test_bad_port(self, capsys: pytest.CaptureFixture[str], flag: str, value: str,
                      message: str) -> None:
        """A port out of range is a usage error naming the flag (it was named ``grpc_port``,
        with an "or None" that no flag can give)."""
        with pytest.raises(SystemExit) as exited:
            main(["serve", flag, value])
        assert exited.value.code == 2
        assert capsys.readouterr().err.endswith(
            f"otel-loopguard serve: error: argument {flag}: {message}\n")

    @pytest.mark.parametrize("value", ["", "  "])
    def test_empty_listen_address(self, capsys: pytest.CaptureFixture[str], value: str) -> None:
        """An empty ``--listen`` is a usage error naming the flag, before anything binds (it
        reached grpcio, which printed a line of its C core's log before loopguard's)."""
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--grpc-port", "0", "--http-port", "0", "--listen", value])
        assert exited.value.code == 2
        assert capsys.readouterr().err.endswith(
            "otel-loopguard serve: error: argument --listen: must not be empty (0.0.0.0 binds "
            "every address)\n")

    def test_state_file_in_a_missing_folder(self, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A state file that cannot be created is named by its flag."""
        path = tmp_path / "missing" / "state"
        assert main(["serve", "--grpc-port", "0", "--http-port", "0",
                     "--state-file", str(path)]) == 2
        assert capsys.readouterr().err == ("otel-loopguard: config error: --state-file: No such "
                                           f"file or directory: {path}\n")

    @pytest.mark.parametrize("content", [b"important notes line 1\nimportant notes line 2\n",
                                         b"notes of exactly 24 bytes",  # 25: one too many
                                         b"a file of twenty-4 bytes"])  # 24, not a state
    def test_state_file_that_is_another_file(self, tmp_path: Path, content: bytes,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A state file pointed at another file by mistake is refused and left as it was
        (it was taken as a new state file and its first 24 bytes overwritten)."""
        path = tmp_path / "notes.txt"
        path.write_bytes(content)
        assert main(["serve", "--grpc-port", "0", "--http-port", "0",
                     "--state-file", str(path)]) == 2
        assert capsys.readouterr().err == (
            f"otel-loopguard: config error: --state-file: {path}: not a state file of "
            f"otel-loopguard serve ({len(content)} bytes; it writes 24, and starts from an "
            "empty or missing file); left unchanged\n")
        assert path.read_bytes() == content

    @pytest.mark.parametrize(("args", "message"), [
        (["--forward-protocol", "http", "--forward-endpoint", "collector:4318"],
         "--forward-endpoint must be an http:// or https:// URL for protocol http, got "
         "'collector:4318'"),
        (["--forward-endpoint", "http://[::1"],
         "--forward-endpoint 'http://[::1': Invalid IPv6"),
        (["--forward-endpoint", "ftp://collector"], "--forward-endpoint must be host:port, or"),
        (["--forward-endpoint", "http:/tempo:4317"],
         "--forward-endpoint must be host:port, or an http:// or https:// URL, got "
         "'http:/tempo:4317'"),
        (["--forward-endpoint", "tempo:4317/v1/traces"], "--forward-endpoint must be host:port"),
        (["--forward-endpoint", "tempo"], "--forward-endpoint must be host:port"),
    ], ids=["http-without-url", "bad-ipv6", "ftp", "url-missing-a-slash", "grpc-with-a-path",
            "no-port"])
    def test_bad_forward_endpoint(self, capsys: pytest.CaptureFixture[str], args: list[str],
                                  message: str) -> None:
        """An endpoint no export could reach is a one-line config error at start, not a
        server whose every forwarded span fails, retried forever (and, for a bad IPv6 URL,
        an 'unexpected error')."""
        assert main(["serve", "--no-grpc", "--no-http", *args]) == 2  # checked before those
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"config error: {message}" in err

    def test_port_in_use(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A port that cannot be bound gives exit 2 and names the busy address, HTTP or gRPC."""
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            assert main(["serve", "--no-grpc", "--http-port", str(port)]) == 2
            assert f"cannot listen on 127.0.0.1:{port} (OTLP/HTTP, /metrics): Address already " \
                   "in use" in capsys.readouterr().err
            assert main(["serve", "--grpc-port", str(port), "--http-port", "0"]) == 2
            assert f"127.0.0.1:{port}" in capsys.readouterr().err

    def test_grpc_port_in_use_is_one_line_saying_why(self) -> None:
        """A busy gRPC port is one line on stderr naming the address and the reason, as for
        HTTP; not grpcio's C log line (outside --log-format) and an error with no reason."""
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            done = subprocess.run(
                [sys.executable, "-m", "otel_loopguard", "serve", "--no-http", "--grpc-port",
                 str(port)], capture_output=True, text=True, timeout=60, check=False,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        assert done.returncode == 2
        assert done.stderr == (f"otel-loopguard: cannot listen on 127.0.0.1:{port} (OTLP/gRPC): "
                               "Address already in use\n")


def test_runs_until_sigterm(monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """``serve`` prints its addresses, then stops cleanly (exit 0) on SIGTERM."""
    monkeypatch.setenv("LOOPGUARD_SERVE_TOKEN", "t0ken")
    threading.Thread(target=sigterm_when_handled, daemon=True).start()
    code = main(["serve", "--grpc-port", "0", "--http-port", "0", "--reorder-window", "0"])
    err = capsys.readouterr().err
    assert code == 0
    assert "listening on OTLP/gRPC 127.0.0.1:" in err
    assert "bearer token required" in err
    assert "shutting down" in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_collects_garbage_less_often_while_serving() -> None:
    """While ``serve`` runs, start-up is frozen out of the collector and its thresholds are
    raised; both are put back when it returns."""
    before = gc.get_threshold()
    seen: list[tuple[tuple[int, ...], int]] = []

    def look() -> None:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    threading.Thread(target=sigterm_when_handled, args=(look,), daemon=True).start()
    code = main(["serve", "--grpc-port", "0", "--http-port", "0", "--reorder-window", "0"])
    assert code == 0
    (threshold, frozen), = seen
    assert threshold[0] > before[0] and frozen > 1000
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


@pytest.mark.parametrize("flag", ["--run-ttl", "--reorder-window", "--request-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_seconds_flags_reject_what_is_not_a_duration(
        flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A duration that is not a finite number >= 0 is a usage error (exit 2) naming the flag."""
    from otel_loopguard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("value", "expected"), [
    ("8388608", 8 << 20), ("8MiB", 8 << 20), ("512k", 512 << 10), ("1GiB", 1 << 30)])
def test_byte_flags_take_sizes_with_units(value: str, expected: int) -> None:
    """Every byte limit of serve takes a number or a size with a binary unit, as check's do."""
    from otel_loopguard.cli import _build_parser
    from otel_loopguard.cli._serve import _options

    flags = ("--max-request-bytes", "--max-pending-bytes", "--max-bytes-in-flight",
             "--forward-buffer-bytes", "--forward-max-batch-bytes")
    argv = ["serve", "--no-grpc", "--max-bytes-in-flight", "2GiB"]
    for flag in flags:
        if flag != "--max-bytes-in-flight":
            argv += [flag, value]
    options = _options(_build_parser(argv).parse_args(argv))
    assert (options.max_request_bytes, options.max_pending_bytes, options.forward_buffer_bytes,
            options.forward_max_batch_bytes, options.max_bytes_in_flight) == (
        expected, expected, expected, expected, 2 << 30)


def test_a_byte_flag_that_is_not_a_size_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Neither a number nor a size: one usage line naming the flag; 0 is the receiver's to word."""
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--max-request-bytes", "lots"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-request-bytes: not a size in bytes (e.g. 512MiB, 1GiB): 'lots'" in err
    assert main(["serve", "--max-request-bytes", "0"]) == 2
    assert "--max-request-bytes must be >= 1" in capsys.readouterr().err


def test_the_grpc_port_check_binds_each_address_a_name_resolves_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that resolves only to IPv6 is probed over IPv6 (it was probed as IPv4 and
    refused); a busy address among them is refused in one line; an unknown name is named."""
    from otel_loopguard.receiver import _grpc

    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "v6only.test":
            return real("::1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    _grpc._check_free("v6only.test", 0, "v6only.test:0")
    with socket.socket(socket.AF_INET6) as busy:
        busy.bind(("::1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on v6only.test:{port} "
                                          r"\(OTLP/gRPC\): Address already in use"):
            _grpc._check_free("v6only.test", port, f"v6only.test:{port}")
    with pytest.raises(OSError, match=r"cannot listen on nowhere\.invalid:4317 \(OTLP/gRPC\)"):
        _grpc._check_free("nowhere.invalid", 4317, "nowhere.invalid:4317")
