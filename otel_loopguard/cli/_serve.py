"""``otel-loopguard serve``: receive OTLP from agents in any language and detect loops.

Finished runs go to stdout as JSON lines (the ``check --format json`` shape of a run, after the
time and the run's ``service.name``), the
listening addresses and errors to stderr. SIGTERM or SIGINT stops it gracefully: accepted
spans are all checked before it exits.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import signal
import sys
import threading
from datetime import datetime, timezone
from typing import Any, Final

from prometheus_client import GC_COLLECTOR, CollectorRegistry, PlatformCollector, ProcessCollector

from otel_loopguard.cli._check import CONFIG_HELP, parse_size, run_key_default
from otel_loopguard.cli._gc import fewer_collections
from otel_loopguard.cli._logs import LEVELS, configure_logging
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.config._fields import MAX_SECONDS
from otel_loopguard.environment_variables import LOOPGUARD_SERVE_TOKEN
from otel_loopguard.exceptions import ConfigError
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.replay.checker import RunReport, report_to_json
from otel_loopguard.types import Action

__all__ = ["add_parser", "report_line"]

TOKEN_ENV: Final = LOOPGUARD_SERVE_TOKEN
"""Bearer token for ``serve`` when ``--token-file`` is not given."""
_EXIT_USAGE: Final = 2
_STOP_POLL_S: Final = 0.5
"""How often ``serve``'s main thread wakes while it waits for SIGTERM or SIGINT. The kernel may
hand the signal to another thread; Python runs the handler on the main thread only when that
thread runs Python code again, which an untimed wait would not let it do."""

_FLAGS: Final = {
    "grpc_port": "--grpc-port", "http_port": "--http-port",
    "max_request_bytes": "--max-request-bytes", "max_queue": "--max-queue",
    "max_buffered_spans": "--max-buffered-spans", "max_pending_bytes": "--max-pending-bytes",
    "max_bytes_in_flight": "--max-bytes-in-flight", "max_connections": "--max-connections",
    "request_timeout_seconds": "--request-timeout", "reorder_window_seconds": "--reorder-window",
    "forward_endpoint": "--forward-endpoint", "forward_buffer_bytes": "--forward-buffer-bytes",
    "forward_max_batch_bytes": "--forward-max-batch-bytes", "state_file": "--state-file",
    "run_ttl_seconds": "--run-ttl", "max_runs": "--max-runs",
}
"""The flag that sets each ``ReceiverOptions`` field or config setting, for error messages."""
_NAME_RE: Final = re.compile(r"\b(" + "|".join(_FLAGS) + r")\b")

logger = logging.getLogger(__name__)


def add_parser(commands: Any) -> None:
    """Register ``serve`` on the subcommand parser."""
    parser = commands.add_parser(
        "serve", help="receive OTLP spans and logs (gRPC and HTTP) and detect loops",
        description="Receive OTLP traces from agents in any language (directly or through an "
                    "OpenTelemetry Collector), and the tool-call log events of Claude Code, "
                    "Codex CLI and Gemini CLI, detect tool-call loops, and export Prometheus "
                    "metrics on the HTTP port. Finished runs are printed to stdout as JSON "
                    "lines. Exit 0 after a clean shutdown (SIGTERM/SIGINT), 2 on bad usage or "
                    "when a port cannot be bound.")
    listen = parser.add_argument_group("listening")
    listen.add_argument("--listen", type=_address, default="127.0.0.1", metavar="ADDR",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it)")
    listen.add_argument("--grpc-port", type=_port, default=4317, metavar="PORT",
                        help="OTLP/gRPC port (default 4317; 0 picks a free port)")
    listen.add_argument("--http-port", type=_port, default=4318, metavar="PORT",
                        help="OTLP/HTTP, /metrics, /healthz, /readyz port (default 4318; "
                             "0 picks a free port)")
    listen.add_argument("--no-grpc", action="store_true", help="do not serve OTLP/gRPC")
    listen.add_argument("--no-http", action="store_true",
                        help="do not serve OTLP/HTTP (nor /metrics)")
    listen.add_argument("--token-file", metavar="FILE",
                        help=f"require 'Authorization: Bearer <token>' with the token in FILE "
                             f"(default: ${TOKEN_ENV} when set, else no auth)")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--max-request-bytes", type=_byte_size, default=8 << 20, metavar="SIZE",
                        help="largest request, before and after decompression (default 8 MiB)")
    limits.add_argument("--max-queue", type=int, default=64, metavar="BATCHES",
                        help="decoded batches waiting before 429/RESOURCE_EXHAUSTED (64)")
    limits.add_argument("--max-buffered-spans", type=int, default=1_000_000, metavar="N",
                        help="spans buffered across open traces (default 1,000,000)")
    limits.add_argument("--max-pending-bytes", type=_byte_size, default=128 << 20, metavar="SIZE",
                        help="bytes of spans held in open traces; past it the oldest trace is "
                             "checked and forwarded early (default 128 MiB)")
    limits.add_argument("--max-bytes-in-flight", type=_byte_size, default=64 << 20, metavar="SIZE",
                        help="request bytes read, decoded or queued at once, over HTTP and "
                             "gRPC, before 429/RESOURCE_EXHAUSTED (64 MiB)")
    limits.add_argument("--max-connections", type=int, default=128, metavar="N",
                        help="HTTP connections served at once (128)")
    limits.add_argument("--request-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                        help="time a request may take to arrive; idle HTTP connections too (30)")
    runs = parser.add_argument_group("runs")
    runs.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    runs.add_argument("--run-key", choices=("trace", "conversation", "agent"),
                      help=f"how tool calls are grouped into runs (default: {run_key_default()})")
    runs.add_argument("--reorder-window", type=_seconds, default=5.0, metavar="SECONDS",
                      help="wait this long after a trace's root span for late spans (5)")
    runs.add_argument("--run-ttl", type=_seconds, metavar="SECONDS",
                      help="close a trace without root, or a conversation, after this idle "
                           "time (default: run_ttl_seconds, 3600)")
    runs.add_argument("--max-runs", type=int, metavar="N",
                      help="open traces kept (default: max_runs, 10,000)")
    out = parser.add_argument_group("output")
    out.add_argument("--reports", choices=("flagged", "all", "none"), default="flagged",
                     help="runs printed to stdout as JSON lines (default: flagged)")
    out.add_argument("--forward-endpoint", metavar="URL",
                     help="re-export spans, with loopguard evidence, to this OTLP endpoint")
    out.add_argument("--forward-protocol", choices=("grpc", "http"), default="grpc",
                     help="protocol of --forward-endpoint (default grpc)")
    out.add_argument("--state-file", metavar="FILE",
                     help="keep counts of acknowledged and finished spans in FILE, so that the "
                          "next start counts what a SIGKILL or OOM kill lost")
    out.add_argument("--forward-buffer-bytes", type=_byte_size, default=64 << 20, metavar="SIZE",
                     help="checked spans waiting for the downstream; when full, new data gets "
                          "429/RESOURCE_EXHAUSTED (default 64 MiB)")
    out.add_argument("--forward-max-batch-bytes", type=_byte_size, default=4 << 20, metavar="SIZE",
                     help="largest export request sent downstream, under its message limit "
                          "(default 4 MiB, the Collector's gRPC default)")
    out.add_argument("--log-level", choices=LEVELS, default="info",
                     help="least severe log line written to stderr (default info: the "
                          "listening addresses, shutdown, warnings and errors)")
    out.add_argument("--log-format", choices=("text", "json"), default="text",
                     help="log lines as text, or as one JSON object each (time, level, "
                          "logger, message, exception) for a log pipeline (default text)")
    parser.set_defaults(handler=run_serve)


def _config(args: argparse.Namespace) -> LoopGuardConfig:
    overrides: dict[str, Any] = {}
    if args.run_key:
        overrides["run_key"] = args.run_key
    if args.run_ttl is not None:
        overrides["run_ttl_seconds"] = args.run_ttl
    if args.max_runs is not None:
        overrides["max_runs"] = args.max_runs
    try:
        return LoopGuardConfig.load(args.config, **overrides)
    except ConfigError as exc:  # a flag's value names the flag; a file's or variable's, its own
        message = str(exc)
        if any(message.startswith(f"{name} ") for name in overrides):
            message = _flag_names(message)
        raise ConfigError(message) from None


def _flag_names(message: str) -> str:
    """Return ``message`` with the options it names spelt as the flags that set them."""
    return _NAME_RE.sub(lambda match: _FLAGS[match.group(1)], message)


def _address(text: str) -> str:
    """Return a host to bind (argparse reports an empty one, naming the flag)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (0.0.0.0 binds every address)")
    return text.strip()


