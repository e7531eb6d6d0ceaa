"""Run a real Prometheus server on 127.0.0.1 for integration tests.

``running_prometheus()`` starts ``/usr/bin/prometheus`` (Debian's ``prometheus`` package) with a
1 s scrape and rule-evaluation interval, a private TSDB directory and a free loopback port, and
stops it on exit::

    with running_prometheus(
        ["127.0.0.1:9464"], ["dashboards/alerts.yaml"], tmp_path=tmp_path
    ) as prom:
        prom.wait_for("loopguard_runs_total", bool)

The ``prometheus_factory`` fixture does the same inside a test and stops every server it started
at teardown. Tests using it should be marked ``@pytest.mark.prometheus`` and skip when
``PROMETHEUS_AVAILABLE`` is false.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

PROMETHEUS_BIN = "/usr/bin/prometheus"
"""The server binary from Debian's ``prometheus`` package (CI installs it with apt)."""
PROMETHEUS_AVAILABLE = Path(PROMETHEUS_BIN).is_file()
"""Whether integration tests can start a real Prometheus."""
SKIP_REASON = f"{PROMETHEUS_BIN} not found; install it with `apt-get install prometheus`"
"""Reason to give ``pytest.mark.skipif`` when ``PROMETHEUS_AVAILABLE`` is false."""
MARKER = "prometheus: starts a real Prometheus server (needs /usr/bin/prometheus)"
"""The marker line to register with pytest (see ``pytest_configure``)."""

_READY_TIMEOUT_SECONDS = 30.0
_STOP_TIMEOUT_SECONDS = 10.0
_PORT_ATTEMPTS = 5
_HTTP_TIMEOUT_SECONDS = 5.0


class PrometheusError(RuntimeError):
    """Prometheus failed to start, or an API call did not return ``status: success``."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``prometheus`` marker (this module is loaded through ``pytest_plugins``)."""
    config.addinivalue_line("markers", MARKER)


@dataclass(frozen=True)
class PrometheusServer:
    """A running Prometheus server.

    Its HTTP API helpers block for at most a few seconds per call.
    """

    url: str
    """Base URL, e.g. ``http://127.0.0.1:41234``."""
    config_path: Path
    """The generated ``prometheus.yml``."""
    log_path: Path
    """Where the server's stderr (its log) goes."""
    process: subprocess.Popen[bytes]
    """The server process."""

    def api(self, path: str, params: dict[str, str] | None = None) -> Any:
        """Return the ``data`` of a ``/api/v1/...`` GET; ``PrometheusError`` unless a success."""
        url = f"{self.url}{path}"
        if params:
            url = f"{url}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=_HTTP_TIMEOUT_SECONDS) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:  # 400/422/503 still carry a JSON error body
            with exc:
                raw = exc.read()
            try:
                body = json.loads(raw)
            except ValueError:
                raise PrometheusError(f"{path}: HTTP {exc.code}: {raw[:500]!r}") from exc
        if body.get("status") != "success":
            raise PrometheusError(
                f"{path} {params or ''}: {body.get('errorType')}: {body.get('error')}"
            )
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate an instant query and return its result list.

        The list looks like ``[{"metric": {...}, "value": [t, "v"]}]``.
        """
        data = self.api("/api/v1/query", {"query": expr})
        result = data["result"]
        return result if isinstance(result, list) else [{"metric": {}, "value": result}]

    def wait_for(
        self,
        expr: str,
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """Poll ``query(expr)`` until ``predicate(result)`` holds; return it, or TimeoutError."""
        return wait_until(lambda: self.query(expr), predicate, timeout, what=f"query {expr!r}")

    def alerts(self) -> list[dict[str, Any]]:
        """Return the active (pending or firing) alerts from ``/api/v1/alerts``."""
        return list(self.api("/api/v1/alerts")["alerts"])

    def rules(self) -> list[dict[str, Any]]:
        """Return the rule groups of ``/api/v1/rules`` (each with ``name``, ``file``, ``rules``)."""
        return list(self.api("/api/v1/rules")["groups"])

    def targets(self) -> list[dict[str, Any]]:
        """Return the active targets of ``/api/v1/targets`` (with ``scrapeUrl``, ``health``)."""
        return list(self.api("/api/v1/targets", {"state": "active"})["activeTargets"])

    def log(self) -> str:
        """Return what the server has logged so far."""
        return self.log_path.read_text(errors="replace")


def wait_until(
    fetch: Callable[[], Any],
    predicate: Callable[[Any], bool] = bool,
    timeout: float = 30.0,
    *,
    what: str = "condition",
    interval: float = 0.2,
) -> Any:
    """Call ``fetch()`` until ``predicate`` accepts its value; return it or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if predicate(value):
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not satisfied after {timeout:g}s; last value: {value!r}")
        time.sleep(interval)


