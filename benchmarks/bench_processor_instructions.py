"""The span processor's two bounds, counted in instructions by valgrind instead of timed.

Run (from the repository root)::

    python benchmarks/bench_processor_instructions.py [--shapes flat,web,plain,agent,chat]
        [--exporter null,otlp] [--end] [--turn] [--idle-off] [--baseline DIR]

CPU time on a shared 2-core machine moves by 20 % and more between runs, ten times the bound
on other spans (+2 %); the instructions a process executes do not. Two measurements:

* **other spans** (``--shapes``): spans no adapter turns into a tool call, made in blocks of
  about 500 under a ``TracerProvider`` with a ``BatchSpanProcessor`` and an exporter (``batch``),
  or with ``LoopGuardSpanProcessor`` in front of that processor (``loopguard``, its default
  background mode). Every block ends with ``force_flush``, so each block's export (one batch:
  the processor's timer is set beyond the run) is counted with it, whichever thread runs it.
  Each configuration runs under ``valgrind --tool=callgrind`` with 2 and with 8 blocks (after
  one warm-up block); the difference divided by the extra spans is the cost per span, start-up
  excluded, every thread included. Shapes: ``flat``, root spans of their own traces (health
  checks); ``web``, a request root with 4 children (a database query, an outgoing request, two
  internal steps); ``plain``, bench_processor's agent trace: an ``invoke_agent a`` root with 20
  children carrying two HTTP attributes; ``agent``, an agent framework's own spans under an
  ``invoke_agent`` span with GenAI attributes (chain and retriever steps without markers);
  ``chat``, an ``invoke_agent`` span and 20 ``chat`` spans (model calls: loopguard reads those,
  they count model turns). Exporters: ``null`` (does nothing; the harshest ratio) and ``otlp``
  (the OTLP/HTTP exporter, sending to bench_serve.py's sink on 127.0.0.1, which answers and
  discards: what an application's export thread does; the sink's work is not counted).

* **the check of a model span** (``--turn``): the instructions of the processor's check of an
  ended ``chat`` span (``_ended``, what the worker runs per span) in one thread, without the
  SDK, the export or the worker: the ``chat`` shape's 20 spans of one open agent span handed
  to it 2,000 times (after 2,000 uncounted), with and without the idle-turns detector.
  ``--turn-reasons`` adds ``gen_ai.response.finish_reasons`` to those spans (``stop``,
  ``tool_calls``; ``none`` leaves them as the shape has them): what an instrumentation with
  content capture off records on every model call.

* **span.end() of a tool span** (``--end``): the instructions the agent's thread executes
  inside ``span.end()`` of an ``execute_tool`` span (arguments and a ~1 KB result), counted
  with ``--collect-atstart=no`` and a callgrind toggle just before and just after the call, in
  the main thread's own count (``--separate-threads=yes``), so the worker's and the exporter's
  threads are left out. Each tool waits 2 ms first (I/O; the worker catches up meanwhile, as it
  does between the tool calls of a real agent). The same windows around nothing (``empty``)
  give the toggles' own cost, subtracted; a 300-span run minus a 100-span run
  (``--end-spans``). The toggle is a three-line C function built with ``cc`` from valgrind's
  ``callgrind.h``.

What loopguard adds does not depend on the exporter: the first runs read 8.1k to 9.5k
instructions per span with the null exporter and 5.0k to 6.9k with the OTLP one because the
cyclic garbage collector's full collections, which traverse every object start-up left (the
loopguard configuration imports 10k more), fell among the extra blocks in some configurations
and not in others (one is ~10M instructions, ~3k per span). Each child now collects and
freezes the heap after its warm-up block (``_level_gc``), so both runs of a configuration, and
every configuration, start their counted blocks from the same collector state.

With ``--baseline DIR`` (another checkout) the same is counted for its code, each tree's
``loopguard`` against its own ``batch`` counted beside it (two valgrind jobs run at a time, and
a job run alone counts other waits). Needs valgrind and
a C compiler; about 1 minute per count (two counts per configuration).
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
BLOCKS = [8, 2]
"""The two run sizes (blocks of about 500 spans) counted for other spans."""
END_SPANS = [300, 100]
"""The two run sizes (tool spans) counted for ``span.end()``."""
TURN_CALLS = 2000
TURN_REASONS: dict[str, tuple[str, ...] | None] = {
    "none": None, "stop": ("stop",), "tool_calls": ("tool_calls",)}
"""``--turn-reasons``: the finish reasons the ``--turn`` spans carry (none: the shape's)."""
"""The chat spans ``--turn`` hands to the processor's check (after as many uncounted)."""
WAIT_SECONDS = 0.002
"""The I/O each tool of the ``--end`` run waits for before its span ends."""
_TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"

SHAPES: dict[str, tuple[tuple[str, dict[str, Any]], list[tuple[str, dict[str, Any]]], int]] = {
    "flat": (("GET /health", {"http.request.method": "GET", "url.path": "/health",
                              "http.route": "/health", "http.response.status_code": 200}),
             [], 500),
    "web": (("GET /orders/{id}", {"http.request.method": "GET", "url.path": "/orders/7",
                                  "http.route": "/orders/{id}",
                                  "http.response.status_code": 200}),
            [("SELECT orders", {"db.system": "postgresql", "db.operation": "SELECT",
                                "db.statement": "SELECT * FROM orders WHERE id = $1"}),
             ("GET", {"http.request.method": "GET", "server.address": "inventory.internal",
                      "url.full": "http://inventory.internal/stock/7"}),
             ("render", {"template": "order.html"}), ("serialize", {})], 100),
    "plain": (("invoke_agent a", {}),
              [("execute_tool search_kb", {"http.method": "GET", "http.route": "/x"})] * 20, 24),
    "agent": (("invoke_agent support", {"gen_ai.operation.name": "invoke_agent",
                                        "gen_ai.agent.name": "support"}),
              [("RunnableSequence", {"langchain.step": "plan"}),
               ("VectorStoreRetriever", {"retriever.k": 4, "db.system": "qdrant"}),
               ("PromptTemplate", {"langchain.step": "prompt"}),
               ("RunnableLambda", {})] * 5, 24),
    "chat": (("invoke_agent support", {"gen_ai.operation.name": "invoke_agent",
                                       "gen_ai.agent.name": "support"}),
             [("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
                               "gen_ai.request.model": "gpt-4o",
                               "gen_ai.response.model": "gpt-4o-2024-08-06",
                               "gen_ai.usage.input_tokens": 1200,
                               "gen_ai.usage.output_tokens": 80})] * 20, 24),
}
"""Per shape: the root span's name and attributes, its children, and traces per block."""


