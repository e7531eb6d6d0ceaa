"""The loop detectors on the issue-thread excerpts of real agent runs (reported apart).

The corpus (tests/corpus, see its README) holds real runs, each labelled ``loop`` or
``healthy`` by reading the trajectory. The test replays all of them through the engine of
``otel-loopguard check`` at default settings, prints precision and recall per source and
overall, and fails when the figures fall below what the current code achieves: the bounds are
the current figures, with no slack. Re-tighten them after a change that improves them (the
printed table says where they are now).
"""

from __future__ import annotations

import gzip
import json

import pytest
from corpus import convert
from corpus.figures import excerpt_figures, format_table

MIN_RUNS = 76
MIN_LOOPS = 51
MIN_HEALTHY = 25
MAX_FALSE_POSITIVES = 1
"""Healthy runs a loop detector may flag (now: 1 of 25) before the test fails: two oversized
reads retried once each in alternation with the same refusal, then a switch to bash
(issue-stella-1122), which ``cycle`` warns on when A B A B completes, as the spec's F6 asks."""
MAX_MISSED_LOOPS = 11
"""Loop runs no loop detector may miss (now: 11 of 51) before the test fails. Out of reach by
design among them: a grep re-run with a wider window each time (issue-stella-3689-grep-window;
a shell command line with another operand is another call, never a near-duplicate), three
loops of model turns that called no tool (the excerpts keep no turn content, and an idle turn
counts only when its content is seen to repeat), 90 ``sleep 5`` calls in a row (waiting alone
is exempt) and five different do-nothing scripts (issue-codex-6190)."""
MAX_REPLAN_OR_STOP_ON_HEALTHY = 0
"""Healthy runs that may reach replan or stop (now: none)."""
MIN_PRECISION = 40 / 41
MIN_RECALL = 40 / 51


@pytest.fixture(scope="module")
def figures():
    """Replay the corpus once for the module."""
    result = excerpt_figures()
    print("\n" + format_table(result))
    return result


def test_the_stored_traces_are_the_conversion_of_the_extracts() -> None:
    runs = convert.load_extracts()
    with gzip.open(convert.OUTPUT, "rt", encoding="utf-8") as handle:
        stored = [json.loads(line) for line in handle]
    assert stored == [convert.run_to_otlp(run, index) for index, run in enumerate(runs, 1)]
    assert json.loads(convert.LABELS.read_text()) == json.loads(convert.labels_json(runs))


def test_every_run_has_provenance_a_label_and_a_reason() -> None:
    labels = json.loads(convert.LABELS.read_text())
    assert len(labels) >= MIN_RUNS
    kinds = [meta["label"] for meta in labels.values()]
    assert kinds.count("loop") >= MIN_LOOPS and kinds.count("healthy") >= MIN_HEALTHY
    for run, meta in labels.items():
        assert meta["label"] in ("loop", "healthy"), run
        assert meta["source"].count("/") == 1, run
        assert meta["path"] and meta["license"] and len(meta["reason"]) > 10, run


def test_false_positives_stay_within_bound(figures) -> None:
    assert len(figures.false_positives) <= MAX_FALSE_POSITIVES, format_table(figures, "source")
    assert figures.counts()["replan_or_stop_on_healthy"] <= MAX_REPLAN_OR_STOP_ON_HEALTHY


def test_loops_are_caught_within_bound(figures) -> None:
    assert len(figures.missed) <= MAX_MISSED_LOOPS, format_table(figures, "source")


def test_precision_and_recall_do_not_regress(figures) -> None:
    counts = figures.counts()
    assert counts["precision"] >= MIN_PRECISION, format_table(figures, "source")
    assert counts["recall"] >= MIN_RECALL, format_table(figures, "source")


