"""``otel-loopguard check``: exit codes, text and JSON output, input errors, run keys."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _otlp_files import Script, json_line, scripted_spans

from otel_loopguard.cli import main
from otel_loopguard.testing import AgentScript

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = str(ROOT / "examples" / "traces" / "healthy_agent.jsonl")
LOOPING = str(ROOT / "examples" / "traces" / "looping_agent.jsonl")

RUN_KEYS = {"run_id", "file", "line", "trace_ids", "prompt_template", "tool_calls", "action",
            "budget", "waste", "findings"}
NO_WASTE = {"tool_calls": 0, "model_turns": 0, "input_tokens": 0, "output_tokens": 0,
            "tool_seconds": 0.0, "cost": {}}
FINDING_KEYS = {"detector", "code", "action", "tool", "call_index", "span_id", "hint",
                "evidence", "escalated"}
ACTIONS = ["continue", "warn", "replan", "stop"]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``check`` reads ``LOOPGUARD_*`` variables; the developer's own must not leak in."""
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_"):
            monkeypatch.delenv(name)


@pytest.fixture(name="write_trace")
def _write_trace(tmp_path: Path) -> Callable[..., str]:
    """Script runs with a real ``TracerProvider`` and write them as OTLP/JSON lines."""

    def write(*runs: Script, name: str = "trace.jsonl") -> str:
        path = tmp_path / name
        path.write_text(json_line(scripted_spans(*runs)) + "\n", encoding="utf-8")
        return str(path)

    return write


