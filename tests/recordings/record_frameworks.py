"""Record span shapes of eight more frameworks (see tests/frameworks/scripted_agents.py).

Usage:
    python tests/recordings/record_frameworks.py <framework>[-default] <outdir>

Writes ``<outdir>/<framework>.jsonl``: one OTLP/JSON ``ExportTraceServiceRequest`` per line,
one line per scenario, in the order of the framework's ``scenarios`` (README.md in this
directory lists them). The agents run offline against scripted models; the framework's own
instrumentation builds the spans; nothing is written by hand. Each framework needs its own
virtualenv (see README.md). Imports nothing from otel_loopguard.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frameworks"))
sys.path.insert(0, HERE)

from record import to_otlp_json_lines  # noqa: E402
from scripted_agents import FRAMEWORKS  # noqa: E402


def record(name: str, outdir: str) -> str:
    """Run every scenario of framework ``name`` and write its traces.

    ``<framework>-default``: the framework as installed, without the environment its entry
    sets (Strands without its content opt-in: arguments and results in span events).
    """
    default = name.endswith("-default")
    framework = FRAMEWORKS[name.removesuffix("-default")]
    for key, value in ({} if default else framework.env).items():
        os.environ.setdefault(key, value)
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(
        {"service.name": f"loopguard-recording-{name}"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    framework.instrument(provider)
    lines: list[str] = []
    for scenario in framework.scenarios:
        exporter.clear()
        framework.run(scenario)
        provider.force_flush()
        traces = to_otlp_json_lines(exporter.get_finished_spans())
        if len(traces) != 1:
            raise SystemExit(f"{name}/{scenario}: expected 1 trace, got {len(traces)}")
        lines.extend(traces)
        print(f"  [{scenario}] {len(exporter.get_finished_spans())} spans", file=sys.stderr)
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)
    print(f"{name}: {len(lines)} traces ({', '.join(framework.scenarios)}) -> {path}",
          file=sys.stderr)
    return path


def main(argv: list[str]) -> int:
    """Entry point: ``record_frameworks.py <framework> <outdir>``."""
    if len(argv) != 3 or argv[1].removesuffix("-default") not in FRAMEWORKS:
        print(f"usage: {argv[0]} <{'|'.join(FRAMEWORKS)}>[-default] <outdir>", file=sys.stderr)
        return 2
    record(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
