"""Precision and recall of the loop detectors on the real-agent corpus.

``corpus_figures()`` replays the development corpus (whole runs, ``runs/<family>/``, labels in
``labels/<family>/``) through ``otel-loopguard check``'s engine at the given (default) settings
and compares each run's outcome with its label:

- a **loop** run is *caught* when a loop detector (any detector but ``budget``) reaches at
  least ``warn`` on a call inside the labelled stretch of the loop, from its start to the call
  after its end (a model turn's finding sits before the next call); a flag before the start, or
  only long after the loop ended, does not catch it;
- a **healthy** run is *flagged* when a loop detector reaches at least ``warn`` anywhere in it;
  runs that only a budget flagged are counted apart (``budget only``): budgets are not loops.

Precision is caught / (caught + healthy flagged), recall caught / loops, per family and
overall. ``excerpt_figures()`` does the same for the tokenised issue-thread excerpts
(``runs.jsonl.gz``, ``extracts/labels.json``), which are reported apart and, having no labelled
start, count a loop as caught when it is flagged anywhere.

``python tests/corpus/figures.py`` prints both tables and writes ``FIGURES.md``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

if __name__ == "__main__":  # run as a script: the corpus package lives in tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus import replay
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.checker import Checker
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import Action

HERE = Path(__file__).resolve().parent
EXCERPTS = HERE / "runs.jsonl.gz"
EXCERPT_LABELS = HERE / "extracts" / "labels.json"
TABLE = HERE / "FIGURES.md"

__all__ = ["CorpusFigures", "RunOutcome", "corpus_figures", "excerpt_figures", "format_table",
           "replay_file"]


LOOP_SLACK: Final = 1
"""Calls past a loop's labelled end where a flag still catches it: a model turn's finding sits
before the next tool call (an idle turn ending the loop is flagged at the call after it)."""

@dataclass(slots=True)
class RunOutcome:
    """What the detectors did on one labelled run."""

    run: str
    group: str
    """The family of agents (or the source, for the excerpts)."""
    label: str
    tool_calls: int
    loop_start: int | None = None
    loop_end: int | None = None
    borderline: str = ""
    detectors: dict[str, str] = field(default_factory=dict)
    """Loop detector -> the highest action it reached on the run."""
    first_call: int | None = None
    """Position of the first call a loop detector flagged (1-based)."""
    caught_at: int | None = None
    """Position of the first flag inside the loop's stretch (``LOOP_SLACK`` past its end)."""
    budget: bool = False
    action: str = "continue"
    """Highest action any loop detector reached."""

    @property
    def flagged(self) -> bool:
        """Whether a loop detector reached warn or more anywhere in the run."""
        return bool(self.detectors)

    @property
    def caught(self) -> bool:
        """A loop flagged inside its labelled stretch."""
        return self.label == "loop" and self.caught_at is not None


@dataclass(slots=True)
class CorpusFigures:
    """Confusion counts, per group and overall, and the runs behind them."""

    outcomes: list[RunOutcome]

    def counts(self, group: str | None = None) -> dict[str, Any]:
        """Runs, loops, caught, healthy flagged, at replan or stop, budget only, ratios."""
        chosen = [o for o in self.outcomes if group is None or o.group == group]
        loops = [o for o in chosen if o.label == "loop"]
        healthy = [o for o in chosen if o.label == "healthy"]
        caught = sum(o.caught for o in loops)
        flagged = sum(o.flagged for o in healthy)
        return {"runs": len(chosen), "loops": len(loops), "healthy": len(healthy),
                "caught": caught, "healthy_flagged": flagged,
                "replan_or_stop_on_healthy": sum(o.action in ("replan", "stop")
                                                 for o in healthy),
                "budget_only": sum(o.budget and not o.flagged for o in chosen),
                "precision": caught / (caught + flagged) if caught + flagged else None,
                "recall": caught / len(loops) if loops else None}

    @property
    def groups(self) -> list[str]:
        """The groups, families in their fixed order first."""
        present = {o.group for o in self.outcomes}
        ordered = [f for f in replay.FAMILIES if f in present]
        return ordered + sorted(present - set(ordered))

    @property
    def false_positives(self) -> list[RunOutcome]:
        """Healthy runs that a loop detector flagged."""
        return [o for o in self.outcomes if o.flagged and o.label == "healthy"]

    @property
    def missed(self) -> list[RunOutcome]:
        """Loop runs no loop detector flagged inside the loop's stretch."""
        return [o for o in self.outcomes if o.label == "loop" and not o.caught]


