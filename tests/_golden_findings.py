"""The engine's findings on every corpus in ``tests/``, as comparable data.

Each run maps to its findings as ``[call_index, detector, action]`` rows, one per piece of
evidence at warn or above, in the order the engine gave them. Corpora: the development corpus
(``corpus/runs``, every run, through ``check``'s engine), the issue-thread excerpts
(``corpus/runs.jsonl.gz``) and the scripted scenarios of ``test_scenarios.py`` (through real
spans and the harness). ``python tests/_golden_findings.py`` rewrites the stored file; do that
only for a change meant to change findings, and say so in its commit.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the helpers live in tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import figures, replay

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import Action

GOLDEN = Path(__file__).resolve().parent / "data" / "findings_golden.json"

Findings = dict[str, list[list[Any]]]


def _rows(report: RunReport) -> list[list[Any]]:
    return [[decision.call_index, evidence.detector, evidence.action.label]
            for decision in report.findings for evidence in decision.evidence
            if evidence.action >= Action.WARN]


def _check(path: Path, names: dict[str, str]) -> Findings:
    reports = Checker(LoopGuardConfig()).run(iter_spans(str(path), strict=True))
    return {names[report.run_id]: _rows(report) for report in reports}


def corpus_findings() -> Findings:
    """The development corpus, every run through ``check``'s engine at default settings."""
    stored = list(replay.iter_runs())
    names = {replay.trace_id_of(run["id"]): run["id"] for run in stored}
    with tempfile.TemporaryDirectory() as tmp:
        otlp = Path(tmp) / "corpus.jsonl"
        replay.write_otlp(stored, otlp)
        return _check(otlp, names)


def excerpt_findings() -> Findings:
    """The tokenised issue-thread excerpts."""
    known = json.loads(figures.EXCERPT_LABELS.read_text())
    return _check(figures.EXCERPTS, {meta["trace_id"]: run for run, meta in known.items()})


def scenario_findings() -> Findings:
    """The scripted scenarios (healthy and loops), through real spans and the harness."""
    import test_scenarios as scenarios  # the catalogue lives with its tests

    found: Findings = {}
    for name, scenario in {**scenarios.HEALTHY, **scenarios.LOOPS}.items():
        for index, report in enumerate(scenarios._run(scenario)):
            found[f"{name}#{index}"] = _rows(report)
    return found


def all_findings() -> dict[str, Findings]:
    """Every corpus, by name."""
    return {"corpus": corpus_findings(), "excerpts": excerpt_findings(),
            "scenarios": scenario_findings()}


def dump(found: dict[str, Findings]) -> str:
    """The stored form: one run per line, so a diff names the runs that changed."""
    lines: Iterable[str] = (
        f"  {json.dumps(f'{corpus}/{run}')}: {json.dumps(rows)}"
        for corpus, runs in found.items() for run, rows in sorted(runs.items()))
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":
    GOLDEN.write_text(dump(all_findings()))
