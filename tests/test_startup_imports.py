"""``check`` starts without importing what only other commands run (start-up is its fixed cost).

Each case runs the command line in a fresh interpreter and lists the modules it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_loopguard.cli import main

_ROOT = Path(__file__).resolve().parent.parent
_TRACE = _ROOT / "examples" / "traces" / "looping_agent.jsonl"

_PROBE = """
import json, sys
from otel_loopguard.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _imported(*argv: str) -> tuple[int, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(_ROOT)}
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True,
                          env=env, cwd=_ROOT, check=False, timeout=120)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    return result["code"], set(result["modules"])


def _prefixed(modules: set[str], *prefixes: str) -> set[str]:
    return {m for m in modules if m.startswith(prefixes)}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_imports_neither_the_sdk_nor_prometheus_nor_the_ci_formats(fmt: str) -> None:
    code, modules = _imported("check", "--format", fmt, str(_TRACE))
    assert code == 1  # the example loops: check really ran
    assert not _prefixed(modules, "opentelemetry", "prometheus_client", "xml",
                         "otel_loopguard.receiver", "otel_loopguard.processor",
                         "otel_loopguard.cli._demo", "otel_loopguard.cli._serve",
                         "otel_loopguard.cli._junit", "otel_loopguard.cli._sarif",
                         "tempfile", "tomllib")


def test_check_imports_the_ci_format_it_writes() -> None:
    code, modules = _imported("check", "--format", "junit", str(_TRACE))
    assert code == 1
    assert "otel_loopguard.cli._junit" in modules
    assert "otel_loopguard.cli._sarif" not in modules


def test_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    for command in ("check", "demo", "serve", "assets"):
        assert f"    {command} " in listed


def test_a_misspelt_command_is_named_among_all_of_them(capsys: pytest.CaptureFixture[str],
                                                       ) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["chek", "x.jsonl"])
    assert exit_info.value.code == 2
    assert "'check', 'demo', 'serve', 'assets'" in capsys.readouterr().err