def _port(text: str) -> int:
    """Return a port number 0-65535 (argparse reports anything else, naming the flag)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {text!r}")
    return port


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise ConfigError(f"--token-file: {exc.strerror}: {args.token_file}") from None
        if not token:
            raise ConfigError(f"--token-file: {args.token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


def _seconds(text: str) -> float:
    """Return a number of seconds from 0 to a year (argparse reports anything else)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= MAX_SECONDS:  # NaN fails it too
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 and <= {MAX_SECONDS} "
                                         f"(one year), got {text!r}")
    return value


def _byte_size(text: str) -> int:
    """Return a byte count given as a number (``8388608``) or with a binary unit (``8MiB``).

    A plain number is taken as it is, so that the receiver's own checks word what is wrong
    with ``0`` or a negative one; a size with a unit reads as ``check``'s size options do.
    """
    try:
        return int(text)
    except ValueError:
        return parse_size(text)


def _options(args: argparse.Namespace) -> ReceiverOptions:
    try:
        return ReceiverOptions(
            host=args.listen, grpc_port=None if args.no_grpc else args.grpc_port,
            http_port=None if args.no_http else args.http_port,
            max_request_bytes=args.max_request_bytes, max_queue=args.max_queue,
            max_buffered_spans=args.max_buffered_spans, token=_token(args),
            max_pending_bytes=args.max_pending_bytes,
            forward_buffer_bytes=args.forward_buffer_bytes,
            forward_max_batch_bytes=args.forward_max_batch_bytes, state_file=args.state_file,
            max_bytes_in_flight=args.max_bytes_in_flight, max_connections=args.max_connections,
            request_timeout_seconds=args.request_timeout,
            reorder_window_seconds=args.reorder_window,
            forward_endpoint=args.forward_endpoint, forward_protocol=args.forward_protocol)
    except ValueError as exc:
        raise ConfigError(_flag_names(str(exc))) from None


