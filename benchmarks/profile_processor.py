"""The span processor's own cost per span, with the detection engine taken out.

Run: python benchmarks/profile_processor.py [--spans 20000] [--repeat 7] [--flag-every 0]
     python benchmarks/profile_processor.py --profile tool [--stub]   # cProfile, top 30

Same workload as ``bench_processor.py`` (an ``invoke_agent`` root with 20 children, *plain* or
*tool* spans, a ``BatchSpanProcessor`` with a null exporter downstream). Configurations:

* ``batch``: the ``BatchSpanProcessor`` alone;
* ``loopguard``: ``LoopGuardSpanProcessor(downstream=batch)`` with the real engine;
* ``stub``: the same processor whose ``engine.process`` is replaced (in this benchmark only) by
  a function returning a fixed clean ``Decision``, or a flagged one every ``--flag-every``
  calls, so ``stub - batch`` is the processor's cost outside the engine.

Each configuration runs in a fresh process, interleaved, ``--repeat`` times; medians of the
process CPU time per span are printed (the batch exporter thread's time included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from bench_processor import ARGS, RESULT
from bench_processor import _provider as bench_provider


def _provider(config: str, flag_every: int) -> Any:
    """``bench_processor``'s provider; ``stub`` is loopguard with the engine stubbed."""
    if config == "stub":
        return bench_provider("loopguard", adjust=lambda proc: _stub_engine(proc, flag_every))
    return bench_provider(config)


def _stub_engine(processor: Any, flag_every: int) -> None:
    """Replace ``processor.engine.process`` by a function returning fixed decisions."""
    from otel_loopguard.types import Action, Decision, Evidence

    clean = Decision(Action.CONTINUE)
    flagged = Decision(Action.WARN, code="LOOP_EXACT_REPEAT", hint="stop repeating",
                       call_index=3, tool="t", evidence=(Evidence(
                           "exact_repeat", "LOOP_EXACT_REPEAT", Action.WARN, "t", 3,
                           {"repeats_span_ids": ["00000000000000aa"], "call": "abc"}),))
    count = [0]

    def process(run: Any, call: Any) -> Decision:
        count[0] += 1
        return flagged if flag_every and count[0] % flag_every == 0 else clean

    processor.engine.process = process  # type: ignore[method-assign]


