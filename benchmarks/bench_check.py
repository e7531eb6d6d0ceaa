"""``otel-loopguard check`` throughput (spans per second) and peak memory on a ~100 MB JSONL file.

Usage (from the repository root)::

    python benchmarks/bench_check.py [--size-mb 100] [--repeat 3]
        [--python PYTHON] [--keep DIR] [--json FILE]

The input is OTLP/JSON JSON Lines as the Collector's file exporter writes them, one
``ExportTraceServiceRequest`` per line and one trace per request. Its shape comes from one real
trace: a ``TracerProvider`` (``otel_loopguard.testing.LoopGuardHarness``) emits an
``invoke_agent`` root, ``chat`` model spans and ``execute_tool`` spans, which the OTLP exporter's
own encoder turns into JSON (as ``examples/make_traces.py`` does). That document is the template;
every generated trace copies it with new trace/span ids, shifted times, and its own tool calls
(4-key arguments, ~1 KB results from ``_workload.py``). One trace in ten loops (the same call
five times), so ``check`` has findings to report. Generation is templating, not the SDK per
span, so the file takes seconds to write.

``check --format json FILE > /dev/null`` then runs ``--repeat`` times in a fresh subprocess under
``/usr/bin/time -v`` (peak RSS from its "Maximum resident set size"; without it, from
``resource.getrusage(RUSAGE_CHILDREN)``, the largest child so far). Reported: medians of wall
time, spans/s, tool calls/s, MB/s and peak RSS, plus the start-up cost of ``check`` on a
one-trace file, which is included in the wall time.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(_ROOT)  # after PYTHONPATH: a snapshot given there wins

from _workload import Call, no_loop_run  # noqa: E402

TURNS_PER_TRACE = 10
"""Model turns per trace; each turn is one ``chat`` span and one or two tool calls."""
_POOL_SIZE = 4_000


def code_version() -> str:
    """Return the commit measured, marked ``+dirty`` when otel_loopguard/ has local changes."""
    root = os.path.dirname(_HERE)
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "otel_loopguard"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


# ---------------------------------------------------------------------------------------------
# Template: one real SDK-encoded trace


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId")
                    else _hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def sdk_template(calls: list[Call]) -> dict[str, Any]:
    """Return one real trace (OTLP/JSON request) with a tool span per call, from the SDK."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.testing import LoopGuardHarness

    harness = LoopGuardHarness()
    with harness.run("support-agent", prompt="support_triage", conversation="conv-template",
                     attributes={"gen_ai.prompt.version": "v3",
                                 "gen_ai.request.model": "gpt-4o-mini"}) as agent:
        i = 0
        for turn in range(TURNS_PER_TRACE):
            agent.turn()
            if turn % 4 == 3 and i + 1 < len(calls):  # a parallel batch of two now and then
                agent.batch([(c.tool, c.arguments, c.result) for c in calls[i:i + 2]])
                i += 2
            else:
                agent.tool(calls[i].tool, calls[i].arguments, calls[i].result)
                i += 1
    spans = harness.exporter.get_finished_spans()
    doc: dict[str, Any] = _hex_ids(MessageToDict(encode_spans(spans)))
    harness.shutdown()
    return doc


