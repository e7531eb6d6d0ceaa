"""Findings do not change with the engine's speed work: every corpus in ``tests/`` gives the
stored findings (``data/findings_golden.json``, written by ``_golden_findings.py`` from the
engine before the work began)."""

from __future__ import annotations

import json

import pytest
from _golden_findings import GOLDEN, all_findings, dump


@pytest.mark.slow
def test_every_corpus_gives_the_stored_findings() -> None:
    stored = json.loads(GOLDEN.read_text())
    now = json.loads(dump(all_findings()))
    assert now.keys() == stored.keys()
    changed = {run: (stored[run], now[run]) for run in stored if stored[run] != now[run]}
    assert not changed, f"{len(changed)} runs changed, first: {sorted(changed.items())[:3]}"


def test_the_golden_file_has_findings_on_every_corpus() -> None:
    stored = json.loads(GOLDEN.read_text())
    for corpus, minimum in (("corpus", 1000), ("excerpts", 50), ("scenarios", 30)):
        runs = [run for run in stored if run.startswith(f"{corpus}/")]
        assert len(runs) >= minimum, corpus
        assert sum(bool(stored[run]) for run in runs) >= 5, corpus
