"""pydantic-ai's instrumentation data formats: every ``version`` gives the same tool calls.

``InstrumentationSettings(version=2)`` names a tool span ``running tool`` and writes the call
in ``tool_arguments`` / ``tool_response``; versions 3 to 6 write ``execute_tool <tool>`` with
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``. docs/frameworks.md says the
version does not change what loopguard reads: the scripted looping agent of
``scripted_agents.py`` is flagged the same, live and by ``check`` on the exported OTLP/JSON,
under each. Runs in the ``pydantic-ai`` family's venv; skips elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.cli import main
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "recordings"))

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

if os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY") == "pydantic-ai":
    import pydantic_ai  # noqa: F401  .ci/frameworks.sh: must be there
else:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai not installed")


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_every_data_format_flags_the_looping_run(version: int, tmp_path: Path) -> None:
    """Four identical searches: warn at the 3rd, replan at the 4th, live and in ``check``."""
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from record import to_otlp_json_lines
    from scripted_agents import ANSWER, make_pydantic_ai_agent

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
        registry=CollectorRegistry(), raise_internal_errors=True))
    agent = make_pydantic_ai_agent("looping")
    agent.instrument = InstrumentationSettings(tracer_provider=provider, version=version)
    assert agent.run_sync("I want a refund").output == ANSWER
    provider.force_flush()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.end_time or 0)
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name")
             == "execute_tool"]
    assert len(tools) == 4
    assert [(s.attributes or {}).get("loopguard.action") for s in tools] == \
        [None, None, "warn", "replan"]
    trace_file = tmp_path / "trace.jsonl"
    trace_file.write_text("".join(line + "\n" for line in to_otlp_json_lines(spans)),
                          encoding="utf-8")
    report = tmp_path / "report.json"
    assert main(["check", "--format", "json", "--output", str(report), str(trace_file)]) == 0
    (run,) = json.loads(report.read_text(encoding="utf-8"))["runs"]
    flagged = {format(s.context.span_id, "016x"): s.attributes["loopguard.action"]
               for s in tools if "loopguard.action" in (s.attributes or {})}
    assert {f["span_id"]: f["action"] for f in run["findings"]} == flagged