def _emit(tracer: Any, kind: str, spans: int) -> None:
    if kind == "plain":
        attrs: list[dict[str, Any]] = [{"http.method": "GET", "http.route": "/x"}] * 64
    else:
        attrs = [{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i % 4}",
                  "gen_ai.tool.call.arguments": ARGS.replace("refund", f"refund {i}")}
                 for i in range(64)]
    results = [RESULT.replace('"total": 6', f'"total": {i}') for i in range(64)]
    per_trace = 20
    for t in range(spans // per_trace):
        with tracer.start_as_current_span("invoke_agent a"):
            for i in range(per_trace):
                n = (t * per_trace + i) % 64
                with tracer.start_as_current_span("execute_tool search_kb",
                                                  attributes=attrs[n]) as span:
                    if kind == "tool":
                        span.set_attribute("gen_ai.tool.call.result", results[n])


def child(config: str, kind: str, spans: int, flag_every: int) -> None:
    """Emit spans in this process and print CPU microseconds per span."""
    provider = _provider(config, flag_every)
    tracer = provider.get_tracer("bench")
    _emit(tracer, kind, spans)  # warm-up
    started = time.process_time()
    _emit(tracer, kind, spans)
    elapsed = time.process_time() - started
    provider.shutdown()
    print(json.dumps({"us_per_span": elapsed / spans * 1e6}))


def _timed(inner: Any) -> Any:
    """Return a span processor wrapping ``inner`` that records how long each hook takes."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Timed(SpanProcessor):
        def __init__(self) -> None:
            self.inner = inner
            self.starts: list[int] = []
            self.ends: list[int] = []
            self.root_ends: list[int] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            t0 = time.perf_counter_ns()
            self.inner.on_start(span, parent_context)
            self.starts.append(time.perf_counter_ns() - t0)

        def on_end(self, span: Any) -> None:
            t0 = time.perf_counter_ns()
            self.inner.on_end(span)
            took = time.perf_counter_ns() - t0
            (self.ends if span.parent is not None else self.root_ends).append(took)

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

    return Timed()


def hooks_child(config: str, kind: str, spans: int, flag_every: int) -> None:
    """Time the processor's hooks alone (downstream: a no-op processor); print medians in ns.

    ``null`` wraps a no-op processor: the timer's own cost, to subtract.
    """
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    provider = TracerProvider()
    null = SpanProcessor()
    if config == "null":
        timed = _timed(null)
    else:
        from prometheus_client import CollectorRegistry

        from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

        processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=null,
                                           registry=CollectorRegistry())
        if config == "stub":
            _stub_engine(processor, flag_every)
        timed = _timed(processor)
    provider.add_span_processor(timed)
    tracer = provider.get_tracer("bench")
    _emit(tracer, kind, spans)  # warm-up
    timed.starts.clear()
    timed.ends.clear()
    timed.root_ends.clear()
    _emit(tracer, kind, spans)
    med = statistics.median
    print(json.dumps({"start": med(timed.starts), "end": med(timed.ends),
                      "root_end": med(timed.root_ends),
                      "mean_total": (sum(timed.starts) + sum(timed.ends)
                                     + sum(timed.root_ends)) / len(timed.ends)}))


def profile(kind: str, spans: int, stub: bool, flag_every: int) -> None:
    """Print the top of a cProfile of the processor on ``kind`` spans."""
    import cProfile
    import pstats

    provider = _provider("stub" if stub else "loopguard", flag_every)
    tracer = provider.get_tracer("bench")
    _emit(tracer, kind, spans)
    prof = cProfile.Profile()
    prof.enable()
    _emit(tracer, kind, spans)
    prof.disable()
    provider.shutdown()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def _children(args: Any, flag: str, kinds: list[str],
              configs: list[tuple[str, str]]) -> Iterator[tuple[str, dict[str, float]]]:
    """Run ``flag`` children for each repeat, kind and (label, PYTHONPATH), interleaved.

    Yields ``("kind/label", the child's last JSON line)``.
    """
    for _ in range(args.repeat):
        for kind in kinds:
            for label, tree in configs:
                env = dict(os.environ)
                if tree:
                    env["PYTHONPATH"] = tree
                out = subprocess.run(
                    [sys.executable, __file__, flag, label.split("@")[0], kind,
                     "--spans", str(args.spans), "--flag-every", str(args.flag_every)],
                    capture_output=True, text=True, check=True, env=env).stdout
                yield f"{kind}/{label}", json.loads(out.strip().splitlines()[-1])


def hooks_main(args: Any) -> None:
    """Run ``hooks_child`` for null and each processor config, interleaved; print medians."""
    kinds = args.kinds.split(",")
    trees = args.trees.split(",") if args.trees else [""]
    configs = [("null", "")]
    for config in args.configs.split(","):
        if config not in ("batch", "null"):
            configs.extend((f"{config}@{tree}" if tree else config, tree) for tree in trees)
    results: dict[str, list[dict[str, float]]] = {}
    for key, got in _children(args, "--hooks-child", kinds, configs):
        results.setdefault(key, []).append(got)
    print("median over runs of: per-hook median ns (child span on_start, on_end, root on_end),"
          " and mean hook ns per child span; timer cost (null) subtracted in 'net'")
    med = statistics.median
    for kind in kinds:
        null = {f: med(r[f] for r in results[f"{kind}/null"])
                for f in ("start", "end", "root_end", "mean_total")}
        for label, _tree in configs:
            runs = results[f"{kind}/{label}"]
            m = {f: med(r[f] for r in runs) for f in null}
            net = m["start"] + m["end"] - null["start"] - null["end"]
            mean = m["mean_total"] - null["mean_total"]
            print(f"{kind}/{label:28} start {m['start']:7.0f}  end {m['end']:7.0f}  "
                  f"root_end {m['root_end']:7.0f}  mean/span {m['mean_total']:7.0f}  "
                  f"net start+end {net:7.0f} ns  net mean {mean:7.0f} ns")


def main() -> None:
    """Run the configurations in fresh processes, interleaved, and print medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--flag-every", type=int, default=0)
    parser.add_argument("--configs", default="batch,stub,loopguard")
    parser.add_argument("--kinds", default="plain,tool")
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--hooks", action="store_true",
                        help="time the processor's hooks alone (see hooks_child)")
    parser.add_argument("--hooks-child", nargs=2)
    parser.add_argument("--profile")
    parser.add_argument("--stub", action="store_true")
    parser.add_argument("--trees", default="",
                        help="comma-separated PYTHONPATHs to compare (e.g. a snapshot of "
                             "another commit, from `git archive`); default: the inherited one")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.spans, args.flag_every)
        return
    if args.hooks_child:
        hooks_child(args.hooks_child[0], args.hooks_child[1], args.spans, args.flag_every)
        return
    if args.hooks:
        hooks_main(args)
        return
    if args.profile:
        profile(args.profile, args.spans, args.stub, args.flag_every)
        return
    pipeline_main(args)


def pipeline_main(args: Any) -> None:
    """Time the whole SDK pipeline per configuration in fresh processes; print medians."""
    kinds = args.kinds.split(",")
    trees = args.trees.split(",") if args.trees else [""]
    configs = []
    for config in args.configs.split(","):
        if config == "batch":
            configs.append(("batch", ""))
        else:
            configs.extend((f"{config}@{tree}" if tree else config, tree) for tree in trees)
    results: dict[str, list[float]] = {}
    for key, got in _children(args, "--child", kinds, configs):
        results.setdefault(key, []).append(got["us_per_span"])
    med = {key: statistics.median(v) for key, v in results.items()}
    for key in sorted(med):
        print(f"{key:24} median {med[key]:7.2f} us/span  runs: "
              f"{', '.join(f'{x:.1f}' for x in results[key])}")
    for kind in kinds:
        base = med.get(f"{kind}/batch")
        if base is None:
            continue
        for config, _tree in configs:
            if config != "batch":
                ours = med[f"{kind}/{config}"]
                print(f"{kind}: {config} adds {ours - base:+.2f} us/span "
                      f"({(ours / base - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
