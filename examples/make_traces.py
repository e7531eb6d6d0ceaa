"""Regenerate the example traces in examples/traces/ with a real TracerProvider.

Run: python examples/make_traces.py
Each output line is one OTLP/JSON ExportTraceServiceRequest, as the Collector's file exporter
writes it, so `otel-loopguard check` reads it like a real capture.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from otel_loopguard.testing import LoopGuardHarness

OUT = Path(__file__).parent / "traces"


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId")
                    else _hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def _write(harness: LoopGuardHarness, path: Path) -> None:
    spans = harness.exporter.get_finished_spans()
    doc = _hex_ids(MessageToDict(encode_spans(spans)))
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {path} ({len(spans)} spans)")


def looping() -> LoopGuardHarness:
    harness = LoopGuardHarness()
    with harness.run("support-triage", prompt="support_triage", conversation="conv-1",
                     attributes={"gen_ai.prompt.version": "v3"}) as agent:
        for _ in range(5):
            agent.turn()
            agent.tool("search_kb", {"query": "refund policy for damaged items"},
                       {"results": [], "note": "no results", "fetched_at":
                        "2026-11-29T10:00:00Z"})
        agent.turn()
        for _ in range(2):
            agent.tool("crm_lookup", {"customer_id": 42},
                       {"error": {"code": 401, "message": "unauthorized"}})
    return harness


def healthy() -> LoopGuardHarness:
    harness = LoopGuardHarness()
    with harness.run("order-status", prompt="order_status",
                     attributes={"gen_ai.prompt.version": "v1"}) as agent:
        for page in range(1, 4):
            agent.turn()
            agent.tool("list_orders", {"customer_id": 7, "page": page},
                       {"orders": [f"o{page}1", f"o{page}2"], "page": page})
        for state in ("queued", "running", "done"):
            agent.turn()
            agent.tool("get_job_status", {"job": "export-9"}, {"status": state})
    return harness


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help: no write
    OUT.mkdir(exist_ok=True)
    _write(looping(), OUT / "looping_agent.jsonl")
    _write(healthy(), OUT / "healthy_agent.jsonl")
