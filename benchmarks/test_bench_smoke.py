"""Smoke benchmarks: the engine over one 100-call run of realistic calls; the processor's
in-process timing of other spans, in every trace shape, so the script keeps running.

Not collected by the test suite (``testpaths = ["tests"]``). Run it on its own::

    PYTHONPATH=. python -m pytest benchmarks/test_bench_smoke.py -p no:cacheprovider \
        --benchmark-disable

With ``--benchmark-disable`` the benchmarked function runs once, as a plain test (well under 2 s);
without it, pytest-benchmark times it. It never imports loopguard-runtime: the comparison lives
in ``bench_engine.py``. It asserts what the run must look like, never how fast it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _workload import RESULT_BYTES, no_loop_run, to_tool_calls
from bench_processor import SHAPES, in_process

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.types import Action


def _one_run(engine: LoopEngine, calls: list[Any]) -> Action:
    run = engine.new_run()
    for call in calls:
        engine.process(run, call)
    return run.highest


def test_engine_finds_a_loop_in_the_workload_shape() -> None:
    """The same engine flags the workload's call repeated with its result: the healthy run's
    quiet below is the detectors' judgement, not an engine that detects nothing."""
    calls = to_tool_calls(no_loop_run(1) * 5)
    assert _one_run(LoopEngine(LoopGuardConfig()), calls) == Action.STOP


def test_engine_100_calls(benchmark: Any) -> None:
    calls = no_loop_run(100)
    assert all(len(c.arguments) == 4 for c in calls)
    assert all(RESULT_BYTES - 60 <= len(c.result) <= RESULT_BYTES + 400 for c in calls)
    engine = LoopEngine(LoopGuardConfig())
    highest = benchmark(_one_run, engine, to_tool_calls(calls))
    # no loop in the workload: only the default 50-call budget warning may fire
    assert highest <= Action.WARN
    assert "loopguard" not in sys.modules  # loopguard-runtime stays out of this test


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_processor_in_process(shape: str, capsys: pytest.CaptureFixture[str]) -> None:
    in_process(2, block=40, floor=True, shape=shape, open_run=shape == "web")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "plain/batch", "plain/loopguard", "plain/batch-again", "plain/forward",
        "plain/open-table"]
    assert all(shape in line and "median" in line for line in lines)


def test_demo_one_second(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """How long a 1 s demo takes end to end (its bound left tests/test_demo.py: timing is the
    benchmarks' business)."""
    from otel_loopguard.cli import main

    argv = ["demo", "--duration", "1", "--metrics-port", "0", "--quiet", "--seed", "7"]
    assert benchmark(main, argv) == 0
    assert "final summary:" in capsys.readouterr().out


def test_serve_span_bytes(benchmark: Any) -> None:
    """What ``serve`` pays per span to count its bytes (``--max-pending-bytes``, forwarding)."""
    import json

    from otel_loopguard.receiver._size import span_bytes
    from otel_loopguard.types import SpanRecord

    record = SpanRecord("ab" * 16, "cd" * 8, "ef" * 8, "execute_tool search", 1, 2, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": json.dumps({"q": "x" * 50, "n": 3}),
        "gen_ai.tool.call.result": "r" * RESULT_BYTES, "retries": 3, "cached": True})
    assert benchmark(span_bytes, record) > RESULT_BYTES


def test_profile_serve_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """profile_serve.py's phases run on the engine as it is (its no-op engine is a subclass)."""
    import profile_serve

    assert profile_serve.main(["--runs", "1", "--traces", "4"]) == 0
    phases = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert phases == ["parse", "decode_protobuf", "decode_protobuf_py", "decode_json",
                      "decode_json_py", "intake", "engine"]


@pytest.mark.parametrize("path", ["serve", "check"])
def test_intake_instructions_child_runs(path: str) -> None:
    """What bench_intake_instructions.py has callgrind count runs both intakes (no valgrind)."""
    import bench_intake_instructions

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bench_intake_instructions.child(root, path, 3, "full", 1)


def test_profile_serve_whole_process_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """profile_serve.py --serve starts a serve with the no-op engine and feeds it over HTTP."""
    import profile_serve

    assert profile_serve.main(["--serve", "http", "--runs", "1", "--traces", "4"]) == 0
    out = capsys.readouterr().out
    assert "serve over http, no-op engine: 132 spans (64 tool spans)" in out
    assert "us/tool span" in out


def test_bench_check_parse_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """bench_check_parse.py writes both inputs and times check, the parse and the phases."""
    import bench_check_parse

    assert bench_check_parse.main(["--rounds", "1", "--scripted-mb", "0.2", "--coding-runs",
                                   "3", "--phases"]) == 0
    out = capsys.readouterr().out
    assert "scripted  parse" in out and "coding    parse" in out
    assert out.count("intake") == 2