def test_tokenized_runs_keep_command_words_and_nothing_else() -> None:
    tokens: dict[str, str] = {}
    stored = convert.tokenize_arguments(
        {"command": "cd /repo && timeout 60 pytest -x tests/a.py | tail -5", "path": "/repo/a.py",
         "action": "poll"}, tokens)
    assert stored == {"command": "cd v1 && timeout v2 pytest -x v3 | tail -5",
                      "path": "v4", "action": "poll"}
    convert.check_tokenized(stored)
    assert convert.command_skeleton("sleep 5", lambda word: "v9") == "sleep v9"
    assert convert.command_skeleton("python -m pip install x", lambda word: "v9") == \
        "python -m pip install v9"
    with pytest.raises(ValueError, match=r"argument text 'settings.py' is not a token"):
        convert.check_tokenized({"command": "git add settings.py"})
    with pytest.raises(ValueError, match=r"'Paris' is not a token"):
        convert.check_tokenized({"query": "Paris"})


def test_extracts_of_unlicensed_sources_reject_copied_text() -> None:
    keys = ("run", "source", "path", "commit", "agent", "model", "reason")
    header = "".join(f"{key} v\n" for key in keys) + "label loop\nlicense unknown\n"
    with pytest.raises(ValueError, match=r"x.txt: call 1: argument text 'a.py' is not a token"):
        convert.parse_extract(header + "---\nbash cat a.py => o1\n", "x.txt")
    run = convert.parse_extract(header + "---\nbash cat v1 => o1\n", "x.txt")
    assert run.turns[0].calls[0].arguments == {"command": "cat v1"}


def test_every_labelled_run_was_replayed(figures) -> None:
    labels = json.loads(convert.LABELS.read_text())
    assert {o.run for o in figures.outcomes} == set(labels)
    for outcome in figures.outcomes:
        assert outcome.tool_calls == labels[outcome.run]["tool_calls"], outcome.run


def test_extract_errors_name_the_line() -> None:
    text = "run x\n---\nbash ls => o1\n"
    with pytest.raises(ValueError, match=r"x.txt: missing header"):
        convert.parse_extract(text, "x.txt")
    header = "".join(f"{key} v\n" for key in ("run", "source", "path", "commit", "license",
                                                "agent", "model", "reason")) + "label loop\n"
    with pytest.raises(ValueError, match=r"x.txt:11: a call needs"):
        convert.parse_extract(header + "---\nbash ls\n", "x.txt")


def test_raw_mini_swe_agent_and_swe_agent_files_convert(tmp_path) -> None:
    mini = {"messages": [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls -la\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na\n</output>"},
        {"role": "assistant", "content": "no command here"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action"},
        {"role": "assistant", "content": "run\n\n```bash\npytest -q\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\nF\n</output>"}]}
    swe = {"trajectory": [
        {"action": "open a.py\n", "observation": "[File: a.py]"},
        {"action": "edit 1:1\nx\nend_of_edit\n",
         "observation": "Your changes have NOT been applied. Please fix your edit"}]}
    (tmp_path / "m.traj.json").write_text(json.dumps(mini))
    (tmp_path / "s.traj").write_text(json.dumps(swe))
    [m_run] = convert.parse_raw(tmp_path / "m.traj.json")
    [s_run] = convert.parse_raw(tmp_path / "s.traj")
    assert [t.rejected for t in m_run.turns] == [None, "0 actions", None]
    assert [c.arguments["command"] for t in m_run.turns for c in t.calls] == ["ls -la", "pytest -q"]
    assert [c.error for t in m_run.turns for c in t.calls] == [None, "exit code 1"]
    assert [c.error for t in s_run.turns for c in t.calls] == [None, "edit not applied"]


def test_raw_files_can_be_stored_as_tokens(tmp_path) -> None:
    mini = {"messages": [
        {"role": "assistant", "content": "look\n\n```bash\ncat /repo/a.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx = 1\n</output>"},
        {"role": "assistant", "content": "again\n\n```bash\ncat /repo/a.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx = 1\n</output>"}]}
    source = tmp_path / "m.traj.json"
    source.write_text(json.dumps(mini))
    out = tmp_path / "out.jsonl"
    assert convert.main(["--raw", str(source), "--tokens", "-o", str(out)]) == 0
    [request] = [json.loads(line) for line in out.read_text().splitlines()]
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    arguments = [attr["value"]["stringValue"] for span in spans for attr in span["attributes"]
                 if attr["key"] == "gen_ai.tool.call.arguments"]
    assert arguments == ['{"command": "cat v1"}', '{"command": "cat v1"}']