def _printer(mode: str) -> Any:
    if mode == "none":
        return None
    lock = threading.Lock()

    def show(report: RunReport) -> None:
        if mode == "flagged" and report.action is Action.CONTINUE \
                and report.budget is Action.CONTINUE:
            return
        line = json.dumps(report_line(report), separators=(",", ":"))
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    return show


def report_line(report: RunReport, now: datetime | None = None) -> dict[str, Any]:
    """Return the JSON object ``serve`` prints for a finished run.

    The run in the ``check --format json`` shape, after the time it was reported (RFC 3339, UTC)
    and the ``service.name`` of its spans (None when their resource has none).
    """
    moment = now or datetime.now(timezone.utc)
    return {"time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "service.name": report.service_name, **report_to_json(report)}


def _registry() -> CollectorRegistry:
    """Return a registry of its own (so in-process runs never collide), with process metrics."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    registry.register(GC_COLLECTOR)
    return registry


def _bind_error(exc: OSError, options: ReceiverOptions) -> str:
    """Name the address that could not be bound (the gRPC server's error names its own)."""
    if exc.errno is None:
        return str(exc)
    return (f"cannot listen on {options.host}:{options.http_port} (OTLP/HTTP, /metrics): "
            f"{exc.strerror or exc}")


def run_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` until SIGTERM or SIGINT; return the exit code."""
    config = _config(args)
    options = _options(args)
    if options.grpc_port is None and options.http_port is None:
        raise ConfigError("--no-grpc and --no-http leave nothing to serve")
    restore = configure_logging(args.log_level, args.log_format)
    try:
        return _serve(config, options, args.reports)
    finally:
        restore()


def _serve(config: LoopGuardConfig, options: ReceiverOptions, reports: str) -> int:
    stop = threading.Event()
    receiver = LoopGuardReceiver(config, options=options, registry=_registry(),
                                 on_report=_printer(reports))
    try:
        receiver.start()
    except ConfigError as exc:  # the state file
        raise ConfigError(_flag_names(str(exc))) from None
    except OSError as exc:
        logger.error("otel-loopguard: %s", _bind_error(exc, options))
        return _EXIT_USAGE
    gc.collect()  # start-up's garbage is not frozen with the rest
    with fewer_collections():
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            logger.info("%s", _banner(receiver))
            while not stop.wait(_STOP_POLL_S):
                pass  # woken on time: a SIGTERM caught on another thread reaches its handler
            logger.info("otel-loopguard serve: shutting down (finishing accepted spans)")
        finally:
            receiver.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return 0


def _banner(receiver: LoopGuardReceiver) -> str:
    host = receiver.options.host
    parts = []
    if receiver.grpc_port is not None:
        parts.append(f"OTLP/gRPC {host}:{receiver.grpc_port}")
    if receiver.http_port is not None:
        parts.append(f"OTLP/HTTP {receiver.http_url}/v1/traces and /v1/logs "
                     f"(metrics {receiver.http_url}/metrics)")
    auth = "bearer token required" if receiver.options.token else "no auth"
    return f"otel-loopguard serve: listening on {', '.join(parts)}; {auth}"
