"""Precision and recall of the loop detectors on the real-agent corpus.

``corpus_figures()`` replays ``runs.jsonl.gz`` through ``otel-loopguard check``'s engine at the
given (default) settings and compares each run's outcome with its label in ``labels.json``.
A run counts as *flagged* when a loop detector (any detector but ``budget``) reached at least
``warn`` on one of its calls; runs flagged by ``budget`` alone are reported apart and count as
not flagged. ``python tests/corpus/figures.py`` prints the table and writes ``FIGURES.md``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.checker import Checker
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import Action

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs.jsonl.gz"
LABELS = HERE / "labels.json"
TABLE = HERE / "FIGURES.md"

__all__ = ["CorpusFigures", "RunOutcome", "corpus_figures", "format_table"]


@dataclass(slots=True)
class RunOutcome:
    """What the detectors did on one labelled run."""

    run: str
    source: str
    label: str
    tool_calls: int
    detectors: dict[str, str] = field(default_factory=dict)
    """Loop detector -> the highest action it reached on the run."""
    first_call: int | None = None
    """Index of the first call a loop detector flagged."""
    budget: bool = False
    action: str = "continue"
    """Highest action any loop detector reached."""

    @property
    def flagged(self) -> bool:
        """Whether a loop detector reached warn or more."""
        return bool(self.detectors)


@dataclass(slots=True)
class CorpusFigures:
    """Confusion counts, per source and overall, and the runs behind them."""

    outcomes: list[RunOutcome]

    def counts(self, source: str | None = None) -> dict[str, Any]:
        """Return runs, loops, healthy, tp, fp, fn, tn, precision and recall."""
        chosen = [o for o in self.outcomes if source is None or o.source == source]
        tp = sum(o.flagged and o.label == "loop" for o in chosen)
        fp = sum(o.flagged and o.label == "healthy" for o in chosen)
        fn = sum(not o.flagged and o.label == "loop" for o in chosen)
        tn = sum(not o.flagged and o.label == "healthy" for o in chosen)
        return {"runs": len(chosen), "loops": tp + fn, "healthy": fp + tn,
                "tp": tp, "fp": fp, "fn": fn, "tn": tn,
                "precision": tp / (tp + fp) if tp + fp else None,
                "recall": tp / (tp + fn) if tp + fn else None,
                "replan_or_stop_on_healthy": sum(
                    o.label == "healthy" and o.action in ("replan", "stop") for o in chosen),
                "budget_only": sum(o.budget and not o.flagged for o in chosen)}

    @property
    def sources(self) -> list[str]:
        """The sources, sorted."""
        return sorted({o.source for o in self.outcomes})

    @property
    def false_positives(self) -> list[RunOutcome]:
        """Healthy runs that a loop detector flagged."""
        return [o for o in self.outcomes if o.flagged and o.label == "healthy"]

    @property
    def missed(self) -> list[RunOutcome]:
        """Loop runs no loop detector flagged."""
        return [o for o in self.outcomes if not o.flagged and o.label == "loop"]


def _labels(path: Path) -> dict[str, dict[str, str]]:
    return json.loads(path.read_text())


def corpus_figures(config: LoopGuardConfig | None = None, *, runs: Path = RUNS,
                   labels: Path = LABELS) -> CorpusFigures:
    """Replay the corpus and return its figures (default settings unless ``config``)."""
    known = _labels(labels)
    by_trace = {meta["trace_id"]: (run, meta) for run, meta in known.items()}
    outcomes: dict[str, RunOutcome] = {}
    for report in Checker(config or LoopGuardConfig()).run(iter_spans(str(runs), strict=True)):
        run, meta = by_trace[report.run_id]
        outcome = RunOutcome(run=run, source=meta["source"], label=meta["label"],
                             tool_calls=report.tool_calls)
        for decision in report.findings:
            for evidence in decision.evidence:
                if evidence.action < Action.WARN:
                    continue
                if evidence.detector == "budget":
                    outcome.budget = True
                    continue
                best = outcome.detectors.get(evidence.detector)
                if best is None or Action.parse(best) < evidence.action:
                    outcome.detectors[evidence.detector] = evidence.action.label
                if outcome.first_call is None:
                    outcome.first_call = decision.call_index
        loop_actions = [Action.parse(a) for a in outcome.detectors.values()]
        outcome.action = max(loop_actions).label if loop_actions else "continue"
        outcomes[run] = outcome
    missing = sorted(set(known) - set(outcomes))
    if missing:
        raise ValueError(f"runs without a trace in {runs.name}: {', '.join(missing)}")
    return CorpusFigures([outcomes[run] for run in sorted(outcomes)])


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def format_table(figures: CorpusFigures) -> str:
    """Return the figures as Markdown: one row per source and an overall row, then details."""
    lines = ["| source | runs | loops | healthy | TP | FP | FN | precision | recall "
             "| replan/stop on healthy | budget only |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows: Iterable[str | None] = [*figures.sources, None]
    for source in rows:
        c = figures.counts(source)
        lines.append(f"| {source or '**all**'} | {c['runs']} | {c['loops']} | {c['healthy']} "
                     f"| {c['tp']} | {c['fp']} | {c['fn']} | {_ratio(c['precision'])} "
                     f"| {_ratio(c['recall'])} | {c['replan_or_stop_on_healthy']} "
                     f"| {c['budget_only']} |")
    lines += ["", "Healthy runs flagged:", ""]
    lines += [f"- `{o.run}` ({o.tool_calls} calls): "
              + ", ".join(f"{d} {a}" for d, a in sorted(o.detectors.items()))
              + f", first at call {o.first_call}" for o in figures.false_positives] or ["- none"]
    lines += ["", "Loops missed:", ""]
    lines += [f"- `{o.run}` ({o.tool_calls} calls)" for o in figures.missed] or ["- none"]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Print the table and write it to FIGURES.md."""
    table = format_table(corpus_figures())
    TABLE.write_text("# Loop detectors on the real-agent corpus (default settings)\n\n"
                     "Generated by `python tests/corpus/figures.py`.\n\n" + table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