def free_port() -> int:
    """Return a loopback port that was free a moment ago (callers must tolerate losing the race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(
    path: Path,
    targets: Sequence[str],
    rule_files: Sequence[str | Path] = (),
    scrape_configs: Sequence[dict[str, Any]] | None = None,
) -> Path:
    """Write a prometheus.yml: job ``loopguard`` scrapes ``targets`` every second, with rules.

    ``rule_files`` are loaded as the configuration's rule files. ``scrape_configs``, when given,
    replace the ``loopguard`` job (``targets`` is then ignored).
    """
    jobs = list(scrape_configs) if scrape_configs is not None else [
        {"job_name": "loopguard", "static_configs": [{"targets": list(targets)}]}]
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(Path(f).resolve()) for f in rule_files],
        "scrape_configs": jobs,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextlib.contextmanager
def running_prometheus(
    targets: Sequence[str],
    rule_files: Sequence[str | Path] = (),
    *,
    tmp_path: Path | None = None,
    scrape_configs: Sequence[dict[str, Any]] | None = None,
    flags: Sequence[str] = (),
) -> Iterator[PrometheusServer]:
    """Start Prometheus on 127.0.0.1 scraping ``targets``; yield it once ready, stop it on exit.

    ``flags`` are added to the command line (``--enable-feature=exemplar-storage``).

    Targets are ``host:port``; ``scrape_configs`` replace the default job (see
    :func:`write_config`), and their static targets are the ones waited for.
    "Ready" means ``/-/ready`` answers and every target is listed as active (not necessarily
    scraped yet). Files go under ``tmp_path`` (a fresh temporary directory when None). Raises
    ``PrometheusError``, including the server's log, if it does not become ready within 30 s.
    """
    with contextlib.ExitStack() as stack:
        if tmp_path is None:
            tmp_path = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="loopguard-prom-"))
            )
        tmp_path.mkdir(parents=True, exist_ok=True)
        config_path = write_config(tmp_path / "prometheus.yml", targets, rule_files,
                                   scrape_configs)
        if scrape_configs is not None:
            targets = [t for job in scrape_configs for c in job.get("static_configs", [])
                       for t in c["targets"]]
        server = _start(config_path, tmp_path, flags)
        try:
            wait_until(
                server.targets,
                lambda active: len(active) >= len(targets),
                _READY_TIMEOUT_SECONDS,
                what="scrape targets active",
            )
            yield server
        finally:
            _stop(server.process)


def _start(config_path: Path, tmp_path: Path, flags: Sequence[str] = ()) -> PrometheusServer:
    """Start the server, retrying on a fresh port when another process grabbed the one we picked."""
    for attempt in range(1, _PORT_ATTEMPTS + 1):
        server = _launch(config_path, tmp_path, attempt, flags)
        if _wait_ready(server):
            return server
        _stop(server.process)
        if "address already in use" not in server.log():
            break
    raise PrometheusError(
        f"Prometheus did not become ready on {server.url} within {_READY_TIMEOUT_SECONDS:g}s "
        f"(attempt {attempt}, exit code {server.process.returncode}); its log:\n{server.log()}"
    )


def _launch(config_path: Path, tmp_path: Path, attempt: int,
            flags: Sequence[str] = ()) -> PrometheusServer:
    """Spawn the server on a free port with its own data directory and log file."""
    port = free_port()
    log_path = tmp_path / f"prometheus-{attempt}.log"
    with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [
                PROMETHEUS_BIN,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={tmp_path / f'data-{attempt}'}",
                "--storage.tsdb.retention.time=1h",
                f"--web.listen-address=127.0.0.1:{port}",
                *flags,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    return PrometheusServer(f"http://127.0.0.1:{port}", config_path, log_path, process)


def _wait_ready(server: PrometheusServer) -> bool:
    """Poll ``/-/ready``; return False as soon as the process exits or the timeout passes."""
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=1.0) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the process (SIGTERM, then SIGKILL after 10 s) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(name="prometheus_factory")
def _prometheus_factory(tmp_path: Path) -> Iterator[Callable[..., PrometheusServer]]:
    """Yield ``start(targets, rule_files=())``, which runs one Prometheus per call.

    All of them are stopped at teardown.
    """
    with contextlib.ExitStack() as stack:
        count = 0

        def start(
            targets: Sequence[str], rule_files: Sequence[str | Path] = ()
        ) -> PrometheusServer:
            nonlocal count
            count += 1
            return stack.enter_context(
                running_prometheus(targets, rule_files, tmp_path=tmp_path / f"prometheus-{count}")
            )

        yield start
