"""Contract tests for ``collector-config/``: the files parse and name loopguard's ports.

No Collector binary is installable here, so these check structure, not behaviour.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from _agent_sessions import collector_lines, sessions
from _prometheus import PROMETHEUS_AVAILABLE, SKIP_REASON, running_prometheus
from prometheus_client import CollectorRegistry
from test_receiver import to_json_doc

from otel_loopguard.cli import main
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.testing import LoopGuardHarness

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "collector-config"
YAML_FILES = sorted(CONFIG_DIR.glob("*.yaml"))
COLLECTOR_FILES = [p for p in YAML_FILES if p.name.startswith("otelcol-")]
GRPC_PORT = 4317
HTTP_PORT = 4318
KINDS = ("receivers", "processors", "exporters", "connectors")
SCRAPE_FILES = sorted(CONFIG_DIR.glob("prometheus-scrape*.yaml"))
TOKEN_FILE = "/etc/prometheus/loopguard/token"
requires_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                       reason="promtool not installed (apt-get install prometheus)")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _kubernetes() -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(
        (CONFIG_DIR / "kubernetes.yaml").read_text(encoding="utf-8"))}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def _with_token_file(config: dict[str, Any], tmp_path: Path) -> Path:
    """Write ``config`` with its token file path pointed at a real file; return the path."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    for job in config["scrape_configs"]:
        if "authorization" in job:
            assert job["authorization"]["credentials_file"] == TOKEN_FILE
            job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _up(prom: Any) -> dict[str, float]:
    return {r["metric"]["job"]: float(r["value"][1]) for r in prom.query("up")}


def port_of(endpoint: str) -> int:
    """Return the port of ``host:port`` or a URL."""
    parts = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    assert parts.port is not None, endpoint
    return parts.port


def test_documented_ports_are_serve_defaults() -> None:
    """The ports the configs use are the ones ``serve`` listens on by default."""
    options = ReceiverOptions()
    assert (options.grpc_port, options.http_port, options.host) == (GRPC_PORT, HTTP_PORT,
                                                                    "127.0.0.1")


def test_readme_lists_every_file() -> None:
    """collector-config/README.md describes each YAML file and the ports."""
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    for path in YAML_FILES:
        assert f"`{path.name}`" in readme
    assert "| 4317 | loopguard |" in readme and "| 4318 | loopguard |" in readme


@pytest.mark.parametrize("path", YAML_FILES, ids=ids(YAML_FILES))
def test_parses(path: Path) -> None:
    """Every YAML file parses (multi-document files too) and is not empty."""
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    assert docs and all(isinstance(d, dict) for d in docs)


