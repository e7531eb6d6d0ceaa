"""``check`` output: JUnit XML, SARIF 2.1.0, GitHub workflow commands, ``--output``, and text
that no span can forge."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _otlp_files import json_line, scripted_spans

from otel_loopguard.cli import _sarif, main
from otel_loopguard.cli._github import escape_data, escape_property
from otel_loopguard.cli._report import clean, indented_json
from otel_loopguard.cli._text import use_color
from otel_loopguard.testing import AgentScript

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = str(ROOT / "examples" / "traces" / "healthy_agent.jsonl")
LOOPING = str(ROOT / "examples" / "traces" / "looping_agent.jsonl")
WASTE = "wasted 3 tool calls, 3 model turns, 0.03 s in tools"
"""What the looping example wastes after its first finding (calls 4, 5 and 7)."""
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
EVIL = "evil\x1b[31m\r\nSTOP  run forged\u202e%0A,x:y\x00"
"""A tool name that tries to forge a line, colour the terminal and reverse the text."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LOOPGUARD_") or name in ("NO_COLOR", "FORCE_COLOR",
                                                     "CLICOLOR_FORCE"):
            monkeypatch.delenv(name)


def _output(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", *argv])
    return code, capsys.readouterr().out


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main(["check", "--format", "json", *argv])
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.fixture(name="evil_trace")
def _evil_trace(tmp_path: Path) -> str:
    """A looping run whose tool name, conversation id and template carry control characters."""
    def body(agent: AgentScript) -> None:
        for _ in range(5):
            agent.turn()
            agent.tool(EVIL, {"q": "x"}, "same")

    spans = scripted_spans(({"prompt": "tmpl\x1b[2J\x08", "conversation": "c\x1b]0;t\x07\nok"},
                            body))
    path = tmp_path / "evil.jsonl"
    path.write_text(json_line(spans) + "\n", encoding="utf-8")
    return str(path)


class TestJunit:
    @staticmethod
    def _parse(text: str) -> ET.Element:
        """Parse and check the shape CI systems read: testsuites/testsuite/testcase/failure,
        with consistent counts."""
        root = ET.fromstring(text)
        assert root.tag == "testsuites"
        (suite,) = root
        assert suite.tag == "testsuite"
        cases = [child for child in suite if child.tag != "properties"]
        assert [child.tag for child in suite][:1] == ["properties"]
        assert all(case.tag == "testcase" and case.get("name") and case.get("classname")
                   for case in cases)
        failures = [c for c in cases if c.find("failure") is not None]
        errors = [c for c in cases if c.find("error") is not None]
        for node in (root, suite):
            assert int(node.get("tests", "-1")) == len(cases)
            assert int(node.get("failures", "-1")) == len(failures)
            assert int(node.get("errors", "-1")) == len(errors)
            assert float(node.get("time", "-1")) >= 0
        for case in cases:
            assert {child.tag for child in case} <= {"failure", "error", "system-out"}
            for result in (*case.findall("failure"), *case.findall("error")):
                assert result.get("message") and result.get("type")
        return root

    def test_one_case_per_run_one_failure_per_failing_run(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out = _output(capsys, "--format", "junit", HEALTHY, LOOPING)
        assert code == 1
        suite = self._parse(out)[0]
        cases = {c.get("classname"): c for c in suite.findall("testcase")}
        assert set(cases) == {"order_status@v1", "support_triage@v3"}
        failure = cases["support_triage@v3"].find("failure")
        assert failure is not None and failure.get("type") == "stop"
        assert failure.text is not None
        assert "stop at call 7 (PERMANENT_FAILURE, failure): crm_lookup - calls 6, 7" in \
            failure.text
        assert cases["support_triage@v3"].get("file") == LOOPING
        assert cases["support_triage@v3"].get("line") == "1"
        assert len(cases["order_status@v1"]) == 0

    def test_below_fail_on_is_not_a_failure(self, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A run flagged below ``--fail-on`` passes, its findings in ``system-out``."""
        def warned(agent: AgentScript) -> None:
            for _ in range(3):
                agent.turn()
                agent.tool("search", {"q": "refunds"}, "no results")

        path = tmp_path / "warn.jsonl"
        path.write_text(json_line(scripted_spans(({}, warned))) + "\n", encoding="utf-8")
        _, out = _output(capsys, "--format", "junit", str(path))
        (case,) = self._parse(out)[0].findall("testcase")
        assert case.find("failure") is None
        system_out = case.find("system-out")
        assert system_out is not None and "warn at call 3" in (system_out.text or "")
        _, out = _output(capsys, "--format", "junit", "--fail-on", "warn", str(path))
        (case,) = self._parse(out)[0].findall("testcase")
        assert case.find("failure") is not None

    def test_bad_input_is_an_error_case(self, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"foo": 1}\n', encoding="utf-8")
        code, out = _output(capsys, "--format", "junit", str(bad), LOOPING)
        assert code == 2
        cases = self._parse(out)[0]
        error = cases[-1].find("error")
        assert error is not None and error.get("message") == "1 bad input record skipped"
        assert f"{bad}:1: not an OTLP trace request" in (error.text or "")

    def test_empty_input_is_an_error_case(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        empty = tmp_path / "empty.jsonl"
        empty.write_bytes(b"")
        code, out = _output(capsys, "--format", "junit", str(empty))
        assert code == 2
        (case,) = self._parse(out)[0].findall("testcase")
        error = case.find("error")
        assert error is not None and error.get("message") == "no spans in the input"

    def test_span_text_cannot_break_the_xml(self, evil_trace: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """Control characters cannot even be escaped in XML 1.0: they are spelled out."""
        _, out = _output(capsys, "--format", "junit", evil_trace)
        (case,) = self._parse(out)[0].findall("testcase")
        failure = case.find("failure")
        assert failure is not None
        assert "evil\\x1b[31m\\x0d\\x0aSTOP  run forged\\u202e" in (failure.text or "")

    def test_any_stdout_encoding_gives_the_utf8_it_declares(self, tmp_path: Path) -> None:
        """Non-ASCII span text is written as character references: with standard output in
        cp1252 (a pipe on Windows), the document still parses, and says ``données``."""
        def loop(agent: AgentScript) -> None:
            for _ in range(5):
                agent.turn()
                agent.tool("recherche_données_🔎", {"q": "x"}, "same")

        path = tmp_path / "accents.jsonl"
        path.write_text(json_line(scripted_spans(({"prompt": "tri@v1"}, loop))) + "\n",
                        encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "otel_loopguard", "check", "--format",
                               "junit", str(path)], capture_output=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT),
                                   "PYTHONIOENCODING": "cp1252"}, check=False)
        assert done.returncode == 1
        assert done.stdout.isascii()
        (case,) = self._parse(done.stdout.decode("ascii"))[0].findall("testcase")
        failure = case.find("failure")
        assert failure is not None
        assert "): recherche_données_🔎 - calls 1, 2, 3" in (failure.text or "")


@pytest.fixture(name="validate", scope="module")
def _validator() -> Any:
    """Validate against the SARIF 2.1.0 schema (the OASIS one, kept under tests/data)."""
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER).validate


class TestSarif:
    def test_valid_and_one_result_per_finding(self, validate: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        findings = [f for r in _json(capsys, HEALTHY, LOOPING)["runs"] for f in r["findings"]]
        code, out = _output(capsys, "--format", "sarif", HEALTHY, LOOPING)
        assert code == 1
        log = json.loads(out)
        validate(log)
        (run,) = log["runs"]
        results = run["results"]
        assert [(r["ruleId"], r["properties"]["call_index"]) for r in results] == [
            (f["code"], f["call_index"]) for f in findings]
        assert [r["level"] for r in results] == ["warning", "warning", "error", "error"]
        rules = run["tool"]["driver"]["rules"]
        assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
        location = results[-1]["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == Path(LOOPING).as_uri()
        assert location["region"] == {"startLine": 1}
        assert run["invocations"] == [{"executionSuccessful": True}]

    def test_relative_paths_are_relative_uris(self, tmp_path: Path, validate: Any,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "my traces").mkdir()
        (tmp_path / "my traces" / "t.jsonl").write_bytes(Path(LOOPING).read_bytes())
        monkeypatch.chdir(tmp_path)
        _, out = _output(capsys, "--format", "sarif", "my traces/t.jsonl")
        log = json.loads(out)
        validate(log)
        uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
            "artifactLocation"]["uri"]
        assert uri == "my%20traces/t.jsonl"

    @pytest.mark.skipif(sys.platform in ("darwin", "win32"),
                        reason="file names here must be valid Unicode")
    def test_a_file_name_that_is_not_utf8(self, tmp_path: Path, validate: Any,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """A relative path with a byte that is not UTF-8 is percent-encoded as a byte (as an
        absolute path's ``file:`` URI is), in a result and in a bad record's notification."""
        looping = os.fsdecode(b"loop\xff.jsonl")
        (tmp_path / looping).write_bytes(Path(LOOPING).read_bytes())
        bad = os.fsdecode(b"bad\xfe.jsonl")
        (tmp_path / bad).write_text('{"foo": 1}\n', encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        code, out = _output(capsys, "--format", "sarif", looping, bad)
        assert code == 2
        log = json.loads(out)
        validate(log)
        (run,) = log["runs"]
        assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for r in run["results"]} == {"loop%FF.jsonl"}
        (note,) = run["invocations"][0]["toolExecutionNotifications"]
        assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
            "bad%FE.jsonl"

    def test_fingerprints_group_a_recurring_loop(self, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        """The same loop in two runs (two trace ids) has the same fingerprints."""
        line = Path(LOOPING).read_text(encoding="utf-8").strip()
        other = re.sub(r'"traceId":"[0-9a-f]{32}"', '"traceId":"' + "ab" * 16 + '"', line)
        path = tmp_path / "two.jsonl"
        path.write_text(f"{line}\n{other}\n", encoding="utf-8")
        _, out = _output(capsys, "--format", "sarif", str(path))
        results = json.loads(out)["runs"][0]["results"]
        prints = [r["partialFingerprints"]["loopguardFinding/v1"] for r in results]
        assert len(prints) == 8 and prints[:4] == prints[4:] and len(set(prints)) == 4

    def test_no_findings_and_bad_input(self, tmp_path: Path, validate: Any,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"foo": 1}\n', encoding="utf-8")
        code, out = _output(capsys, "--format", "sarif", HEALTHY, str(bad))
        assert code == 2
        log = json.loads(out)
        validate(log)
        (run,) = log["runs"]
        assert run["results"] == []
        (invocation,) = run["invocations"]
        assert invocation["executionSuccessful"] is False
        (note,) = invocation["toolExecutionNotifications"]
        assert note["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}

    def test_results_stop_at_what_code_scanning_accepts(
            self, validate: Any, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> None:
        """GitHub rejects a whole SARIF run of more than 25,000 results: past that many, the
        findings are counted, in a warning notification and ``results_dropped``, not written
        (here with the limit lowered to 3 of the 4 findings)."""
        assert _sarif.MAX_RESULTS == 25_000
        monkeypatch.setattr(_sarif, "MAX_RESULTS", 3)
        code, out = _output(capsys, "--format", "sarif", HEALTHY, LOOPING)
        assert code == 1
        log = json.loads(out)
        validate(log)
        (run,) = log["runs"]
        assert [r["properties"]["call_index"] for r in run["results"]] == [3, 4, 5]
        assert run["properties"]["results_dropped"] == 1
        (invocation,) = run["invocations"]
        assert invocation["executionSuccessful"] is True
        (note,) = invocation["toolExecutionNotifications"]
        assert note["level"] == "warning"
        assert note["message"]["text"].startswith("1 more finding not written: ")
        _, out = _output(capsys, "--format", "sarif", LOOPING)
        assert json.loads(out)["runs"][0]["properties"]["results_dropped"] == 1

    def test_empty_input_is_still_a_valid_log(self, tmp_path: Path, validate: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        empty = tmp_path / "empty.jsonl"
        empty.write_bytes(b"")
        code, out = _output(capsys, "--format", "sarif", "--allow-empty", str(empty))
        assert code == 0
        log = json.loads(out)
        validate(log)
        assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]

    def test_empty_input_is_a_notification(self, tmp_path: Path, validate: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """Without ``--allow-empty``, the failed invocation says why."""
        empty = tmp_path / "empty.jsonl"
        empty.write_bytes(b"")
        code, out = _output(capsys, "--format", "sarif", str(empty))
        assert code == 2
        log = json.loads(out)
        validate(log)
        assert log["runs"][0]["invocations"] == [{"executionSuccessful": False,
                                                  "toolExecutionNotifications": [{
            "level": "error", "message": {
                "text": "no spans in the input (--allow-empty accepts empty input)"}}]}]

    def test_span_text_is_cleaned(self, evil_trace: str, validate: Any,
                                  capsys: pytest.CaptureFixture[str]) -> None:
        _, out = _output(capsys, "--format", "sarif", evil_trace)
        log = json.loads(out)
        validate(log)
        text = log["runs"][0]["results"][0]["message"]["text"]
        assert "\x1b" not in text and "\n" not in text and "\u202e" not in text
        assert log["runs"][0]["results"][0]["properties"]["tool"] == EVIL


def _workflow_commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Parse workflow commands as the Actions runner does (``::name k=v,k=v::data``)."""
    def unescape(value: str, *extra: tuple[str, str]) -> str:
        for escaped, plain in (*extra, ("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
            value = value.replace(escaped, plain)
        return value

    commands = []
    for line in text.splitlines():
        match = re.fullmatch(r"::(\w+)(?: ([^:]*))?::(.*)", line)
        if match is None:
            continue
        props = {}
        for pair in (match.group(2) or "").split(","):
            key, _, value = pair.partition("=")
            props[key] = unescape(value, ("%3A", ":"), ("%2C", ","))
        commands.append((match.group(1), props, unescape(match.group(3))))
    return commands


class TestGithub:
    def test_annotations(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"foo": 1}\n', encoding="utf-8")
        code, out = _output(capsys, "--format", "github", HEALTHY, LOOPING, str(bad))
        assert code == 2
        commands = _workflow_commands(out)
        assert sorted((name, props.get("file"), props.get("line"))
                      for name, props, _ in commands) == sorted([
            ("error", LOOPING, "1"), ("error", str(bad), "1")])
        _, props, message = next(c for c in commands if c[1]["file"] == LOOPING)
        assert props["title"] == ("STOP run 6143f831f09ff9b0e86f1d11d41297b6 "
                                  "[support_triage@v3]: 7 tool calls")
        assert message.splitlines()[0] == ("warn at call 3 (STAGNANT_RESULT, stagnation): "
                                           "search_kb - calls 1, 2, 3")
        assert out.endswith("\n2 runs, 13 tool calls; 1 flagged; " + WASTE
                            + "; 1 bad input record skipped\n")

    def test_below_fail_on_is_a_warning(self, capsys: pytest.CaptureFixture[str]) -> None:
        _, out = _output(capsys, "--format", "github", "--fail-on", "warn", LOOPING)
        assert [c[0] for c in _workflow_commands(out)] == ["error"]
        _, out = _output(capsys, "--format", "github", LOOPING)
        assert [c[0] for c in _workflow_commands(out)] == ["error"]

    def test_span_text_cannot_forge_a_command(self, evil_trace: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """One flagged run is one line: the tool name's CR LF, ``::``, ``%`` and ``,`` stay
        inside it, escaped."""
        _, out = _output(capsys, "--format", "github", "--run-key", "conversation", evil_trace)
        lines = out.splitlines()
        assert len(lines) == 2
        ((_, props, message),) = _workflow_commands(out)
        # a template name with control characters gets a readable label
        assert props["title"] == \
            "STOP run c\\x1b]0;t\\x07\\x0aok [tpl-tmpl-2j-51bbe4c9]: 5 tool calls"
        assert "evil\\x1b[31m\\x0d\\x0aSTOP  run forged\\u202e%0A,x:y\\x00 - calls 1, 2, 3" \
            in message

    def test_standard_input_has_no_file_to_annotate(self) -> None:
        """Runs read from ``-`` are annotated without ``file=-`` (no such file in the
        repository), as their bad records and SARIF locations already were."""
        data = Path(LOOPING).read_bytes() + b"not json\n"
        done = subprocess.run([sys.executable, "-m", "otel_loopguard", "check", "--format",
                               "github", "-"], input=data, capture_output=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        assert done.returncode == 2
        commands = _workflow_commands(done.stdout.decode())
        assert [(name, "file" in props, "line" in props) for name, props, _ in commands] == [
            ("error", False, False), ("error", False, False)]

    def test_empty_input_is_an_error_annotation(self, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """Input without a span fails the step (exit 2): an annotation says why, as the JUnit
        and SARIF reports do; with ``--allow-empty`` there is none."""
        empty = tmp_path / "empty.jsonl"
        empty.write_bytes(b"")
        code, out = _output(capsys, "--format", "github", str(empty))
        assert code == 2
        assert _workflow_commands(out) == [
            ("error", {"title": "otel-loopguard: nothing to check"},
             "no spans in the input (--allow-empty accepts empty input)")]
        assert out.splitlines()[-1] == "0 runs, 0 tool calls; 0 flagged"
        code, out = _output(capsys, "--format", "github", "--allow-empty", str(empty))
        assert code == 0
        assert _workflow_commands(out) == []

    def test_a_notice_counts_the_annotations_github_hides(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """GitHub shows 10 annotations of a kind per step and drops the rest silently: past
        10, a closing notice says how many there are; at 10, there is none."""
        line = Path(LOOPING).read_text(encoding="utf-8").strip()
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"foo": 1}\n', encoding="utf-8")
        for runs in (10, 11):
            path = tmp_path / f"{runs}.jsonl"
            path.write_text("".join(
                re.sub(r'"traceId":"[0-9a-f]{32}"', f'"traceId":"{i:032x}"', line) + "\n"
                for i in range(1, runs + 1)), encoding="utf-8")
            _, out = _output(capsys, "--format", "github", str(path))
            commands = _workflow_commands(out)
            assert [name for name, _, _ in commands].count("error") == runs
            notices = [(props, message) for name, props, message in commands
                       if name == "notice"]
            if runs == 10:
                assert notices == []
                continue
            ((props, message),) = notices
            assert props == {"title": "otel-loopguard: more annotations than GitHub shows"}
            assert message == ("11 error annotations written: GitHub shows the first 10 of each "
                               "kind of a step; the step's log lists them all")
            assert out.splitlines()[-2].startswith("::notice ")  # then the summary line
        # a bad record's annotation is an error too
        _, out = _output(capsys, "--format", "github", str(tmp_path / "11.jsonl"), str(bad))
        ((_, message),) = [(p, m) for n, p, m in _workflow_commands(out) if n == "notice"]
        assert message.startswith("12 error annotations written: ")

    def test_escaping_rules(self) -> None:
        """The Actions toolkit's rules: ``%`` first, then CR and LF; ``:`` and ``,`` in
        properties."""
        assert escape_data("50% a\r\nb::c,d") == "50%25 a%0D%0Ab::c,d"
        assert escape_property("50% a\r\nb::c,d") == "50%25 a%0D%0Ab%3A%3Ac%2Cd"


class TestOutputFile:
    @pytest.mark.parametrize("fmt", ["text", "json", "junit", "sarif", "github"])
    def test_any_format_to_a_file(self, fmt: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
        """``--output`` writes what stdout would get (junit and sarif carry a time; compare
        their shape), and stdout stays empty."""
        target = tmp_path / f"report.{fmt}"
        code = main(["check", "--format", fmt, "--output", str(target), HEALTHY, LOOPING])
        assert code == 1
        assert capsys.readouterr().out == ""
        _, stdout = _output(capsys, "--format", fmt, HEALTHY, LOOPING)
        written = target.read_text(encoding="utf-8")
        timeless = re.compile(r' time="[0-9.]+"| timestamp="[^"]+"')
        assert timeless.sub("", written) == timeless.sub("", stdout)
        assert target.stat().st_mode & 0o644 == 0o644
        assert [p.name for p in tmp_path.iterdir()] == [target.name]

    def test_not_written_when_the_check_fails(self, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """An aborted check (``--strict`` on a bad record) leaves no half report behind."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text(Path(LOOPING).read_text() + '{"foo": 1}\n', encoding="utf-8")
        target = tmp_path / "report.xml"
        code = main(["check", "--strict", "--format", "junit", "-o", str(target), str(bad)])
        assert code == 2
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]
        assert capsys.readouterr().err.startswith(f"otel-loopguard: {bad}:2: ")

    @pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
    def test_a_pipe_is_written_not_replaced(self, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A FIFO (as ``/dev/null`` or ``/dev/stdout``, not a regular file) stays what it is:
        the report goes through it, where replacing it would leave a regular file behind."""
        pipe = tmp_path / "report.pipe"
        os.mkfifo(pipe)
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(pipe.read_text(encoding="utf-8")),
                                  daemon=True)  # stuck on open() if the pipe was replaced
        reader.start()
        code = main(["check", "--format", "json", "-o", str(pipe), LOOPING])
        reader.join(10)
        assert code == 1
        assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
        assert json.loads(got[0]) == json.loads(_output(capsys, "--format", "json", LOOPING)[1])

    def test_a_symlink_keeps_naming_the_report(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """``-o link`` replaces the file the link names, and the link stays a link."""
        (tmp_path / "reports").mkdir()
        real = tmp_path / "reports" / "report.txt"
        real.write_text("an older report\n", encoding="utf-8")
        link = tmp_path / "latest.txt"
        link.symlink_to(real)
        assert main(["check", "-o", str(link), LOOPING]) == 1
        assert link.is_symlink()
        assert real.read_text(encoding="utf-8") == _output(capsys, LOOPING)[1]
        assert sorted(p.name for p in real.parent.iterdir()) == ["report.txt"]

    def test_an_unwritable_place(self, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        target = tmp_path / "missing-dir" / "report.txt"
        assert main(["check", "-o", str(target), LOOPING]) == 2
        err = capsys.readouterr().err
        assert err == (f"otel-loopguard: {target}: cannot write the report: no such directory "
                       f"{target.parent}\n")


    @pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
    @pytest.mark.parametrize("strict", [[], ["--strict"]])
    def test_a_full_standard_output(self, strict: list[str]) -> None:
        """A report that standard output refuses (a full disk) is named as such in one line
        (it was ``unexpected error: OSError: [Errno 28] ...``)."""
        with open("/dev/full", "w", encoding="utf-8") as full:
            done = subprocess.run([sys.executable, "-m", "otel_loopguard", "check", *strict,
                                   LOOPING], stdout=full, stderr=subprocess.PIPE, timeout=120,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        assert done.returncode == 2
        assert done.stderr.decode() == ("otel-loopguard: standard output: cannot write the "
                                        "report: No space left on device\n")

class TestText:
    def test_span_text_cannot_forge_lines(self, evil_trace: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """Newlines, ESC, NUL and bidi overrides from spans are spelled out: one run is its
        run line, one entry per finding with its hint, and the totals."""
        _, out = _output(capsys, "--run-key", "conversation", evil_trace)
        lines = out.splitlines()
        # a template name with control characters gets a readable label
        assert lines[0] == \
            "STOP  run c\\x1b]0;t\\x07\\x0aok [tpl-tmpl-2j-51bbe4c9]: 5 tool calls"
        assert len(lines) == 1 + 2 * 3 + 1 + 2  # the run, its entries, its waste, the totals
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", out)
        assert "evil\\x1b[31m\\x0d\\x0aSTOP  run forged\\u202e%0A,x:y\\x00 - calls 1, 2, 3" in out

    def test_clean(self) -> None:
        assert clean("plain ünïcode → ok") == "plain ünïcode → ok"
        assert clean("a\nb\tc\x7f\x9b\u2028\ud800") == "a\\x0ab\\x09c\\x7f\\x9b\\u2028\\ud800"

    def test_prompt_template_on_every_run_line(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """Clean runs show their template too; a run without one says so."""
        path = tmp_path / "t.jsonl"
        path.write_text(json_line(scripted_spans(
            ({}, lambda agent: agent.tool("search", {"q": 1}, "r")))) + "\n", encoding="utf-8")
        _, out = _output(capsys, HEALTHY, str(path))
        lines = out.splitlines()
        assert lines[0] == ("ok    run 3ca5fe047262230b8092163bef8e409a [order_status@v1]: "
                            "6 tool calls, no loop")
        assert re.fullmatch(r"ok    run [0-9a-f]{32} \[no prompt template\]: 1 tool call, "
                            r"no loop", lines[1])

    def test_plurals(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "t.jsonl"
        path.write_text(json_line(scripted_spans(
            ({}, lambda agent: agent.tool("search", {"q": 1}, "r")))) + "\n", encoding="utf-8")
        _, out = _output(capsys, str(path))
        assert out.endswith("\n1 run, 1 tool call; 0 flagged\n")
        _, out = _output(capsys, HEALTHY, LOOPING)
        assert out.endswith("\n2 runs, 13 tool calls; 1 flagged; " + WASTE + "\n")

    def test_color_always_and_never(self, capsys: pytest.CaptureFixture[str]) -> None:
        _, out = _output(capsys, "--color", "always", LOOPING)
        assert out.startswith("\x1b[1;31mSTOP \x1b[0m run 6143f831")
        _, out = _output(capsys, "--color", "never", LOOPING)
        assert "\x1b" not in out

    def test_color_auto_on_a_terminal(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``auto`` colours a terminal, not a pipe or file, and never when NO_COLOR is set."""
        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        terminal = Terminal()
        monkeypatch.setattr(sys, "stdout", terminal)
        assert main(["check", LOOPING]) == 1
        assert "\x1b[1;31mSTOP" in terminal.getvalue()
        monkeypatch.setenv("NO_COLOR", "1")
        terminal.seek(0)
        terminal.truncate()
        assert main(["check", LOOPING]) == 1
        assert "\x1b" not in terminal.getvalue()
        assert use_color("always", terminal)
        monkeypatch.setenv("NO_COLOR", "")
        monkeypatch.setenv("TERM", "dumb")
        assert not use_color("auto", terminal)
        monkeypatch.setenv("TERM", "xterm")
        assert use_color("auto", terminal)
        assert not use_color("auto", io.StringIO())


    @pytest.mark.parametrize(("variables", "colored"), [
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "true"}, True),
        ({"CLICOLOR_FORCE": "1"}, True),
        ({"FORCE_COLOR": "0"}, False),
        ({"FORCE_COLOR": "false"}, False),
        ({"CLICOLOR_FORCE": "0"}, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ({"CLICOLOR_FORCE": "1", "TERM": "dumb"}, True),
    ], ids=["force", "force-true", "clicolor-force", "force-0", "force-false",
            "clicolor-force-0", "no-color-wins", "forced-on-dumb-terminal"])
    def test_forced_color_into_a_pipe(self, variables: dict[str, str], colored: bool,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """FORCE_COLOR and CLICOLOR_FORCE colour output that is not a terminal (a CI log);
        NO_COLOR beats them, and 0 or false forces nothing."""
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        _, out = _output(capsys, LOOPING)
        assert out.startswith("\x1b[1;31mSTOP") is colored
        assert ("\x1b" in out) is colored

    def test_color_flag_beats_the_environment(self, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """--color never wins over FORCE_COLOR, --color always over NO_COLOR."""
        monkeypatch.setenv("FORCE_COLOR", "1")
        assert "\x1b" not in _output(capsys, "--color", "never", LOOPING)[1]
        monkeypatch.delenv("FORCE_COLOR")
        monkeypatch.setenv("NO_COLOR", "1")
        assert "\x1b[1;31mSTOP" in _output(capsys, "--color", "always", LOOPING)[1]


    def test_a_report_file_is_coloured_only_when_asked(self, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
        """FORCE_COLOR colours a pipe or CI log, not a report file; --color always does."""
        monkeypatch.setenv("FORCE_COLOR", "1")
        report = tmp_path / "report.txt"
        assert main(["check", "-o", str(report), LOOPING]) == 1
        assert "\x1b" not in report.read_text(encoding="utf-8")
        assert main(["check", "--color", "always", "-o", str(report), LOOPING]) == 1
        assert report.read_text(encoding="utf-8").startswith("\x1b[1;31mSTOP")


class TestJson:
    def test_indented_json_is_the_standard_library_text(self) -> None:
        """orjson writes it when that gives json.dumps(indent=2)'s text; json.dumps otherwise."""
        doc = {"runs": [{"run_id": "r1", "findings": [], "waste": {"tool_seconds": 0.25}},
                        {"nested": {"empty": {}, "list": [], "none": None, "flag": True}}]}
        assert indented_json(doc) == json.dumps(doc, indent=2)
        non_ascii = {"tool": "recherche_données", "hint": "\u202e"}
        assert indented_json(non_ascii) == json.dumps(non_ascii, indent=2)
        assert "\\u00e9" in indented_json(non_ascii)
        huge = {"count": 1 << 70}
        assert indented_json(huge) == json.dumps(huge, indent=2)

    def test_the_document_parses_whole(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", "--format", "json", LOOPING, HEALTHY]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert [run["action"] for run in doc["runs"]].count("stop") >= 1
        assert doc["summary"]["runs"] == len(doc["runs"])

    def test_bad_input_is_named(self, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
        """The summary lists the bad records as stderr names them (the first 100), so a
        script reading ``--output report.json`` learns which input was bad, not only how much;
        a missing file is one of them."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"foo": 1}\n' * 101 + "\n", encoding="utf-8")
        missing = tmp_path / "nope\x1b.jsonl"
        target = tmp_path / "report.json"
        code = main(["check", "--format", "json", "-o", str(target), str(missing), str(bad),
                     LOOPING])
        assert code == 2
        summary = json.loads(target.read_text(encoding="utf-8"))["summary"]
        assert summary["bad_records"] == 102
        assert summary["bad_input"][:2] == [
            f"{tmp_path}/nope\\x1b.jsonl: no such file",
            f"{bad}:1: not an OTLP trace request: no resourceSpans (keys: 'foo')"]
        assert len(summary["bad_input"]) == 100
        assert _json(capsys, LOOPING)["summary"]["bad_input"] == []


def test_a_file_that_cannot_be_opened_loses_nothing_else(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A path that is a socket (or was removed after the listing) is one bad input: the other
    files are still read and reported, and the exit code is 2."""
    import socket

    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        code = main(["check", "--format", "json", LOOPING, str(path), HEALTHY])
    finally:
        server.close()
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 2
    assert doc["summary"]["runs"] == 2 and doc["summary"]["bad_records"] == 1
    assert str(path) in captured.err


def test_sarif_from_standard_input_names_an_artifact(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub code scanning rejects a result without a physical location."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(Path(LOOPING).read_bytes())))
    main(["check", "--format", "sarif", "-"])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert results
    for result in results:
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == "stdin"


def test_json_names_a_file_whose_name_is_not_utf8(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A lone surrogate escape (``\\udcff``) in the document breaks strict JSON parsers."""
    import orjson

    path = os.path.join(os.fsencode(tmp_path), b"bad\xffname.jsonl")
    with open(path, "wb") as out:
        out.write(Path(LOOPING).read_bytes())
    main(["check", "--format", "json", os.fsdecode(path)])
    doc = orjson.loads(capsys.readouterr().out.encode("utf-8", "surrogateescape"))
    assert doc["runs"][0]["file"].endswith("name.jsonl")


def test_every_finding_code_has_a_sarif_rule() -> None:
    """Each code the policy words a hint for is a described rule, not just its code."""
    from otel_loopguard.policy import _TEMPLATES

    assert set(_TEMPLATES) <= set(_sarif._RULES), sorted(set(_TEMPLATES) - set(_sarif._RULES))
