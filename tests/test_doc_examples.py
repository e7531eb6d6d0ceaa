"""Every Python and shell example of README.md and docs/ runs, so a wrong example fails CI.

Each fenced ``python``, ``bash``, ``sh`` or ``console`` block is one test. It runs in a fresh
process (examples set the global tracer provider, bind ports), in a scratch directory that holds
what the pages refer to: ``traces/`` and ``traces.jsonl`` (the repository's example traces),
``app.py`` (an application that calls ``otel_loopguard.install()``), and every block of the page
whose first line names a file (``# loopguard.toml``). ``otel-loopguard`` on the ``PATH`` runs this
checkout.

An HTML comment on the line before a block says what the block needs, in ``key=value`` words
(``<!-- example: given=provider exit=1 -->``):

* ``given=a,b``: names the block uses without defining them, defined first (``GIVEN``);
* ``continues``: the page's previous Python block runs first (a fragment that builds on it);
* ``checkout``: runs in a copy of this checkout (``pip install .``), not the scratch directory;
* ``exit=N``: the shell block's expected exit status (``check`` finding loops exits 1);
* ``serves=URL``: a command that runs until stopped: it must answer ``URL``, then it is stopped;
* ``output``: what it prints must be the page's next ``text`` block, as written;
* ``env``: the block exports ``LOOPGUARD_*`` variables: ``LoopGuardConfig.from_env()`` must
  accept them;
* ``pytest``: the block is a test file, run by pytest;
* ``requires=mod``: skipped where that module is not installed;
* ``network`` (or ``gpu``): needs the network (a package index, a model's API) or a GPU: marked
  so, and run only with ``pytest --network``;
* ``skip=why``: not run here (README's test command is run by ``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
RUNNABLE = frozenset({"python", "bash", "sh", "console"})
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_DIRECTIVES = re.compile(r"<!--\s*example:(?P<words>.*?)-->")
_TIMEOUT = 120

GIVEN = {
    "provider": "from opentelemetry.sdk.trace import TracerProvider\nprovider = TracerProvider()",
    "export": "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
              "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
              "InMemorySpanExporter\nexport = SimpleSpanProcessor(InMemorySpanExporter())",
    "batch": "from opentelemetry.sdk.trace.export import BatchSpanProcessor\n"
             "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
             "InMemorySpanExporter\nbatch = BatchSpanProcessor(InMemorySpanExporter())",
    "imports": "import os\nfrom opentelemetry.exporter.otlp.proto.grpc.trace_exporter import "
               "OTLPSpanExporter\nfrom opentelemetry.sdk.trace.export import BatchSpanProcessor\n"
               "from otel_loopguard import LoopEngine, LoopGuardConfig, LoopGuardSpanProcessor",
    "config": "from otel_loopguard import LoopGuardConfig\nconfig = LoopGuardConfig()",
    "run_agent": "from opentelemetry.sdk.trace import TracerProvider\n"
                 "from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, ToolGuard\n"
                 "_provider = TracerProvider()\n_processor = LoopGuardSpanProcessor("
                 "LoopGuardConfig.create(mode='enforce'), registry=None)\n"
                 "_provider.add_span_processor(_processor)\n"
                 "_guard = ToolGuard(_processor, tracer_provider=_provider)\n"
                 "@_guard.tool\ndef search(query):\n    return 'no results'\n"
                 "def run_agent(question):\n"
                 "    with _provider.get_tracer('a').start_as_current_span('invoke_agent a'):\n"
                 "        while True:\n            search(question)\n"
                 "question = 'refund policy'",
    "multiprocess": "import os, tempfile\nos.environ['PROMETHEUS_MULTIPROC_DIR'] = "
                    "tempfile.mkdtemp()",
    "metric_reader": "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
                     "metric_reader = InMemoryMetricReader()",
    "app": "class _App:\n    def mount(self, path, app):\n        assert path and callable(app)\n"
           "app = _App()",
}
"""Prelude code for the names a fragment uses without defining them."""

APP = '''"""An application that calls otel_loopguard.install(), as the pages describe."""
import os
import urllib.request

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import otel_loopguard

if not isinstance(trace.get_tracer_provider(), TracerProvider):
    trace.set_tracer_provider(TracerProvider())
otel_loopguard.install()
port = os.environ.get("LOOPGUARD_METRICS_PORT")
if port:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert b"loopguard_" in response.read()
print("app ran")
'''


@dataclass
class Example:
    """One fenced block of a page, with what its comment says it needs."""

    page: Path
    line: int
    lang: str
    code: str
    directives: dict[str, str]
    before: list[Example] = field(default_factory=list)
    """The page's earlier blocks (files to write, the block it continues)."""
    next_text: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """Return the fenced blocks of ``page``, runnable or not, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence or not fence["lang"]:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        indent = len(fence["indent"])
        code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        words = _DIRECTIVES.search(previous)
        directives = dict(w.partition("=")[::2] for w in words["words"].split()) if words else {}
        found.append(Example(page, i + 1, fence["lang"], code, directives, list(found)))
        i = end + 1
    for example, following in itertools.pairwise(found):
        example.next_text = following.code if following.lang == "text" else None
    return found


ALL = [e for page in PAGES for e in examples(page) if e.lang in RUNNABLE]


def _params() -> list[object]:
    marks = {"network": pytest.mark.network, "gpu": pytest.mark.network}
    return [pytest.param(e, id=e.id, marks=[m for k, m in marks.items() if k in e.directives])
            for e in ALL]


@pytest.fixture(name="workdir")
def _workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "traces", tmp_path / "traces")
    shutil.copy(ROOT / "examples" / "traces" / "looping_agent.jsonl", tmp_path / "traces.jsonl")
    (tmp_path / "app.py").write_text(APP)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "otel-loopguard"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m otel_loopguard "$@"\n')
    shim.chmod(0o755)
    return tmp_path


def _env(workdir: Path) -> dict[str, str]:
    """The environment of an example: this checkout first, or a fresh venv's ``pip``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPGUARD_", "OTEL_"))}
    own = workdir / ".venv-example" / "bin"
    first = [str(own)] if own.is_dir() else []
    env["PATH"] = os.pathsep.join([*first, str(workdir / ".bin"), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["OTEL_TRACES_EXPORTER"] = env["OTEL_METRICS_EXPORTER"] = env["OTEL_LOGS_EXPORTER"] = "none"
    return env


def _checkout(workdir: Path) -> Path:
    """Copy the files git tracks (and the new ones it does not ignore) under ``workdir``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    target = workdir / "checkout"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    shutil.copytree(workdir / ".bin", target / ".bin")
    return target


def _write_files(example: Example, workdir: Path) -> None:
    for block in example.before:
        first = block.code.splitlines()[0] if block.code.strip() else ""
        name = re.fullmatch(r"#\s*([\w.-]+\.(?:toml|py|yaml|json))", first.strip())
        if name:
            (workdir / name[1]).write_text(block.code)


def _python_source(example: Example) -> str:
    given = [GIVEN[name] for name in example.directives.get("given", "").split(",") if name]
    parts = [*given]
    if "continues" in example.directives:
        previous = [b for b in example.before if b.lang == "python"]
        assert previous, f"{example.id}: 'continues' but no Python block before it"
        parts.append(previous[-1].code)
    return "\n".join([*parts, example.code])


def _shell_source(example: Example) -> str:
    if example.lang != "console":
        code = example.code
    else:
        code = "\n".join(line[2:] for line in example.code.splitlines() if line.startswith("$ "))
    if "env" in example.directives:
        code += ('\npython -c "from otel_loopguard import LoopGuardConfig; '
                 'LoopGuardConfig.from_env()"\n')
    return code


def _command(example: Example, workdir: Path) -> list[str]:
    if example.lang == "python" and "pytest" in example.directives:
        (workdir / "test_example.py").write_text(example.code)
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "test_example.py"]
    if example.lang == "python":
        return [sys.executable, "-c", _python_source(example)]
    return ["bash", "-e", "-o", "pipefail", "-c", _shell_source(example)]


def _serve(command: list[str], workdir: Path, url: str) -> None:
    process = subprocess.Popen(command, cwd=workdir, env=_env(workdir), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    assert response.status == 200
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        os.killpg(process.pid, 15)
        process.communicate(timeout=30)


@pytest.mark.parametrize("example", _params())
def test_example_runs(example: Example, workdir: Path) -> None:
    """The block runs as written, with the exit status and output the page shows."""
    if "skip" in example.directives:
        pytest.skip(example.directives["skip"])
    for module in filter(None, example.directives.get("requires", "").split(",")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}")
    _write_files(example, workdir)
    if "checkout" in example.directives:
        workdir = _checkout(workdir)
    if "network" in example.directives and example.lang != "python":
        # what it installs goes into a venv of its own, never the one running the tests
        subprocess.run([sys.executable, "-m", "venv", workdir / ".venv-example"], check=True)
    command = _command(example, workdir)
    if "serves" in example.directives:
        _serve(command, workdir, example.directives["serves"])
        return
    result = subprocess.run(command, cwd=workdir, env=_env(workdir), capture_output=True,
                            text=True, timeout=_TIMEOUT, check=False)
    expected = int(example.directives.get("exit", "0"))
    assert result.returncode == expected, f"{example.id}\n{result.stdout}\n{result.stderr}"
    if "output" in example.directives:
        assert result.stdout == example.next_text


def test_every_runnable_block_is_found() -> None:
    """The pages hold the examples this module runs (a broken parser would run none)."""
    assert len(ALL) >= 30
    assert {e.lang for e in ALL} >= {"python", "bash"}
    unknown = {k for e in ALL for k in e.directives} - {
        "given", "continues", "checkout", "exit", "serves", "output", "env", "pytest", "requires",
        "network", "gpu", "skip"}
    assert unknown == set()
    assert {n for e in ALL for n in e.directives.get("given", "").split(",") if n} <= set(GIVEN)


def test_test_files_are_run_by_pytest() -> None:
    """A Python block that defines a ``test_`` function is marked ``pytest``: run as a script it
    would only define the function, and its assertions would never run."""
    defines_test = re.compile(r"^(?:async )?def test_\w*\(", re.MULTILINE)
    unmarked = [e.id for e in ALL if e.lang == "python" and defines_test.search(e.code)
                and "pytest" not in e.directives]
    assert unmarked == []


PROMQL = [e for page in PAGES for e in examples(page) if e.lang == "promql"]


def _one_line(expr: str) -> str:
    return " ".join(expr.split())


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (apt-get install prometheus)")
def test_promql_examples_parse_and_match_the_rules(tmp_path: Path) -> None:
    """Every ``promql`` block of the pages is an expression Prometheus accepts (each recorded
    by a rule that ``promtool check rules`` reads), and one the page calls the expression
    behind an alert is a recording rule of the shipped ``alerts.yaml``, as written."""
    import yaml

    assert len(PROMQL) >= 2
    rules = {"groups": [{"name": "docs", "rules": [
        {"record": f"docs:example{i}", "expr": e.code} for i, e in enumerate(PROMQL)]}]}
    path = tmp_path / "docs-rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    shipped = yaml.safe_load((ROOT / "dashboards" / "alerts.yaml").read_text(encoding="utf-8"))
    recorded = {_one_line(r["expr"]) for g in shipped["groups"] for r in g["rules"]
                if "record" in r}
    behind = [e for e in PROMQL if "expression behind" in _prose_before(e)]
    assert behind, "no block is said to be an alert's expression"
    assert [e.id for e in behind if _one_line(e.code) not in recorded] == []


def _prose_before(example: Example) -> str:
    """The four lines of its page before ``example``'s fence."""
    lines = example.page.read_text(encoding="utf-8").splitlines()
    return " ".join(lines[max(0, example.line - 5):example.line - 1])


INSTALL = re.compile(r"pip install [^\n`&;|]*otel-loopguard[^\n`&;|]*")
ONE_FORM = re.compile(r'pip install "otel-loopguard(?:\[\w+(?:,\w+)*\])? @ '
                      r'git\+https://github\.com/otel-loopguard/otel-loopguard"')


@pytest.mark.parametrize("page", [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                                  ROOT / "collector-config" / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_installs_take_one_form(page: Path) -> None:
    """Until the package is published, every page installs it from its repository, one way."""
    found = INSTALL.findall(page.read_text(encoding="utf-8"))
    assert [line for line in found if not ONE_FORM.search(line)] == []


def test_the_install_form_builds_this_checkout(tmp_path: Path) -> None:
    """The documented requirement, pointed at this checkout instead of GitHub, resolves: the
    name and the extras are those of the package (no index, no dependencies fetched)."""
    pytest.importorskip("hatchling")
    requirement = f"otel-loopguard[zstd] @ {ROOT.as_uri()}"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
         "--no-build-isolation", "--report", str(tmp_path / "report.json"), requirement],
        capture_output=True, text=True, check=False, timeout=_TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert "otel-loopguard" in (tmp_path / "report.json").read_text()