def _provider(tree: str, config: str, endpoint: str | None) -> Any:
    """Return an SDK provider: ``batch`` (a BatchSpanProcessor) or loopguard before it."""
    sys.path.insert(0, tree)
    from bench_processor import exporter_to
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # the timer never fires within a run: every export is a block's force_flush
    batch = BatchSpanProcessor(exporter_to(endpoint), max_queue_size=1 << 16,
                               max_export_batch_size=1024,
                               schedule_delay_millis=3_600_000)
    provider = TracerProvider()
    if config == "batch":
        provider.add_span_processor(batch)
        return provider
    from prometheus_client import CollectorRegistry

    from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

    # ``loopguard-noidle``: without the idle-turns detector (what a model turn costs without it)
    config_ = LoopGuardConfig.create(idle_turns_warn=None) if config == "loopguard-noidle" \
        else LoopGuardConfig()
    provider.add_span_processor(LoopGuardSpanProcessor(config_, downstream=batch,
                                                       registry=CollectorRegistry()))
    return provider


def other_child(tree: str, config: str, shape: str, blocks: int, endpoint: str | None) -> None:
    """Make ``blocks`` blocks of ``shape`` (after a warm-up block), each flushed.

    After the warm-up the heap is collected and frozen (``_level_gc``), so the cyclic
    collector runs on the same schedule in every configuration and traverses only what the
    blocks make.
    """
    provider = _provider(tree, config, endpoint)
    tracer = provider.get_tracer("bench")
    (root, root_attrs), children, traces = SHAPES[shape]
    for block in range(1 + blocks):
        if block == 1:
            _level_gc()
        for _ in range(traces):
            with tracer.start_as_current_span(root, attributes=root_attrs):
                for name, attrs in children:
                    with tracer.start_as_current_span(name, attributes=attrs):
                        pass
        provider.force_flush()
    provider.shutdown()