def _same_search(times: int) -> Callable[[AgentScript], None]:
    def body(agent: AgentScript) -> None:
        for _ in range(times):
            agent.turn()
            agent.tool("search", {"q": "refunds"}, "no results")

    return body


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code = main(["check", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


class TestExitCodes:
    def test_healthy_example_exits_0(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The healthy example has no loop: exit 0 and an ``ok`` line."""
        assert main(["check", HEALTHY]) == 0
        out = capsys.readouterr().out
        assert out.startswith("ok    run 3ca5fe047262230b8092163bef8e409a [order_status@v1]: "
                              "6 tool calls, no loop\n")
        assert out.endswith("\n1 run, 6 tool calls; 0 flagged\n")

    def test_looping_example_exits_1(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The looping example reaches stop: exit 1 and the findings with their hints."""
        assert main(["check", LOOPING]) == 1
        out = capsys.readouterr().out
        assert "STOP  run 6143f831f09ff9b0e86f1d11d41297b6 [support_triage@v3]: 7 tool calls" \
            in out
        assert "  - stop at call 7 (PERMANENT_FAILURE, failure): crm_lookup - calls 6, 7" in out
        assert out.count("    hint: ") == 4

    @pytest.mark.parametrize(("fail_on", "expected"), [
        ("stop", 0), ("replan", 0), ("warn", 1)], ids=["stop", "replan", "warn"])
    def test_fail_on(self, write_trace: Callable[..., str], fail_on: str, expected: int,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """``--fail-on`` sets the lowest run action that makes the exit code 1."""
        path = write_trace(({}, _same_search(3)))
        assert main(["check", "--fail-on", fail_on, path]) == expected
        assert "WARN  run" in capsys.readouterr().out

    def test_fail_on_warn_healthy(self) -> None:
        """Even ``--fail-on warn`` passes a healthy run."""
        assert main(["check", "--fail-on", "warn", HEALTHY]) == 0

    def test_no_command_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without a command the help goes to stderr and the exit code is 2."""
        assert main([]) == 2
        assert "usage: otel-loopguard" in capsys.readouterr().err

    def test_bad_flag_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown choice exits 2 with argparse's one-line error."""
        with pytest.raises(SystemExit) as info:
            main(["check", "--format", "xml", HEALTHY])
        assert info.value.code == 2
        assert "invalid choice: 'xml'" in capsys.readouterr().err

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--version`` prints the version and exits 0."""
        assert main(["--version"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("otel-loopguard ")
        from otel_loopguard.adapters import accelerated
        from otel_loopguard.kinds._shell import ACCELERATED as SHELL_READER
        from otel_loopguard.otlp._proto import WIRE
        from otel_loopguard.signature import ACCELERATED

        assert f"(C accelerators: signatures {'on' if ACCELERATED else 'off'}, " \
            f"OTLP decoder {'on' if WIRE else 'off'}, " \
            f"span processor {'on' if accelerated() else 'off'}, " \
            f"shell reader {'on' if SHELL_READER else 'off'})" in out


class TestJsonOutput:
    def test_shape(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Every run and finding has exactly the documented keys and id formats."""
        code, doc = _json(capsys, [HEALTHY, LOOPING])
        assert code == 1
        assert set(doc) == {"runs", "summary"}
        for run in doc["runs"]:
            assert set(run) == RUN_KEYS
            assert run["action"] in ACTIONS
            assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in run["trace_ids"])
            for finding in run["findings"]:
                assert set(finding) == FINDING_KEYS
                assert re.fullmatch(r"[0-9a-f]{16}", finding["span_id"])
                assert finding["action"] in ACTIONS[1:]
                assert isinstance(finding["call_index"], int) and finding["call_index"] >= 1
                assert finding["detector"] in finding["evidence"]
                assert finding["hint"]

    def test_every_run_appears(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Clean runs are listed too, with their template and an empty findings list."""
        _, doc = _json(capsys, [HEALTHY, LOOPING])
        runs = {r["run_id"]: r for r in doc["runs"]}
        assert runs["3ca5fe047262230b8092163bef8e409a"] == {
            "run_id": "3ca5fe047262230b8092163bef8e409a", "file": HEALTHY, "line": 1,
            "trace_ids": ["3ca5fe047262230b8092163bef8e409a"],
            "prompt_template": "order_status@v1", "tool_calls": 6, "action": "continue",
            "budget": "continue", "waste": NO_WASTE, "findings": []}
        looping = runs["6143f831f09ff9b0e86f1d11d41297b6"]
        assert looping["action"] == "stop"
        # calls 4 and 5 go on repeating after the warning at 3; 6 is new; 7 is a finding
        assert looping["waste"]["tool_calls"] == 3
        assert looping["waste"]["model_turns"] == 3
        assert [(f["call_index"], f["code"], f["action"]) for f in looping["findings"]] == [
            (3, "STAGNANT_RESULT", "warn"), (4, "STAGNANT_RESULT", "replan"),
            (5, "STAGNANT_RESULT", "stop"), (7, "PERMANENT_FAILURE", "stop")]

    def test_summary_counts(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The summary counts runs, tool calls and runs by highest action."""
        _, doc = _json(capsys, [HEALTHY, LOOPING])
        assert doc["summary"] == {
            "runs": 2, "tool_calls": 13, "failed": 1, "fail_on": "stop",
            "fail_on_budget": "stop", "actions": {"continue": 1, "warn": 0, "replan": 0, "stop": 1},
            "over_budget": {"warn": 0, "stop": 0}, "spans": 27,
            "duplicate_spans": 0, "bad_records": 0, "bad_input": [],
            "waste": {"tool_calls": 3, "model_turns": 3, "input_tokens": 0, "output_tokens": 0,
                      "tool_seconds": 0.03, "cost": {}}}

    def test_the_summary_says_what_fails_the_check(self,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """A warn below --fail-on is flagged but does not fail: the summary says which count
        the exit code follows, and under which settings."""
        code, doc = _json(capsys, ["--fail-on", "warn", "--fail-on-budget", "never", LOOPING])
        assert (code, doc["summary"]["failed"], doc["summary"]["fail_on"],
                doc["summary"]["fail_on_budget"]) == (1, 1, "warn", "never")
        assert main(["check", "-q", LOOPING, HEALTHY]) == 1
        assert capsys.readouterr().out.endswith("1 flagged; wasted 3 tool calls, 3 model turns, "
                                                "0.03 s in tools\n")  # all that fail flagged

    def test_a_run_read_from_standard_input_names_no_file(
            self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        with open(LOOPING, "rb") as handle:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(handle.read())))
        _, doc = _json(capsys, ["-"])
        assert [set(run) for run in doc["runs"]] == [RUN_KEYS - {"file", "line"}]

    def test_evidence_holds_no_payloads(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Arguments and results never appear in the output, only digests and counts."""
        _, doc = _json(capsys, [LOOPING])
        text = json.dumps([f["evidence"] for r in doc["runs"] for f in r["findings"]])
        assert "refund policy" not in text and "unauthorized" not in text


class TestInputErrors:
    def test_missing_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A missing file is one line on stderr and exit 2, never a traceback."""
        missing = str(tmp_path / "nope.jsonl")
        assert main(["check", missing]) == 2
        captured = capsys.readouterr()
        assert captured.err == f"otel-loopguard: {missing}: no such file\n"
        assert "Traceback" not in captured.err

    def test_a_missing_input_still_writes_the_report_file(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A CI gate whose exporter never created its folder: with ``--output FILE`` the JUnit
        report is written with the missing input as an error, so the step that collects it
        shows the failure. Before, no file was written and the report step found nothing."""
        import xml.etree.ElementTree as ET

        missing, report = tmp_path / "traces", tmp_path / "loopguard.xml"
        assert main(["check", "--format", "junit", "--output", str(report), str(missing)]) == 2
        errors = ET.parse(report).getroot().iter("error")
        assert [e.text for e in errors] == [f"{missing}: no such file"]
        assert capsys.readouterr().err == (f"otel-loopguard: {missing}: no such file\n"
                                           "otel-loopguard: 1 input skipped\n")
        # --allow-empty accepts empty input, not a missing one: it is not offered (it was,
        # as "nothing to check ... (--allow-empty accepts empty input)"), and does not help
        assert main(["check", "--allow-empty", "--format", "junit", "--output", str(report),
                     str(missing)]) == 2
        assert "--allow-empty" not in capsys.readouterr().err

    @pytest.fixture(name="one_bad_line")
    def _one_bad_line(self, tmp_path: Path) -> str:
        lines = [Path(HEALTHY).read_text().strip(), '{"resourceSpans": [ bad',
                 Path(LOOPING).read_text().strip()]
        path = tmp_path / "mixed.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return str(path)

    def test_bad_line_is_skipped(self, one_bad_line: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A bad line is reported as ``file:line: ...``, the good lines are still checked."""
        assert main(["check", one_bad_line]) == 2
        captured = capsys.readouterr()
        assert "2 runs, 13 tool calls; 1 flagged" in captured.out
        errors = captured.err.splitlines()
        assert errors[0].startswith(f"otel-loopguard: {one_bad_line}:2: invalid JSON")
        assert errors[1] == "otel-loopguard: 1 bad input record skipped"
        assert "Traceback" not in captured.err

    def test_strict_stops_at_the_bad_line(self, one_bad_line: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """``--strict`` ends the check at the first bad line with exit 2 and one message."""
        assert main(["check", "--strict", one_bad_line]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert len(captured.err.splitlines()) == 1
        assert captured.err.startswith(f"otel-loopguard: {one_bad_line}:2: invalid JSON")

    @pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
    def test_strict_leaves_nothing_on_stdout_after_runs_were_reported(
            self, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
        """A bad record after runs were closed and reported (10,000 spans past their root):
        ``--strict`` still leaves stdout empty, not half a report (a JSON or SARIF document
        cut in the middle)."""
        roots = [{"traceId": f"{n:032x}", "spanId": f"{n:016x}", "name": "step",
                  "startTimeUnixNano": "1", "endTimeUnixNano": "2"} for n in range(1, 10_050)]
        path = tmp_path / "late_bad.jsonl"
        with path.open("w", encoding="utf-8") as out:
            out.write(Path(LOOPING).read_text(encoding="utf-8"))
            out.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": roots}]}]}) + "\n")
            out.write("not json\n")
        assert main(["check", "--strict", "--format", fmt, str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"otel-loopguard: {path}:3: invalid JSON: Expecting value at " \
                               "column 1\n"

    def test_strict_removes_an_earlier_report(self, one_bad_line: str, tmp_path: Path) -> None:
        """A stopped check leaves no report of an earlier one for a CI step to publish."""
        report = tmp_path / "report.xml"
        report.write_text("<testsuites/>", encoding="utf-8")
        assert main(["check", "--strict", "--format", "junit", "-o", str(report),
                     one_bad_line]) == 2
        assert not report.exists()
        assert main(["check", "--format", "junit", "-o", str(report), one_bad_line]) == 2
        assert "<error" in report.read_text(encoding="utf-8")  # without --strict: written

    def test_paths_after_a_double_dash(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        """``--`` ends the flags, first or after paths: a file named like a flag is read."""
        monkeypatch.chdir(tmp_path)
        Path("-q.jsonl").write_bytes(Path(LOOPING).read_bytes())
        for argv in (["--", "-q.jsonl"], [HEALTHY, "--", "-q.jsonl"]):
            code, doc = _json(capsys, argv)
            assert (code, doc["runs"][-1]["file"]) == (1, "-q.jsonl")

    def test_strict_on_clean_input(self) -> None:
        """``--strict`` changes nothing on clean input."""
        assert main(["check", "--strict", LOOPING]) == 1

    def test_bad_config(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Invalid TOML in ``--config`` is a one-line config error and exit 2."""
        config = tmp_path / "bad.toml"
        config.write_text("[loopguard\n", encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"otel-loopguard: config error: {config}: invalid TOML")
        assert len(err.splitlines()) == 1

    def test_bad_config_value(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An out-of-range value in ``--config`` names the setting."""
        config = tmp_path / "c.toml"
        config.write_text("[loopguard]\nstagnation_warn = 1\n", encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        assert "stagnation_warn must be an integer >= 2, got 1" in capsys.readouterr().err


    @pytest.mark.parametrize(("text", "kind"), [("loopguard = 3\n", "int"),
                                                ('loopguard = "observe"\n', "str"),
                                                ('[[loopguard]]\nmode = "enforce"\n', "list")])
    def test_loopguard_key_that_is_not_a_table(self, tmp_path: Path, text: str, kind: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """``loopguard`` that is not the ``[loopguard]`` table is a config error naming the file,
        not an unexpected ``TypeError``/``ValueError``."""
        config = tmp_path / "c.toml"
        config.write_text(text, encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        assert capsys.readouterr().err == (
            f"otel-loopguard: config error: {config}: loopguard must be the [loopguard] table "
            f"of settings, got {kind}\n")

    @pytest.mark.parametrize("text", ["tools = 0", "tools = []", "tools = false",
                                      "templates = []", "prices = 0"])
    def test_a_table_that_is_falsy_is_still_not_a_table(
            self, tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
        """``tools = 0`` is rejected like ``tools = 3``, not read as no tools at all."""
        config = tmp_path / "c.toml"
        config.write_text(text + "\n", encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        name = text.split(maxsplit=1)[0]
        assert capsys.readouterr().err.startswith(
            f"otel-loopguard: config error: {config}: {name} must be a table of ")

    @pytest.mark.parametrize(("text", "message"), [
        ('[loopguard.templates."coding-agent"]\nstagnation_warn = 4\n',
         "templates.coding-agent: unknown setting 'stagnation_warn'; per-template settings are "),
        ("[loopguard.templates]\ncoding-agent = 3\n",
         "templates.coding-agent must be a table of budgets, got int"),
        ('[loopguard.templates."coding-agent"]\nmax_steps_warn = 0\n',
         "templates.coding-agent.max_steps_warn must be an integer >= 1")])
    def test_a_bad_template_table_names_the_file(self, tmp_path: Path, text: str, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A template's bad table in the file names the file, as a tool's bad table does."""
        config = tmp_path / "c.toml"
        config.write_text(text, encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        assert capsys.readouterr().err.startswith(
            f"otel-loopguard: config error: {config}: {message}")

    def test_a_limit_on_by_default_is_turned_off_in_the_file(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """TOML has no null: "off" turns off a limit that is on by default, in the file's
        settings, a template's table or a tool's, as ``off`` does in a variable."""
        config = tmp_path / "c.toml"
        config.write_text('[loopguard]\nmax_tool_calls_warn = 3\nidle_turns_warn = "off"\n'
                          '[loopguard.tools.search_kb]\nstagnation_no_effect_warn = "off"\n',
                          encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 0
        assert "over budget" in capsys.readouterr().out
        with config.open("a", encoding="utf-8") as out:
            out.write('[loopguard.templates.order_status]\nmax_tool_calls_warn = "off"\n')
        assert main(["check", "--config", str(config), HEALTHY]) == 0
        assert "over budget" not in capsys.readouterr().out
        config.write_text('max_tool_calls_warn = "of"\n', encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        assert capsys.readouterr().err == (
            f"otel-loopguard: config error: {config}: max_tool_calls_warn must be an integer "
            """>= 1 (or "off"), got 'of'\n""")

    def test_embedder_that_does_not_import(self, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """An embedder path that does not import is a one-line config error naming it."""
        config = tmp_path / "c.toml"
        config.write_text('[loopguard]\nnear_duplicate_embedder = "no_such_module_xyz:embed"\n',
                          encoding="utf-8")
        assert main(["check", "--config", str(config), HEALTHY]) == 2
        err = capsys.readouterr().err
        assert err.startswith("otel-loopguard: config error: near_duplicate_embedder: cannot "
                              "load 'no_such_module_xyz:embed'")
        assert len(err.splitlines()) == 1


def test_a_handoff_finding_says_where_it_fell(capsys: pytest.CaptureFixture[str]) -> None:
    """A handoff loop has no triggering tool call: the text says so instead of "call 0"."""
    recorded = ROOT / "tests" / "data" / "recorded" / "agents-otel-genai.jsonl"
    assert main(["check", "-q", str(recorded)]) == 1
    out = capsys.readouterr().out
    assert "stop at a handoff before any tool call (HANDOFF_LOOP, handoff): " \
           "triage -> billing -> triage" in out
    assert "call 0" not in out


def test_an_idle_turns_finding_says_it_fell_at_a_model_turn(
        write_trace: Callable[..., str], capsys: pytest.CaptureFixture[str]) -> None:
    """Four chat answers in a row without a tool call: the text names the model turn."""
    def body(agent: AgentScript) -> None:
        agent.turn(finish_reasons=["tool_calls"])
        agent.tool("bash", {"command": "ls"}, "a.py")
        rejected = {"gen_ai.input.messages": json.dumps(
            [{"role": "user", "content": "Your answer was not formatted correctly."}])}
        for _ in range(4):
            agent.turn(finish_reasons=["stop"], attributes=rejected)

    path = write_trace(({}, body))
    assert main(["check", "--fail-on", "warn", path]) == 1
    out = capsys.readouterr().out
    assert "  - warn at a model turn after call 1 (IDLE_TURNS, idle_turns): 4 turns in a row " \
           "without a tool call\n    hint: You have answered 4 times in a row" in out


class TestPartlyBadRecords:
    def test_one_bad_span_keeps_the_others(self, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """A line with one malformed span keeps its good spans (as serve's partial success
        does) and reports the bad one as ``file:line``; the exit code says input was bad."""
        line = Path(LOOPING).read_text(encoding="utf-8").strip()
        trace_ids = re.findall(r'"traceId":"([0-9a-f]{32})"', line)
        bad = re.sub(r'"traceId":"[0-9a-f]{32}"', '"traceId":"xyz"', line, count=1)
        path = tmp_path / "one-bad.jsonl"
        path.write_text(bad + "\n", encoding="utf-8")
        assert main(["check", "--format", "json", str(path)]) == 2
        captured = capsys.readouterr()
        runs = json.loads(captured.out)["runs"]
        assert [r["trace_ids"] for r in runs] == [[trace_ids[1]]]
        assert runs[0]["action"] == "stop"
        assert f"{path}:1: rejected 1 malformed span(s), kept {len(trace_ids) - 1}; first: " \
               "resourceSpans[0].scopeSpans[0].spans[0]" in captured.err

    def test_every_span_bad_is_one_error(self, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        """A line whose spans are all malformed reports that, and no run."""
        line = Path(LOOPING).read_text(encoding="utf-8").strip()
        bad = re.sub(r'"traceId":"[0-9a-f]{32}"', '"traceId":"xyz"', line)
        path = tmp_path / "all-bad.jsonl"
        path.write_text(bad + "\n", encoding="utf-8")
        assert main(["check", "--format", "json", str(path)]) == 2
        captured = capsys.readouterr()
        assert json.loads(captured.out)["runs"] == []
        assert f"{path}:1: all " in captured.err and " spans rejected: " in captured.err


class TestStreaming:
    @staticmethod
    def _peak_kb(tmp_path: Path, runs: int) -> int:
        """Peak RSS (KB) of a ``check --format json`` process over ``runs`` looping runs."""
        line = Path(LOOPING).read_text(encoding="utf-8").strip()
        trace_id = re.search(r'"traceId":"([0-9a-f]{32})"', line).group(1)  # type: ignore[union-attr]
        path = tmp_path / f"many-{runs}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for n in range(runs):
                handle.write(line.replace(trace_id, f"{n + 1:032x}") + "\n")
        measure = ("import resource, subprocess, sys; subprocess.run([sys.executable, '-m', "
                   "'otel_loopguard', 'check', '--format', 'json', sys.argv[1]], "
                   "stdout=subprocess.DEVNULL, check=False); "
                   "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        done = subprocess.run([sys.executable, "-c", measure, str(path)], cwd=ROOT,
                              capture_output=True, text=True, check=True, timeout=120)
        return int(done.stdout)

    def test_memory_does_not_grow_with_the_runs_reported(self, tmp_path: Path) -> None:
        """Reports are written as runs finish and not kept: four times the (flagged) runs
        cost about the same peak memory once the input is past the reader's buffer; keeping
        every report grew it by about 20 MB here."""
        small = self._peak_kb(tmp_path, 1_000)
        large = self._peak_kb(tmp_path, 4_000)
        assert large < small + 8_000, (small, large)


class TestInputs:
    def test_stdin(self, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
        """``-`` reads the trace from standard input."""
        class Stdin:
            buffer = io.BytesIO(Path(LOOPING).read_bytes())

        monkeypatch.setattr(sys, "stdin", Stdin())
        code, doc = _json(capsys, ["-"])
        assert code == 1
        assert [r["run_id"] for r in doc["runs"]] == ["6143f831f09ff9b0e86f1d11d41297b6"]

    def test_several_files(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Several paths are checked together."""
        _, doc = _json(capsys, [HEALTHY, LOOPING])
        assert doc["summary"]["runs"] == 2

    def test_config_file_applies(self, tmp_path: Path) -> None:
        """``--config`` changes the verdict: exempt tools are never flagged."""
        config = tmp_path / "c.toml"
        config.write_text("[loopguard.tools.search_kb]\nkind = \"exempt\"\n"
                          "[loopguard.tools.crm_lookup]\nkind = \"exempt\"\n", encoding="utf-8")
        assert main(["check", "--config", str(config), LOOPING]) == 0

    def test_config_file_from_environment(self, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """Without ``--config``, ``LOOPGUARD_CONFIG_FILE`` is used."""
        config = tmp_path / "c.toml"
        config.write_text("[loopguard]\ndetectors = [\"budget\"]\n", encoding="utf-8")
        monkeypatch.setenv("LOOPGUARD_CONFIG_FILE", str(config))
        assert main(["check", LOOPING]) == 0

    def test_a_logs_file_beside_traces_is_read_not_a_bad_record(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A logs request is not a bad record (docs/cli.md): log records that are no coding
        agent's events are read and ignored; a metrics request is a bad record."""
        logs = tmp_path / "logs.jsonl"
        logs.write_text(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [
            {"timeUnixNano": "1", "body": {"stringValue": "hello"}}]}]}]}) + "\n",
            encoding="utf-8")
        assert main(["check", "-q", str(logs), LOOPING]) == 1
        assert capsys.readouterr().err == ""
        assert main(["check", "-q", str(logs)]) == 2
        assert "nothing to check: no spans in" in capsys.readouterr().err
        metrics = tmp_path / "metrics.jsonl"
        metrics.write_text('{"resourceMetrics": []}\n', encoding="utf-8")
        assert main(["check", "-q", str(metrics), LOOPING]) == 2
        assert f"{metrics}:1: an OTLP metrics request, not traces" in capsys.readouterr().err

    def test_quiet_lists_flagged_runs_only(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--quiet`` drops the ``ok`` lines but keeps the flagged runs and the summary."""
        main(["check", "-q", HEALTHY, LOOPING])
        out = capsys.readouterr().out
        assert "ok    run" not in out
        assert "STOP  run" in out and "2 runs" in out


class TestRunKey:
    def test_conversation_merges_traces(self, write_trace: Callable[..., str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """Two traces of one conversation form one run under ``--run-key conversation``."""
        path = write_trace(({"conversation": "conv-9"}, _same_search(2)),
                           ({"conversation": "conv-9"}, _same_search(2)))
        code, doc = _json(capsys, ["--run-key", "conversation", path])
        assert code == 0
        (run,) = doc["runs"]
        assert run["run_id"] == "conv-9"
        assert len(run["trace_ids"]) == 2 and len(set(run["trace_ids"])) == 2
        assert run["tool_calls"] == 4
        assert run["action"] == "replan"
        assert [f["call_index"] for f in run["findings"]] == [3, 4]

    def test_trace_key_keeps_traces_apart(self, write_trace: Callable[..., str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """By default each trace is its own run, so nothing accumulates across them."""
        path = write_trace(({"conversation": "conv-9"}, _same_search(2)),
                           ({"conversation": "conv-9"}, _same_search(2)))
        code, doc = _json(capsys, [path])
        assert code == 0
        assert [r["action"] for r in doc["runs"]] == ["continue", "continue"]

    def test_agent_key(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--run-key agent`` names each run after its trace and agent span."""
        _, doc = _json(capsys, ["--run-key", "agent", LOOPING])
        assert [r["run_id"] for r in doc["runs"]] == [
            "6143f831f09ff9b0e86f1d11d41297b6/a4e7c6717154f990"]


class TestModule:
    def test_python_dash_m_help(self) -> None:
        """``python -m otel_loopguard --help`` exits 0 and prints the usage."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-m", "otel_loopguard", "--help"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: otel-loopguard")
        assert "check" in done.stdout


def test_check_help_shows_the_effective_run_key(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """check --help gives --run-key's default as it would apply: LOOPGUARD_RUN_KEY when set."""
    monkeypatch.setenv("LOOPGUARD_RUN_KEY", "conversation")
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "default: conversation, from LOOPGUARD_RUN_KEY" in " ".join(
        capsys.readouterr().out.split())
    monkeypatch.delenv("LOOPGUARD_RUN_KEY")
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "default: trace, or run_key in --config" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["check", "serve"])
def test_help_says_the_config_file_defaults_to_the_variable(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--help of check and serve says --config defaults to LOOPGUARD_CONFIG_FILE, as cli.md's
    table does (it said only "TOML config file", and a file set in the environment applied
    unannounced)."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "TOML config file (default: $LOOPGUARD_CONFIG_FILE when set)" in " ".join(
        capsys.readouterr().out.split())


def test_check_help_says_quiet_keeps_runs_over_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """check --help describes --quiet as it works and as docs/cli.md says: runs over budget are
    listed too, not only flagged runs."""
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "list only flagged runs and runs over budget" in " ".join(
        capsys.readouterr().out.split())


def test_serve_help_shows_the_effective_run_key(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """serve --help gives --run-key's default as check's does: serve reads run_key from
    LOOPGUARD_RUN_KEY and --config too, so "default: trace" alone was wrong."""
    monkeypatch.setenv("LOOPGUARD_RUN_KEY", "agent")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "default: agent, from LOOPGUARD_RUN_KEY" in " ".join(capsys.readouterr().out.split())
    monkeypatch.delenv("LOOPGUARD_RUN_KEY")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "default: trace, or run_key in --config" in " ".join(capsys.readouterr().out.split())


class TestArguments:
    def test_a_mistyped_flag_is_worded_by_its_command(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """A flag the command does not take is reported with the command's name and usage
        (which lists the flags it does take), not the top level's ``COMMAND ...``."""
        with pytest.raises(SystemExit) as info:
            main(["check", "--fial-on", "warn", HEALTHY])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: otel-loopguard check [-h]")
        assert err.endswith("otel-loopguard check: error: unrecognized arguments: --fial-on\n")

    def test_paths_may_follow_a_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Paths on both sides of a flag are all checked (argparse alone took the second for
        an unknown argument)."""
        assert main(["check", HEALTHY, "-q", LOOPING]) == 1
        out = capsys.readouterr().out
        assert out.startswith("STOP  run 6143f831f09ff9b0e86f1d11d41297b6")
        assert out.rstrip().splitlines()[-1].startswith("2 runs, 13 tool calls; 1 flagged")

    def test_an_unknown_flag_before_a_command_is_the_top_levels(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """With no command named first, the top-level parser words the error."""
        with pytest.raises(SystemExit) as info:
            main(["--bogus"])
        assert info.value.code == 2
        assert "otel-loopguard: error: unrecognized arguments: --bogus" in capsys.readouterr().err