class TestCollectorConfigs:
    @pytest.mark.parametrize("path", COLLECTOR_FILES, ids=ids(COLLECTOR_FILES))
    def test_pipelines_use_defined_components(self, path: Path) -> None:
        """Each component named in a pipeline is defined; connectors feed a second pipeline."""
        config = load(path)
        pipelines = config["service"]["pipelines"]
        assert pipelines
        connectors = set(config.get("connectors") or {})
        for pipeline in pipelines.values():
            assert pipeline["receivers"] and pipeline["exporters"]
            for kind in ("receivers", "processors", "exporters"):
                for name in pipeline.get(kind) or []:
                    defined = set(config.get(kind) or {})
                    if kind != "processors":
                        defined |= connectors
                    assert name in defined, (kind, name)
        for connector in connectors:
            assert any(connector in p["exporters"] for p in pipelines.values())
            assert any(connector in p["receivers"] for p in pipelines.values())

    @pytest.mark.parametrize("path", COLLECTOR_FILES, ids=ids(COLLECTOR_FILES))
    def test_loopguard_endpoints_use_the_documented_ports(self, path: Path) -> None:
        """Exporters aimed at loopguard use 4317 for gRPC and 4318 for HTTP."""
        exporters = load(path)["exporters"]
        for name, settings in exporters.items():
            endpoint = str((settings or {}).get("endpoint", ""))
            if "loopguard" not in endpoint:
                continue
            expected = HTTP_PORT if name.startswith("otlphttp") else GRPC_PORT
            assert port_of(endpoint) == expected, (name, endpoint)

    @pytest.mark.parametrize("path", COLLECTOR_FILES, ids=ids(COLLECTOR_FILES))
    def test_collector_receives_otlp(self, path: Path) -> None:
        """The Collector's own OTLP receiver takes gRPC on 4317 and HTTP on 4318."""
        protocols = load(path)["receivers"]["otlp"]["protocols"]
        assert port_of(protocols["grpc"]["endpoint"]) == GRPC_PORT
        assert port_of(protocols["http"]["endpoint"]) == HTTP_PORT

    def test_single_instance_sends_every_trace_to_loopguard(self) -> None:
        """(a): the traces pipeline exports to loopguard and keeps the tracing backend."""
        config = load(CONFIG_DIR / "otelcol-to-loopguard.yaml")
        exporters = config["service"]["pipelines"]["traces"]["exporters"]
        assert "otlp/loopguard" in exporters and "otlp/tempo" in exporters
        assert "authorization" in config["exporters"]["otlp/loopguard"]["headers"]

    @pytest.mark.parametrize(("name", "exporter"),
                             [("otelcol-to-loopguard.yaml", "otlp/loopguard"),
                              ("otelcol-to-file.yaml", "file/loopguard-logs")])
    def test_coding_agents_logs_reach_loopguard(self, name: str, exporter: str) -> None:
        """The coding agents report tool calls as log events: a Collector refuses a signal no
        pipeline takes (404 on /v1/logs, gRPC UNIMPLEMENTED), so a logs pipeline carries them
        from the OTLP receiver to loopguard (or to a file of their own for ``check``)."""
        config = load(CONFIG_DIR / name)
        logs = config["service"]["pipelines"]["logs"]
        assert logs["receivers"] == ["otlp"] and logs["exporters"] == [exporter]
        if exporter.startswith("file/"):
            files = {n: s["path"] for n, s in config["exporters"].items() if n.startswith("file/")}
            assert len(set(files.values())) == len(files)  # traces and logs in files apart
            assert config["exporters"][exporter]["format"] == "json"  # check reads no proto logs

    def test_file_exporter_logs_are_what_check_reads(self, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        """(c): a logs file as the logs pipeline writes it makes ``check`` flag the looping
        coding-agent sessions, read from the folder the config's comment names."""
        exporter = load(CONFIG_DIR / "otelcol-to-file.yaml")["exporters"]["file/loopguard-logs"]
        folder = tmp_path / Path(exporter["path"]).parent.name
        folder.mkdir()
        (folder / Path(exporter["path"]).name).write_text("\n".join(collector_lines(
            sessions())) + "\n")
        assert main(["check", str(folder), "--format", "json"]) == 1
        flagged = {r["run_id"].split(":")[0] for r in json.loads(capsys.readouterr().out)["runs"]
                   if r["action"] != "continue"}
        assert flagged == {"claude-code", "codex", "gemini-cli"}

    @pytest.mark.parametrize("resolver", ["static", "dns", "k8s"])
    def test_load_balancing(self, resolver: str) -> None:
        """(b): routing by trace id to loopguard's gRPC port, spanmetrics beside it."""
        config = load(CONFIG_DIR / f"otelcol-loadbalancing-{resolver}.yaml")
        balancer = config["exporters"]["loadbalancing"]
        assert balancer["routing_key"] == "traceID"
        assert "endpoint" not in balancer["protocol"]["otlp"]
        assert list(balancer["resolver"]) == [resolver]
        settings = balancer["resolver"][resolver]
        if resolver == "static":
            assert len(settings["hostnames"]) >= 2
            assert {port_of(h) for h in settings["hostnames"]} == {GRPC_PORT}
        elif resolver == "dns":
            assert settings["port"] == GRPC_PORT
        else:
            assert settings["ports"] == [GRPC_PORT]
        traces = config["service"]["pipelines"]["traces"]["exporters"]
        assert "loadbalancing" in traces and "spanmetrics" in traces
        assert config["service"]["pipelines"]["metrics"]["receivers"] == ["spanmetrics"]
        assert port_of(config["exporters"]["prometheus"]["endpoint"]) == 8889

    def test_file_exporter_writes_what_check_reads(self, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """(c): JSON Lines without zstd; a file in that format makes ``check`` find the loop."""
        exporter = load(CONFIG_DIR / "otelcol-to-file.yaml")["exporters"]["file/loopguard"]
        assert exporter["format"] == "json" and "compression" not in exporter
        harness = LoopGuardHarness()
        with harness.run("a") as agent:
            for _ in range(5):
                agent.tool("search", {"q": "x"}, {"hits": []})
        spans = harness.exporter.get_finished_spans()
        path = tmp_path / Path(exporter["path"]).name
        lines = [json.dumps(to_json_doc(spans[:3])), json.dumps(to_json_doc(spans[3:]))]
        path.write_text("\n".join(lines) + "\n")
        assert main(["check", str(path), "--format", "json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["runs"][0]["action"] == "stop"

    def test_file_exporter_zstd_is_read_as_the_comment_says(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """With ``compression: zstd`` the file exporter writes each JSON message zstd-compressed
        in 4-byte length-prefixed frames; ``check`` reads that (the zstd extra), and the config's
        comment says so instead of telling users it does not."""
        zstandard = pytest.importorskip("zstandard")
        text = (CONFIG_DIR / "otelcol-to-file.yaml").read_text(encoding="utf-8")
        assert "compression: zstd` (the file" in text and "not zstd" not in text
        harness = LoopGuardHarness()
        with harness.run("a") as agent:
            for _ in range(5):
                agent.tool("search", {"q": "x"}, {"hits": []})
        spans = harness.exporter.get_finished_spans()
        frames = [zstandard.ZstdCompressor().compress(json.dumps(to_json_doc(part)).encode())
                  for part in (spans[:3], spans[3:])]
        path = tmp_path / "traces.jsonl"
        path.write_bytes(b"".join(len(f).to_bytes(4, "big") + f for f in frames))
        assert main(["check", str(path), "--format", "json"]) == 1
        assert json.loads(capsys.readouterr().out)["runs"][0]["action"] == "stop"


class TestPrometheusAndKubernetes:
    def test_scrape_targets_use_the_metrics_port(self) -> None:
        """Every loopguard scrape job reads /metrics on 4318."""
        jobs = [j for path in SCRAPE_FILES for j in load(path)["scrape_configs"]]
        loopguard = [j for j in jobs if j["job_name"].startswith("loopguard")]
        assert len(loopguard) == 3
        for job in loopguard:
            assert job["metrics_path"] == "/metrics"
        static = next(j for j in loopguard if "static_configs" in j)
        targets = static["static_configs"][0]["targets"]
        assert len(targets) == 3 and {port_of(t) for t in targets} == {HTTP_PORT}
        dns = next(j for j in loopguard if "dns_sd_configs" in j)
        assert dns["dns_sd_configs"][0]["port"] == HTTP_PORT
        k8s = next(j for j in loopguard if "kubernetes_sd_configs" in j)
        assert any(r.get("regex") == str(HTTP_PORT) for r in k8s["relabel_configs"])

    @pytest.mark.prometheus
    @pytest.mark.skipif(not PROMETHEUS_AVAILABLE, reason=SKIP_REASON)
    def test_prometheus_scrapes_a_token_protected_serve(self, tmp_path: Path) -> None:
        """A real Prometheus with the shipped job's authorization block scrapes a serve that
        requires the token (up == 1); the same job without it gets 401 (up == 0)."""
        (job,) = [j for j in load(CONFIG_DIR / "prometheus-scrape.yaml")["scrape_configs"]
                  if j["job_name"] == "loopguard"]
        token = tmp_path / "token"
        token.write_text("s3cret\n")
        options = ReceiverOptions(http_port=0, grpc_port=None, token="s3cret")
        with LoopGuardReceiver(options=options, registry=CollectorRegistry()) as receiver:
            target = f"127.0.0.1:{receiver.http_port}"
            with_token = {**job, "authorization": {**job["authorization"],
                                                   "credentials_file": str(token)},
                          "static_configs": [{"targets": [target]}]}
            without = {"job_name": "no-token", "metrics_path": "/metrics",
                       "static_configs": [{"targets": [target]}]}
            with running_prometheus([], tmp_path=tmp_path / "prom",
                                    scrape_configs=[with_token, without]) as prom:
                prom.wait_for('count(up{job="no-token"}) and count(up{job="loopguard"})')
                assert _up(prom) == {"loopguard": 1.0, "no-token": 0.0}

    def test_every_loopguard_job_sends_the_token(self) -> None:
        """kubernetes.yaml makes serve require a token on /metrics, so every loopguard scrape
        job sends it as a bearer token read from the documented file."""
        (container,) = _kubernetes()["Deployment"]["spec"]["template"]["spec"]["containers"]
        assert "--token-file" in container["args"]
        jobs = [j for path in SCRAPE_FILES for j in load(path)["scrape_configs"]
                if j["job_name"].startswith("loopguard")]
        assert len(jobs) == 3
        for job in jobs:
            assert job["authorization"] == {"type": "Bearer",
                                            "credentials_file": TOKEN_FILE}, job["job_name"]
        readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
        assert TOKEN_FILE in readme

    @requires_promtool
    def test_promtool_accepts_the_scrape_config(self, tmp_path: Path) -> None:
        """prometheus-scrape.yaml passes promtool check config as shipped (syntax), and in full
        once the token file it names exists."""
        path = CONFIG_DIR / "prometheus-scrape.yaml"
        result = _promtool("check", "config", "--syntax-only", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        result = _promtool("check", "config", str(_with_token_file(load(path), tmp_path)))
        assert result.returncode == 0, result.stdout + result.stderr

    @requires_promtool
    def test_promtool_accepts_the_kubernetes_job_but_its_discovery(self, tmp_path: Path) -> None:
        """The Kubernetes job passes promtool check config once its discovery block is swapped
        for a static one (Debian's promtool has no Kubernetes discovery)."""
        config = load(CONFIG_DIR / "prometheus-scrape-kubernetes.yaml")
        (job,) = config["scrape_configs"]
        assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
        job["static_configs"] = [{"targets": ["loopguard-0:4318"]}]
        result = _promtool("check", "config", str(_with_token_file(config, tmp_path)))
        assert result.returncode == 0, result.stdout + result.stderr

    def test_kubernetes_manifest(self) -> None:
        """The headless service and pods expose 4317/4318 and probe /healthz: readiness too,
        since /readyz flips under backpressure and a pod out of the trace-id ring splits traces."""
        docs = _kubernetes()
        service = docs["Service"]["spec"]
        assert service["clusterIP"] == "None"
        assert {p["port"] for p in service["ports"]} == {GRPC_PORT, HTTP_PORT}
        (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
        assert container["args"][:2] == ["--listen", "0.0.0.0"]  # entry point: serve
        assert {p["containerPort"] for p in container["ports"]} == {GRPC_PORT, HTTP_PORT}
        assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": HTTP_PORT}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": HTTP_PORT}
        resources = {r["resources"][0] for r in docs["Role"]["rules"]}
        assert resources == {"endpointslices", "endpoints"}  # newer and older Collectors
        k8s = load(CONFIG_DIR / "otelcol-loadbalancing-k8s.yaml")
        name = docs["Service"]["metadata"]["name"]
        namespace = docs["Service"]["metadata"]["namespace"]
        assert k8s["exporters"]["loadbalancing"]["resolver"]["k8s"]["service"] == \
            f"{name}.{namespace}"


def test_deployment_doc_states_the_limits() -> None:
    """docs/deployment.md says which Collector to use and how to validate the configs, and
    names the conversation limit."""
    text = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "otelcol-contrib 0.139 or later" in text
    assert "otelcol-contrib validate --config" in text
    assert "run_key = conversation" in text or "conversation" in text
    for path in YAML_FILES:
        assert path.name in text