def _level_gc() -> None:
    """Collect everything, then freeze it: the counted blocks start from the same collector state.

    Without it the difference of two runs counts whole collections of the heap that start-up
    left: a full collection traverses every object imported (loopguard's modules add 10k
    objects to the 19k of the SDK alone), and whether one falls among the extra blocks depends
    on where the generation counters stood when they began, which differs by configuration and
    exporter. One such collection, ~10M instructions, is ~3k per span over 3,000 spans: the
    null exporter's runs read +8k to +9k where the OTLP ones read +5k to +7k.
    """
    gc.collect()
    gc.freeze()


def end_child(tree: str, config: str, spans: int, toggle_path: str) -> None:
    """End ``spans`` tool spans, the callgrind toggle around each ``span.end()``."""
    import ctypes

    from bench_processor import tool_calls

    toggle = ctypes.CDLL(toggle_path).toggle
    provider = _provider(tree, "batch" if config == "empty" else config, None)
    tracer = provider.get_tracer("bench")
    attrs, results = tool_calls()
    per_trace = 20
    for size, counted in ((100, False), (spans, True)):  # a warm-up run, then the counted one
        for t in range(size // per_trace):
            with tracer.start_as_current_span("invoke_agent a", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
                for i in range(per_trace):
                    n = (t * per_trace + i) % 64
                    span = tracer.start_span("execute_tool search_kb", attributes=attrs[n])
                    span.set_attribute("gen_ai.tool.call.result", results[n])
                    time.sleep(WAIT_SECONDS)  # the tool waits on I/O: the worker catches up
                    if not counted:
                        span.end()
                    elif config == "empty":  # the toggles' own cost
                        toggle()
                        toggle()
                        span.end()
                    else:
                        toggle()
                        span.end()
                        toggle()
        provider.force_flush()
    provider.shutdown()


def turn_child(tree: str, config: str, calls: int, toggle_path: str,
               reasons: str = "none") -> None:
    """Check ``calls`` ended ``chat`` spans of one open agent span, the toggle around them.

    The processor's own work on a model turn, without threads, SDK or export: the spans are
    made once (the ``chat`` shape's 20) and handed to the processor's check again and again,
    as one run's turns (the run exists after the warm-up pass); ``reasons``, a key of
    ``TURN_REASONS``: their finish reasons.
    """
    import ctypes

    sys.path.insert(0, tree)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from prometheus_client import CollectorRegistry

    from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

    toggle = ctypes.CDLL(toggle_path).toggle
    settings = LoopGuardConfig.create(idle_turns_warn=None) if config == "loopguard-noidle" \
        else LoopGuardConfig()
    processor = LoopGuardSpanProcessor(settings, downstream=SpanProcessor(),
                                       registry=CollectorRegistry(), background=False)
    tracer = TracerProvider().get_tracer("bench")  # spans handed to the processor by hand
    (root_name, root_attrs), children, _ = SHAPES["chat"]
    root = tracer.start_span(root_name, attributes=root_attrs)
    processor.on_start(root)
    parent = trace.set_span_in_context(root)
    spans = []
    finish = TURN_REASONS[reasons]
    for name, attrs in children:
        given = attrs if finish is None else {**attrs, "gen_ai.response.finish_reasons": finish}
        span = tracer.start_span(name, context=parent, attributes=given)
        span.end()
        spans.append(span)
    check = processor._ended
    for counted in (False, True):
        if counted:
            toggle()
        for i in range(calls):
            check(spans[i % len(spans)])
        if counted:
            toggle()


def _valgrind(argv: list[str], *, threads: bool = False) -> int:
    """Return the instructions of ``python argv...`` under callgrind (hash seed 0).

    ``threads``: count only while toggled on, and return the main thread's count alone.
    """
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory() as out:
        options = ["--separate-threads=yes", "--collect-atstart=no"] if threads else []
        done = subprocess.run(["valgrind", "--tool=callgrind", *options,
                               f"--callgrind-out-file={out}/cg.out", sys.executable, __file__,
                               *argv], capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"valgrind run failed: {done.stderr[-2000:]}")
        if not threads:
            found = re.search(r"Collected : (\d+)", done.stderr)
            if found is None:
                raise SystemExit(f"no instruction count in valgrind's output: "
                                 f"{done.stderr[-500:]}")
            return int(found.group(1))
        main_thread = sorted(glob.glob(f"{out}/cg.out*-01"))
        if not main_thread:
            raise SystemExit(f"no main-thread profile in {os.listdir(out)}")
        with open(main_thread[0]) as profile:
            totals = re.search(r"^(?:totals|summary): (\d+)", profile.read(), re.M)
        if totals is None:
            raise SystemExit("no totals line in the main thread's profile")
        return int(totals.group(1))


def _per_span_other(job: tuple[str, str, str, str, str | None]) -> float:
    tree, config, shape, _, endpoint = job
    counts = [_valgrind(["--other", tree, config, shape, str(blocks), endpoint or "-"])
              for blocks in BLOCKS]
    _, children, traces = SHAPES[shape]
    spans = (BLOCKS[0] - BLOCKS[1]) * traces * (len(children) + 1)
    return (counts[0] - counts[1]) / spans


def _per_span_end(job: tuple[str, str, str]) -> float:
    tree, config, toggle_path = job
    counts = [_valgrind(["--end-child", tree, config, str(spans), toggle_path], threads=True)
              for spans in END_SPANS]
    return (counts[0] - counts[1]) / (END_SPANS[0] - END_SPANS[1])


def _per_turn(job: tuple[str, str, str, str]) -> float:
    tree, config, toggle_path, reasons = job
    return _valgrind(["--turn-child", tree, config, str(TURN_CALLS), toggle_path, reasons],
                     threads=True) / TURN_CALLS


def _build_toggle(directory: str) -> str:
    """Compile the callgrind toggle into ``directory``; return the library's path."""
    source, library = os.path.join(directory, "toggle.c"), os.path.join(directory, "toggle.so")
    with open(source, "w") as out:
        out.write(_TOGGLE_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def _sink() -> tuple[subprocess.Popen[str], str]:
    """Start bench_serve's OTLP sink (answers and discards); return it and its traces URL."""
    sink = subprocess.Popen([sys.executable, os.path.join(_HERE, "bench_serve.py"), "--sink"],
                            stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    return sink, f"http://127.0.0.1:{int(sink.stdout.readline().split()[0])}/v1/traces"


def _child(args: argparse.Namespace) -> bool:
    """Run the child process ``args`` asks for, if any; return whether it was one."""
    if args.other:
        tree, config, shape, blocks, endpoint = args.other
        other_child(tree, config, shape, int(blocks), None if endpoint == "-" else endpoint)
    elif args.turn_child:
        tree, config, calls, toggle_path, reasons = args.turn_child
        turn_child(tree, config, int(calls), toggle_path, reasons)
    elif args.end_child:
        tree, config, spans, toggle_path = args.end_child
        end_child(tree, config, int(spans), toggle_path)
    else:
        return False
    return True


def main() -> None:
    """Count every configuration (two valgrind processes at a time); print a JSON line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="flat,web,plain,agent,chat",
                        help="other spans' shapes; empty for none")
    parser.add_argument("--exporter", default="null,otlp", help="null, otlp or both")
    parser.add_argument("--end", action="store_true", help="also count span.end() of tool spans")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to count too")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to this file")
    parser.add_argument("--idle-off", action="store_true",
                        help="loopguard without the idle-turns detector (idle_turns_warn unset)")
    parser.add_argument("--blocks", default=",".join(map(str, BLOCKS)),
                        help="the two run sizes of other spans, in blocks of about 500 spans")
    parser.add_argument("--end-spans", default=",".join(map(str, END_SPANS)),
                        help="the two run sizes of --end, in tool spans (multiples of 20)")
    parser.add_argument("--turn", action="store_true",
                        help="also count the processor's check of one chat span, one thread")
    parser.add_argument("--turn-reasons", default="none",
                        help="--turn spans' finish reasons: none, stop, tool_calls (a list)")
    parser.add_argument("--other", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--turn-child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--end-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if _child(args):
        return
    BLOCKS[:] = [int(n) for n in args.blocks.split(",")]
    END_SPANS[:] = [int(n) for n in args.end_spans.split(",")]
    trees = {"after": os.path.dirname(_HERE)}
    if args.baseline:
        trees["before"] = os.path.abspath(args.baseline)
    shapes = [shape for shape in args.shapes.split(",") if shape]
    exporters = [exporter for exporter in args.exporter.split(",") if exporter]
    ours = "loopguard-noidle" if args.idle_off else "loopguard"
    sink = _sink() if "otlp" in exporters and shapes else None
    rows: list[dict[str, Any]] = []
    try:
        with ThreadPoolExecutor(2) as pool, tempfile.TemporaryDirectory() as scratch:
            # ``batch`` runs no loopguard code, but is counted in each tree, beside that tree's
            # loopguard: the pool runs two jobs at a time, and a job run alone (``before``'s
            # loopguard against ``after``'s batch) read up to 1.6k fewer instructions per span
            # than the same code beside another (its export threads wait differently)
            other_jobs = [(tree, config, shape, exporter,
                           sink[1] if exporter == "otlp" and sink else None)
                          for exporter in exporters for shape in shapes
                          for tree in trees.values() for config in ("batch", ours)]
            toggle = _build_toggle(scratch) if args.end or args.turn else ""
            turn_jobs = [(tree, config, toggle, reasons) for tree in trees.values()
                         for config in ("loopguard", "loopguard-noidle")
                         for reasons in args.turn_reasons.split(",")] if args.turn else []
            end_jobs = [(tree, config, toggle) for tree in trees.values()
                        for config in ("empty", "batch", "loopguard")] if args.end else []
            other = dict(zip(other_jobs, pool.map(_per_span_other, other_jobs), strict=True))
            ends = dict(zip(end_jobs, pool.map(_per_span_end, end_jobs), strict=True))
            turns = dict(zip(turn_jobs, pool.map(_per_turn, turn_jobs), strict=True))
    finally:
        if sink is not None:
            sink[0].terminate()
            sink[0].wait()
    for exporter in exporters:
        for shape in shapes:
            for name, tree in trees.items():
                base = other[(tree, "batch", shape, exporter,
                              sink[1] if exporter == "otlp" and sink else None)]
                added = other[(tree, ours, shape, exporter, sink[1] if exporter == "otlp"
                               and sink else None)]
                rows.append({"measure": "other_spans", "tree": name, "shape": shape,
                             "exporter": exporter, "idle_turns": not args.idle_off,
                             "batch_per_span": round(base),
                             "loopguard_per_span": round(added), "added": round(added - base),
                             "added_percent": round((added / base - 1) * 100, 2)})
                print(json.dumps(rows[-1]), flush=True)
    for name, tree in trees.items():
        if not args.end:
            break
        empty = ends[(tree, "empty", toggle)]
        base, watched = (ends[(tree, config, toggle)] - empty for config in ("batch", "loopguard"))
        rows.append({"measure": "span_end", "tree": name, "toggles": round(empty),
                     "batch_per_end": round(base), "loopguard_per_end": round(watched),
                     "added": round(watched - base),
                     "added_percent": round((watched / base - 1) * 100, 2)})
        print(json.dumps(rows[-1]), flush=True)
    for (tree, config, _, reasons), per_turn in turns.items():
        rows.append({"measure": "model_turn", "tree": next(n for n, t in trees.items()
                                                           if t == tree),
                     "idle_turns": config == "loopguard", "finish_reasons": reasons,
                     "per_chat_span": round(per_turn)})
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
                       "blocks": BLOCKS, "end_spans": END_SPANS, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
