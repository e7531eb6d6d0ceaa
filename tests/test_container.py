"""The container image of ``serve``: its Dockerfile, the manifest that uses it, and the image.

Where a container builder answers (``docker info`` succeeds), the image is built and run until
its health check passes. Elsewhere the Dockerfile's instructions are followed on this machine:
its entry point and default arguments start ``serve`` from this checkout, and its health check
command, run as written, sees it healthy.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
TAG = "otel-loopguard:0.1.0"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (keyword, arguments), continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
            for line in lines if line and not line.startswith("#")]


def _last(keyword: str) -> str:
    return [args for key, args in instructions() if key == keyword][-1]


def _exec_form(keyword: str) -> list[str]:
    form = _last(keyword)
    if keyword == "HEALTHCHECK":
        form = form.split(" CMD ", 1)[1]
    parsed = json.loads(form)
    assert isinstance(parsed, list)
    return parsed


def _builder() -> str | None:
    """``docker`` when its daemon answers, else None."""
    if shutil.which("docker") is None:
        return None
    answer = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60)
    return "docker" if answer.returncode == 0 else None


class TestDockerfile:
    """The Dockerfile is the one the design asks for."""

    def test_slim_base_non_root_serve_entry_point_health_check(self) -> None:
        """Every stage is slim; the image runs serve as a numeric non-root user, checks
        /healthz, and listens beyond the container by default."""
        bases = [args.split()[0] for key, args in instructions() if key == "FROM"]
        assert bases and all(base.endswith("-slim") for base in bases)
        assert _last("USER").isdigit() and _last("USER") != "0"
        # --listen in the entry point: arguments after the image name add to it (a token
        # file, ports) instead of replacing it, which left serve on 127.0.0.1, unreachable
        # through -p and still healthy; a later --listen wins
        assert _exec_form("ENTRYPOINT") == ["otel-loopguard", "serve", "--listen", "0.0.0.0"]
        assert _exec_form("CMD") == []
        assert "/healthz" in " ".join(_exec_form("HEALTHCHECK"))
        assert set(_last("EXPOSE").split()) == {"4317", "4318"}

    def test_it_copies_only_what_the_wheel_needs(self) -> None:
        """.dockerignore keeps the build context to the files the build stage copies."""
        copied = {part for key, args in instructions() if key == "COPY" and "--from" not in args
                  for part in args.split()[:-1]}
        allowed = {line[1:].rstrip("/") for line in
                   (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
                   if line.startswith("!")}
        assert copied == allowed

    def test_the_kubernetes_manifest_runs_the_image(self) -> None:
        """kubernetes.yaml runs the image's entry point (args only, no command override) as
        a non-root user."""
        docs = {d["kind"]: d for d in yaml.safe_load_all(
            (ROOT / "collector-config" / "kubernetes.yaml").read_text(encoding="utf-8"))}
        (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == TAG
        assert "command" not in container
        words = _exec_form("ENTRYPOINT") + container["args"]
        listen = [w for i, w in enumerate(words) if i and words[i - 1] == "--listen"]
        assert listen[-1] == "0.0.0.0"  # reachable from the Collector: the last --listen wins
        assert container["securityContext"]["runAsNonRoot"] is True


def test_the_build_stage_builds_a_wheel_with_the_assets(tmp_path: Path) -> None:
    """The build stage's COPY lines bring what ``pip wheel .`` needs: from a context holding
    only them, the wheel builds (the build hook and the dashboards it force-includes are there)
    and carries the dashboard and rules ``otel-loopguard assets`` writes from the image."""
    import importlib.util
    import zipfile

    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling is not installed (it is in the test dependency group)")
    context = tmp_path / "src"
    context.mkdir()
    build = [(key, args) for key, args in instructions() if key in ("FROM", "COPY", "RUN")]
    wheel_at = next(i for i, (_, args) in enumerate(build) if "pip wheel" in args)
    for args in [args for key, args in build[1:wheel_at] if key == "COPY"]:
        *sources, destination = args.split()
        for source in sources:  # as COPY does: a directory's contents, a file by its name
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, context / destination, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            else:
                shutil.copy(ROOT / source, context / destination / Path(source).name
                            if destination.endswith("/") else context / destination)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path / "wheels"), "."],
                          cwd=context, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "LOOPGUARD_PURE_PYTHON": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "wheels").glob("otel_loopguard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"otel_loopguard/assets/{name}" for name in
            ("loopguard.json", "alerts.yaml", "alerts_test.yaml")} <= names


def _wait_healthy(check: list[str], env: dict[str, str], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while subprocess.run(check, env=env, capture_output=True, check=False).returncode != 0:
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "serve never became healthy"
        time.sleep(0.2)


def test_without_a_builder_the_instructions_start_a_healthy_serve(tmp_path: Path) -> None:
    """The entry point and default arguments, run from this checkout, serve /healthz where
    the health check command asks (it retries on another port pair if 4317/4318 are taken)."""
    health = _exec_form("HEALTHCHECK")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for offset in range(0, 50, 2):
        grpc, http = 24317 + offset, 24318 + offset
        command = [sys.executable, "-m", "otel_loopguard", *_exec_form("ENTRYPOINT")[1:],
                   *_exec_form("CMD"), "--grpc-port", str(grpc), "--http-port", str(http)]
        process = subprocess.Popen(command, env=env, cwd=tmp_path, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            time.sleep(0.5)
            if process.poll() is not None and "in use" in process.communicate()[0]:
                continue  # lost the ports to another process: try the next pair
            check = [sys.executable if health[0] == "python" else health[0], *health[1:]]
            _wait_healthy([part.replace(":4318/", f":{http}/") for part in check], env,
                          process)
            return
        finally:
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30)
    pytest.fail("no free port pair")


@pytest.mark.slow
@pytest.mark.skipif(_builder() is None, reason="no container builder answers (docker info)")
def test_the_image_builds_runs_as_non_root_and_turns_healthy() -> None:
    """docker build, then docker run: the container reports healthy, as a non-root user."""
    built = subprocess.run(["docker", "build", "-q", "-t", TAG, str(ROOT)],
                           capture_output=True, text=True, check=False, timeout=900)
    assert built.returncode == 0, built.stderr
    container = subprocess.run(["docker", "run", "-d", "--rm", TAG], capture_output=True,
                               text=True, check=True, timeout=60).stdout.strip()
    try:
        deadline = time.monotonic() + 90
        while True:
            state = json.loads(subprocess.run(
                ["docker", "inspect", "--format", "{{json .State}}", container],
                capture_output=True, text=True, check=True).stdout)
            if state["Health"]["Status"] == "healthy":
                break
            assert state["Running"] and time.monotonic() < deadline, state
            time.sleep(1)
        user = subprocess.run(["docker", "exec", container, "id", "-u"], capture_output=True,
                              text=True, check=True).stdout.strip()
        assert user == "10001"
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


def test_the_documented_commands_use_the_tag() -> None:
    """The Dockerfile's header and docs/deployment.md build and run the tag the manifest uses."""
    for text in (DOCKERFILE.read_text(encoding="utf-8"),
                 (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")):
        commands = [shlex.split(line.lstrip("# ")) for line in text.splitlines()
                    if line.lstrip("# ").startswith("docker build")]
        assert commands and all(TAG in command for command in commands)