def test_bench_check_instructions_phases_run(tmp_path: Any) -> None:
    """bench_check_instructions.py writes both inputs, and its counted child runs each phase on
    them (valgrind aside)."""
    import bench_check_instructions

    inputs = bench_check_instructions.write_inputs(str(tmp_path), 0.05, 2)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path, spans, _ in inputs.values():
        assert spans > 0
        for phase in bench_check_instructions.PHASES:
            bench_check_instructions.child(root, phase, path, 1)


def test_bench_run_instructions_child_runs() -> None:
    """What bench_run_instructions.py has callgrind count opens and resets runs."""
    import bench_run_instructions

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for operation in bench_run_instructions.OPERATIONS:
        bench_run_instructions.child(root, operation, 1)


def test_bench_wire_instructions_child_runs(tmp_path: Any) -> None:
    """bench_wire_instructions.py's counted child decodes along both paths (valgrind aside)."""
    import pickle

    import bench_serve
    import bench_wire_instructions

    path = tmp_path / "bodies.pkl"
    path.write_bytes(pickle.dumps(bench_serve.encode_batches(bench_serve.make_traces(2, seed=1))))
    bench_wire_instructions.child(str(path), "python", 1)
    try:
        bench_wire_instructions.child(str(path), "wire", 1)
    except ImportError:
        pytest.skip("the C decoder is not built in this tree")


@pytest.mark.parametrize("signature", ["result", "args"])
def test_bench_signature_instructions_child_runs(signature: str) -> None:
    """What bench_signature_instructions.py has callgrind count signs both kinds of result."""
    import bench_signature_instructions

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for workload in ("no_loop", "text"):
        bench_signature_instructions.child(root, workload, signature, 1)


def test_bench_check_floor_runs(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_check_floor.py finds the tool calls of check's scripted input and runs the engine
    on every one of them."""
    import bench_check
    import bench_check_floor

    path = str(tmp_path / "scripted.jsonl")
    counts = bench_check.generate(path, 0.05)
    assert bench_check_floor.main([path, "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{counts['tool_calls']:,} tool calls" in out
    assert ", results " in out  # the yardstick that reads the JSON results too
    with open(path, "rb") as handle:
        lines = [line for line in handle if line.strip()]
    assert sum(bench_check_floor._parse_results(json.loads(line)) for line in lines) \
        == counts["tool_calls"]  # every scripted result is a JSON object


def test_bench_shell_reader_runs() -> None:
    """bench_shell_reader.py reads the labelled commands with two trees (here the same one).

    In a child process: it imports each tree's package afresh, which would replace the modules
    this process's other tests use.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "benchmarks", "bench_shell_reader.py")
    done = subprocess.run([sys.executable, script, "--before", root, "--rounds", "1"],
                          capture_output=True, text=True, check=True, cwd=root)
    assert "353 command lines, median" in done.stdout and "after/before" in done.stdout


def test_bench_json_decode_runs(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_json_decode.py reads check's scripted input with the C decoder and without it, and
    the C decoder reads every span of it."""
    import bench_check
    import bench_json_decode

    if bench_json_decode.json_module._JSON_SPANS is None:
        pytest.skip("the C decoder of OTLP/JSON spans is not built here")
    path = str(tmp_path / "scripted.jsonl")
    counts = bench_check.generate(path, 0.05)
    assert bench_json_decode.main([path, "--rounds", "1"]) == 0
    assert f"{counts['spans']:,} spans (0 left to Python)" in capsys.readouterr().out


def test_bench_shell_reader_native_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """bench_shell_reader_native.py reads the labelled commands with the C reader and without
    it, and the C reader gives the Python outcome of each line it reads."""
    import bench_shell_reader_native

    from otel_loopguard.kinds import _shell

    if not _shell.ACCELERATED:
        pytest.skip("the C shell reader is not built here")
    assert bench_shell_reader_native.main(["--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "353 command lines, median" in out and "native/python" in out


def test_bench_failure_runs(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_failure.py collects the failures the engine reads on the coding corpus and times
    them in a child process of each tree."""
    import bench_failure

    out_path = tmp_path / "failure.json"
    assert bench_failure.main(["--limit", "40", "--rounds", "1", "--repeat", "1",
                               "--baseline", bench_failure._ROOT, "--json",
                               str(out_path)]) == 0
    result = json.loads(out_path.read_text())
    assert result["failures"] > 0
    assert result["median_us"]["this"] > 0 and result["median_us"]["baseline"] > 0
    assert "failures" in capsys.readouterr().out