def replay_file(otlp: Path, runs: dict[str, dict[str, Any]],
                config: LoopGuardConfig | None) -> dict[str, RunOutcome]:
    """Run ``check``'s reader and engine over a file; ``runs`` maps run id to outcome seed."""
    outcomes: dict[str, RunOutcome] = {}
    for report in Checker(config or LoopGuardConfig()).run(iter_spans(str(otlp), strict=True)):
        seed = runs[report.run_id]
        outcome = RunOutcome(run=seed["run"], group=seed["group"], label=seed["label"],
                             tool_calls=report.tool_calls, loop_start=seed.get("loop_start"),
                             loop_end=seed.get("loop_end"),
                             borderline=seed.get("borderline") or "")
        for decision in report.findings:
            # a model turn's finding (tool "") sits before the run's next tool call
            position = decision.call_index + (0 if decision.tool else 1)
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
                    outcome.first_call = position
                start = outcome.loop_start or 1
                end = outcome.loop_end + LOOP_SLACK if outcome.loop_end else position
                if outcome.caught_at is None and start <= position <= end:
                    outcome.caught_at = position
        loop_actions = [Action.parse(a) for a in outcome.detectors.values()]
        outcome.action = max(loop_actions).label if loop_actions else "continue"
        outcomes[outcome.run] = outcome
    return outcomes


def corpus_figures(config: LoopGuardConfig | None = None, *, runs: Path = replay.RUNS,
                   labels: Path = replay.LABELS, capture: str = "full") -> CorpusFigures:
    """Replay the development corpus and return its figures (default settings unless given).

    ``capture``: what the spans carry (``replay.CAPTURE_LEVELS``).
    """
    known = replay.load_labels(labels)
    stored = list(replay.iter_runs(runs))
    unlabelled = sorted({run["id"] for run in stored} - set(known))
    if unlabelled:
        raise ValueError(f"runs without a label: {', '.join(unlabelled[:10])}")
    seeds = {replay.trace_id_of(run["id"]): {
        "run": run["id"], "group": run["family"], "label": known[run["id"]]["label"],
        "loop_start": known[run["id"]].get("loop_start"),
        "loop_end": known[run["id"]].get("loop_end"),
        "borderline": known[run["id"]].get("borderline")} for run in stored}
    with tempfile.TemporaryDirectory() as tmp:
        otlp = Path(tmp) / "corpus.jsonl"
        replay.write_otlp(stored, otlp, capture)
        outcomes = replay_file(otlp, seeds, config)
    missing = sorted({run["id"] for run in stored} - set(outcomes))
    if missing:
        raise ValueError(f"runs the replay did not report: {', '.join(missing[:10])}")
    return CorpusFigures([outcomes[run["id"]] for run in stored])