class TraceTemplate:
    """Stamps new traces out of the SDK template: ids, times and tool calls replaced."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        scope_spans = doc["resourceSpans"][0]["scopeSpans"][0]
        self.spans: list[dict[str, Any]] = scope_spans["spans"]
        self.tool_slots = [i for i, s in enumerate(self.spans) if s["name"].startswith(
            "execute_tool")]
        self.old_ids = [s["spanId"] for s in self.spans]

    @property
    def spans_per_trace(self) -> int:
        return len(self.spans)

    @property
    def tools_per_trace(self) -> int:
        return len(self.tool_slots)

    def render(self, index: int, calls: list[Call], rng: random.Random) -> str:
        """Return one JSON line: trace ``index`` with ``calls`` in its tool spans."""
        trace_id = f"{rng.getrandbits(128):032x}"
        id_map = {old: f"{rng.getrandbits(64):016x}" for old in self.old_ids}
        shift = index * 30_000_000_000  # 30 s apart
        tool_of = dict(zip(self.tool_slots, calls, strict=True))
        new_spans = []
        for pos, span in enumerate(self.spans):
            out = dict(span)
            out["traceId"] = trace_id
            out["spanId"] = id_map[span["spanId"]]
            if "parentSpanId" in span:
                out["parentSpanId"] = id_map.get(span["parentSpanId"], span["parentSpanId"])
            out["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + shift)
            out["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) + shift)
            call = tool_of.get(pos)
            if call is not None:
                out["name"] = f"execute_tool {call.tool}"
                out["attributes"] = [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": call.tool}},
                    {"key": "gen_ai.tool.call.arguments",
                     "value": {"stringValue": json.dumps(call.arguments)}},
                    {"key": "gen_ai.tool.call.result", "value": {"stringValue": call.result}},
                ]
            new_spans.append(out)
        resource_spans = dict(self.doc["resourceSpans"][0])
        scope = dict(resource_spans["scopeSpans"][0])
        scope["spans"] = new_spans
        resource_spans["scopeSpans"] = [scope]
        return json.dumps({"resourceSpans": [resource_spans]}, separators=(",", ":"))


def generate(path: str, size_mb: float, *, seed: int = 7) -> dict[str, Any]:
    """Write ~``size_mb`` MB of traces to ``path``; return counts."""
    rng = random.Random(seed)
    pool = no_loop_run(_POOL_SIZE, seed=seed)
    template = TraceTemplate(sdk_template(pool))
    per = template.tools_per_trace
    target = int(size_mb * 1_000_000)
    written = traces = spans = tools = looping = 0
    started = time.perf_counter()
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            first = rng.randrange(_POOL_SIZE - per)
            calls = pool[first:first + per]
            if traces % 10 == 9:  # a looping agent: the same call five times in a row
                calls = calls[:per - 5] + [calls[per - 5]] * 5
                looping += 1
            line = template.render(traces, calls, rng) + "\n"
            out.write(line)
            written += len(line)
            traces += 1
            spans += template.spans_per_trace
            tools += per
    return {"bytes": written, "traces": traces, "spans": spans, "tool_calls": tools,
            "looping_traces": looping, "spans_per_trace": template.spans_per_trace,
            "generate_seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------------------------
# Running check


_RSS_RE = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def run_check(python: str, path: str) -> dict[str, Any]:
    """Run ``check --format json path > /dev/null`` once; return wall seconds and peak RSS."""
    cmd = [python, "-m", "otel_loopguard", "check", "--format", "json", path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [os.environ.get("PYTHONPATH"), _ROOT]))}
    timer = shutil.which("time", path="/usr/bin:/bin")
    if timer:
        cmd = [timer, "-v", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "w") as devnull:
        start = time.perf_counter()
        proc = subprocess.run(cmd, check=False, stdout=devnull, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=os.path.dirname(os.path.abspath(path)))
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):  # 1: a run reached --fail-on (there are loops)
        raise RuntimeError(f"check failed ({proc.returncode}): {proc.stderr[-2000:]}")
    match = _RSS_RE.search(proc.stderr) if timer else None
    if match:
        rss_mb = int(match.group(1)) / 1024
        source = "/usr/bin/time -v"
    else:
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        source = "getrusage(RUSAGE_CHILDREN) (largest child so far)"
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_mb, "rss_source": source,
            "exit_code": proc.returncode, "loadavg": os.getloadavg()[0]}


def check_source(python: str, cwd: str) -> str:
    """Return the otel_loopguard directory that ``check`` imports with this interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [os.environ.get("PYTHONPATH"), _ROOT]))}
    code = "import os, otel_loopguard; print(os.path.dirname(otel_loopguard.__file__))"
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True,
                          env=env, cwd=cwd).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs check (default: this one)")
    parser.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    workdir = args.keep or tempfile.mkdtemp(prefix="loopguard-bench-")
    os.makedirs(workdir, exist_ok=True)
    try:
        big = os.path.join(workdir, "traces.jsonl")
        info = generate(big, args.size_mb)
        print(f"generated {info['bytes'] / 1e6:.1f} MB: {info['traces']:,} traces, "
              f"{info['spans']:,} spans, {info['tool_calls']:,} tool calls in "
              f"{info['generate_seconds']:.1f} s", file=sys.stderr)
        small = os.path.join(workdir, "one_trace.jsonl")
        with open(big, encoding="utf-8") as src, open(small, "w", encoding="utf-8") as dst:
            dst.write(src.readline())
        source = check_source(args.python, workdir)
        startup = [run_check(args.python, small)["wall_s"] for _ in range(5)]
        runs = []
        for i in range(args.repeat):
            result = run_check(args.python, big)
            runs.append(result)
            print(f"  run {i + 1}: {result['wall_s']:.2f} s wall, {result['cpu_s']:.2f} s cpu, "
                  f"load {result['loadavg']:.2f}, peak RSS "
                  f"{result['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    rss = statistics.median(r["peak_rss_mb"] for r in runs)
    summary = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "check_python": args.python, "code": code_version(), "source": source},
        "input": info, "runs": runs, "startup_s": statistics.median(startup),
        "median_wall_s": wall, "median_cpu_s": cpu, "spans_per_s": info["spans"] / wall,
        "spans_per_cpu_s": info["spans"] / cpu,
        "tool_calls_per_s": info["tool_calls"] / wall, "mb_per_s": info["bytes"] / 1e6 / wall,
        "median_peak_rss_mb": rss, "exit_code": runs[-1]["exit_code"],
    }
    print(f"\ncheck --format json on {info['bytes'] / 1e6:.1f} MB ({info['spans']:,} spans, "
          f"{info['tool_calls']:,} tool calls, {info['traces']:,} traces), median of "
          f"{args.repeat} (otel_loopguard from {source}; repo at {summary['machine']['code']}):")
    print(f"  wall {wall:.2f} s, cpu {cpu:.2f} s (start-up on a one-trace file: "
          f"{summary['startup_s']:.2f} s wall)")
    print(f"  {summary['spans_per_s']:,.0f} spans/s, {summary['tool_calls_per_s']:,.0f} tool "
          f"calls/s, {summary['mb_per_s']:.1f} MB/s; {summary['spans_per_cpu_s']:,.0f} spans "
          "per cpu-second")
    print(f"  peak RSS {rss:.0f} MB ({runs[-1]['rss_source']}); exit code "
          f"{summary['exit_code']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