def excerpt_figures(config: LoopGuardConfig | None = None) -> CorpusFigures:
    """Replay the tokenised issue-thread excerpts (reported apart from the corpus)."""
    known = json.loads(EXCERPT_LABELS.read_text())
    seeds = {meta["trace_id"]: {"run": run, "group": meta["source"], "label": meta["label"]}
             for run, meta in known.items()}
    outcomes = replay_file(EXCERPTS, seeds, config)
    return CorpusFigures([outcomes[run] for run in sorted(outcomes)])


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def format_table(figures: CorpusFigures, heading: str = "family") -> str:
    """The figures as Markdown: one row per group and an overall row, then the runs behind."""
    lines = [f"| {heading} | runs | loops | caught | healthy flagged | healthy at replan or stop "
             "| budget only | precision | recall |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows: Iterable[str | None] = [*figures.groups, None]
    for group in rows:
        c = figures.counts(group)
        lines.append(f"| {group or '**all**'} | {c['runs']} | {c['loops']} | {c['caught']} "
                     f"| {c['healthy_flagged']} | {c['replan_or_stop_on_healthy']} "
                     f"| {c['budget_only']} | {_ratio(c['precision'])} "
                     f"| {_ratio(c['recall'])} |")
    lines += ["", "Healthy runs flagged:", ""]
    lines += [f"- `{o.run}` ({o.tool_calls} calls): "
              + ", ".join(f"{d} {a}" for d, a in sorted(o.detectors.items()))
              + f", first at call {o.first_call}"
              + (f" (borderline: {o.borderline})" if o.borderline else "")
              for o in figures.false_positives] or ["- none"]
    lines += ["", "Loops missed (no flag inside the loop's stretch):", ""]
    lines += [f"- `{o.run}` ({o.tool_calls} calls, loop from call {o.loop_start})"
              + (f": flagged only outside it, first at call {o.first_call}" if o.flagged else "")
              + (f" (borderline: {o.borderline})" if o.borderline else "")
              for o in figures.missed] or ["- none"]
    return "\n".join(lines) + "\n"


CAPTURE_WORDS: dict[str, str] = {
    "arguments": "tool arguments and finish reasons only (no results, no messages)",
    "none": "no content (no arguments either: GenAI instrumentations' default)"}
"""The less-captured levels of ``capture_section``, and what each sends."""


def capture_section(figures: dict[str, CorpusFigures] | None = None) -> str:
    """The development corpus at each capture level below full, one table row per family."""
    figures = figures or {level: corpus_figures(capture=level) for level in CAPTURE_WORDS}
    lines = ["## The same runs with less content captured", "",
             "Each run replayed as an instrumentation with content capture off sends it; the",
             "labels are the runs'. Content matters: without results a repeated call cannot be",
             "told from progress, and without arguments two calls of a tool cannot be told apart.",
             "", *(f"- `{level}`: {words}" for level, words in CAPTURE_WORDS.items()),
             "", "| capture | family | runs | loops | caught | healthy flagged "
             "| healthy at replan or stop | precision | recall |",
             "|---|---|---|---|---|---|---|---|---|"]
    for level in CAPTURE_WORDS:
        for group in [*figures[level].groups, None]:
            c = figures[level].counts(group)
            lines.append(f"| `{level}` | {group or '**all**'} "
                         f"| {c['runs']} | {c['loops']} | {c['caught']} | {c['healthy_flagged']} "
                         f"| {c['replan_or_stop_on_healthy']} | {_ratio(c['precision'])} "
                         f"| {_ratio(c['recall'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Print the tables and write them to FIGURES.md (the coding agents' section last)."""
    from corpus import native_agents  # it imports this module

    corpus = format_table(corpus_figures())
    excerpts = format_table(excerpt_figures(), heading="source")
    captured = capture_section()
    agents = native_agents.section()
    TABLE.write_text(
        "# Loop detectors on real agents (default settings)\n\n"
        "Generated by `python tests/corpus/figures.py`. A loop is caught when a loop detector\n"
        "flags it inside the labelled stretch of the loop (from its start to the call after its\n"
        "end); budget findings are not loop findings.\n\n"
        "## The development corpus: whole runs, by family of agents\n\n" + corpus
        + "\n" + captured
        + "\n## Issue-thread excerpts (tokenised, reported apart)\n\n" + excerpts
        + "\n" + agents)
    sys.stdout.write(corpus + "\n" + captured + "\n" + excerpts + "\n" + agents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
