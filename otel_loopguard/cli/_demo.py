"""``otel-loopguard demo``: a simulated agent fleet feeding live loopguard metrics.

Several agents run on threads, each picking a prompt template per run and emitting its spans in
the OpenTelemetry GenAI convention (``invoke_agent`` root, ``chat`` turns, ``execute_tool``
calls with arguments and results) through a real SDK ``TracerProvider`` carrying a
``LoopGuardSpanProcessor``. The metrics go to a fresh registry served on ``/metrics``, and the
summary table is read back from that same registry, so it shows exactly what Prometheus scrapes.

The templates: ``support_triage@v3`` is broken (its agents re-run a knowledge-base search that
finds nothing, or retry a CRM lookup failing with 401); ``order_status@v1`` is healthy
(pagination and a polled job that makes progress); ``refund_flow@v2`` is mostly healthy, with an
occasional refund status poll that never moves; ``research@v1`` sometimes rewords the same web
search without learning anything new.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.exceptions import LoopGuardError
from otel_loopguard.metrics import start_metrics_server
from otel_loopguard.metrics._names import LOOP_DETECTED, RUNS, RUNS_FLAGGED, TOOL_CALLS
from otel_loopguard.processor import LoopGuardSpanProcessor

__all__ = ["add_parser", "run_demo"]

_DEFAULT_DURATION_SECONDS: Final = 5.0
_DEFAULT_PORT: Final = 9464
_DEFAULT_ADDR: Final = "127.0.0.1"
_DEFAULT_AGENTS: Final = 8
_PAUSE_SECONDS: Final = (0.03, 0.09)
"""Each agent idles this long (uniform) between runs: about 100 runs/s for 8 agents."""
_TABLE_INTERVAL_SECONDS: Final = 1.0
_MODEL: Final = "gpt-4o-mini"
_ACTIONS: Final = ("warn", "replan", "stop")
_DEMO_PRICE: Final = {"input_per_million": 0.15, "output_per_million": 0.6, "currency": "USD"}
"""What the demo's model costs when the configuration sets no prices (an example, not a quote)."""


# --- span emission ------------------------------------------------------------------------------
class _Run:
    """Emits the child spans of one agent run on the current thread."""

    def __init__(self, tracer: trace.Tracer, rng: random.Random) -> None:
        self._tracer, self._rng = tracer, rng

    def chat(self, finish: str = "tool_calls") -> None:
        """Emit one model call."""
        rng = self._rng
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                 "gen_ai.request.model": _MODEL, "gen_ai.response.model": _MODEL,
                 "gen_ai.usage.input_tokens": rng.randint(400, 3000),
                 "gen_ai.usage.output_tokens": rng.randint(20, 300),
                 "gen_ai.response.finish_reasons": (finish,)}
        with self._tracer.start_as_current_span(f"chat {_MODEL}", kind=trace.SpanKind.CLIENT,
                                                attributes=attrs):
            pass

    def tool(self, name: str, arguments: dict[str, Any], result: Any = None, *,
             error: str | None = None) -> None:
        """Emit one ``execute_tool`` span; ``error`` makes it fail with that message."""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": f"call_{self._rng.getrandbits(64):016x}",
            "gen_ai.tool.call.arguments": json.dumps(arguments)}
        with self._tracer.start_as_current_span(f"execute_tool {name}",
                                                attributes=attrs) as span:
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))
                span.set_attribute("error.type", error.split(":", 1)[0])
            else:
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))

    def step(self, name: str, arguments: dict[str, Any], result: Any = None, *,
             error: str | None = None) -> None:
        """Emit a model turn that asks for one tool call, then the call."""
        self.chat()
        self.tool(name, arguments, result, error=error)


# --- the scripted templates ---------------------------------------------------------------------
_KB_QUERIES: Final = ("reset two-factor authentication", "refund for duplicate charge",
                      "change billing email", "export invoices as csv", "cancel annual plan")
_TOPICS: Final = (("vector database benchmarks 2024", "2024 vector database benchmarks results",
                   "vector database benchmark results 2024"),
                  ("rust async runtime comparison", "comparison of rust async runtime",
                   "rust async runtime comparison benchmarks"),
                  ("eu ai act obligations for startups", "startups obligations under eu ai act",
                   "eu ai act startup obligations"))


def _support_triage(run: _Run, rng: random.Random) -> None:
    """Broken: most runs loop on an empty search or retry a CRM lookup failing with 401."""
    ticket, customer = f"T-{rng.randint(1000, 99999)}", f"C-{rng.randint(10000, 99999)}"
    run.step("get_ticket", {"ticket_id": ticket},
             {"ticket_id": ticket, "customer_id": customer, "status": "open"})
    roll, query = rng.random(), rng.choice(_KB_QUERIES)
    if roll < 0.45:
        for _ in range(rng.randint(5, 7)):
            run.step("search_kb", {"query": query, "top_k": 5},
                     {"results": [], "message": "no results"})
    elif roll < 0.75:
        for _ in range(rng.randint(2, 4)):
            run.step("crm_lookup", {"customer_id": customer},
                     error="401 Unauthorized: CRM token expired")
    else:
        article = f"KB-{rng.randint(100, 999)}"
        run.step("search_kb", {"query": query, "top_k": 5},
                 {"results": [{"id": article, "score": round(rng.uniform(0.6, 0.95), 2)}]})
        run.step("get_article", {"article_id": article}, {"id": article, "body": "Steps: ..."})
        run.step("post_reply", {"ticket_id": ticket, "article_id": article}, {"ok": True})
    run.chat("stop")


def _order_status(run: _Run, rng: random.Random) -> None:
    """Healthy: paginates through orders, then polls an export job that makes progress."""
    customer = f"C-{rng.randint(10000, 99999)}"
    run.step("get_customer", {"email": f"user{rng.randint(1, 10**6)}@example.com"},
             {"customer_id": customer, "tier": rng.choice(("free", "pro", "enterprise"))})
    pages = rng.randint(1, 4)
    for page in range(1, pages + 1):
        orders = [f"O-{rng.randint(10**5, 10**6)}" for _ in range(3)]
        run.step("list_orders", {"customer_id": customer, "page": page, "page_size": 3},
                 {"orders": orders, "page": page, "has_more": page < pages})
    job = f"job-{rng.getrandbits(32):08x}"
    run.step("start_order_export", {"customer_id": customer}, {"job_id": job})
    progress = 0
    while progress < 100:
        progress = min(100, progress + rng.randint(20, 50))
        state = "done" if progress == 100 else "running"
        run.step("get_job_status", {"job_id": job}, {"state": state, "progress": progress})
    run.chat("stop")


def _refund_flow(run: _Run, rng: random.Random) -> None:
    """Mostly healthy: now and then the refund status poll never leaves ``pending``."""
    order = f"O-{rng.randint(10**5, 10**6)}"
    run.step("get_order", {"order_id": order}, {"order_id": order, "total": rng.randint(5, 500)})
    run.step("check_refund_eligibility", {"order_id": order}, {"eligible": True})
    refund = f"R-{rng.getrandbits(24):06x}"
    run.step("create_refund", {"order_id": order, "reason": "damaged"}, {"refund_id": refund})
    states = ["pending"] * rng.randint(6, 11) if rng.random() < 0.15 else \
        ["pending", "processing", "completed"][rng.randint(0, 1):]
    for state in states:
        run.step("get_refund_status", {"refund_id": refund},
                 {"refund_id": refund, "status": state, "checked_at": time.time()})
    run.chat("stop")


def _research(run: _Run, rng: random.Random) -> None:
    """Usually searches, reads and answers; sometimes rewords a search that finds nothing."""
    wordings = rng.choice(_TOPICS)
    urls = [f"https://example.org/{rng.getrandbits(32):08x}" for _ in range(3)]
    hits = {"results": [{"url": u, "title": wordings[0]} for u in urls]}
    if rng.random() < 0.12:
        for wording in wordings:
            run.step("web_search", {"query": wording}, {"results": []})
    else:
        run.step("web_search", {"query": wordings[0]}, hits)
        for url in urls[:rng.randint(1, 3)]:
            run.step("fetch_url", {"url": url}, {"status": 200, "chars": rng.randint(2000, 9000)})
    run.step("write_summary", {"sources": len(urls)}, {"words": rng.randint(150, 400)})
    run.chat("stop")


@dataclass(frozen=True, slots=True)
class _Template:
    name: str
    version: str
    agent: str
    weight: float
    script: Callable[[_Run, random.Random], None]

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


TEMPLATES: Final = (
    _Template("support_triage", "v3", "support-triage", 1.0, _support_triage),
    _Template("order_status", "v1", "order-status", 1.0, _order_status),
    _Template("refund_flow", "v2", "refunds", 1.0, _refund_flow),
    _Template("research", "v1", "researcher", 0.7, _research),
)
"""The simulated prompt templates (``support_triage@v3`` is the broken one)."""


# --- the fleet ----------------------------------------------------------------------------------
def _agent_loop(tracer: trace.Tracer, rng: random.Random, index: int,
                stop: threading.Event) -> None:
    """Run one simulated agent until ``stop`` is set."""
    weights = [t.weight for t in TEMPLATES]
    run = _Run(tracer, rng)
    while not stop.is_set():
        template = rng.choices(TEMPLATES, weights)[0]
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": template.agent,
                 "gen_ai.prompt.name": template.name, "gen_ai.prompt.version": template.version,
                 "gen_ai.conversation.id": f"conv-{index}-{rng.getrandbits(48):012x}",
                 "gen_ai.provider.name": "openai", "gen_ai.request.model": _MODEL}
        with tracer.start_as_current_span(f"invoke_agent {template.agent}", attributes=attrs,
                                          context=Context()):
            template.script(run, rng)
        stop.wait(rng.uniform(*_PAUSE_SECONDS))


def _agent_rng(seed: int | None, index: int) -> random.Random:
    return random.Random(f"loopguard-demo-{seed}-{index}") if seed is not None \
        else random.Random()


@contextmanager
def _fleet(tracer: trace.Tracer, agents: int, seed: int | None) -> Iterator[None]:
    """Run ``agents`` simulated agents on daemon threads; stop and join them on exit."""
    stop = threading.Event()
    threads = [threading.Thread(target=_agent_loop, name=f"loopguard-demo-agent-{i}",
                                args=(tracer, _agent_rng(seed, i), i, stop), daemon=True)
               for i in range(agents)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(5.0)


# --- the summary table --------------------------------------------------------------------------
def summarize(registry: CollectorRegistry) -> dict[str, dict[str, float]]:
    """Return per-template totals read from the registry's loopguard counters."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for family in registry.collect():
        for sample in family.samples:
            template = sample.labels.get("prompt_template")
            if template is None or not sample.name.endswith("_total"):
                continue
            row, action = rows[template], sample.labels.get("action", "")
            if sample.name == RUNS:
                row["runs"] += sample.value
            elif sample.name == TOOL_CALLS:
                row["tool_calls"] += sample.value
            elif sample.name == RUNS_FLAGGED:
                row[f"runs_{action}"] += sample.value
            elif sample.name == LOOP_DETECTED:
                row[f"hints_{action}"] += sample.value
    return {t: dict(rows[t]) for t in sorted(rows)}


def format_table(rows: dict[str, dict[str, float]], elapsed: float) -> str:
    """Render the per-template summary as a fixed-width text table."""
    head = (f"{'prompt template':<20}{'runs':>7}{'tool calls':>12}{'flagged':>9}"
            f"{'>=replan':>10}   hints warn/replan/stop")
    lines = [f"otel-loopguard demo: {elapsed:4.1f}s", head, "-" * len(head)]
    for template, row in rows.items():
        runs = row.get("runs", 0.0)
        share = [100.0 * row.get(f"runs_{a}", 0.0) / runs if runs else 0.0
                 for a in ("warn", "replan")]
        hints = "/".join(f"{row.get(f'hints_{a}', 0.0):.0f}" for a in _ACTIONS)
        lines.append(f"{template:<20}{runs:>7.0f}{row.get('tool_calls', 0.0):>12.0f}"
                     f"{share[0]:>8.1f}%{share[1]:>9.1f}%   {hints}")
    return "\n".join(lines)


def _watch(registry: CollectorRegistry, duration: float, out: TextIO, quiet: bool) -> float:
    """Redraw the live table every second until ``duration`` has elapsed; return the elapsed.

    Only on a terminal, and not ``quiet``: into a file or a CI log, a table a second would
    bury the final summary, which is all that is printed there.
    """
    start = time.monotonic()
    live = not quiet and out.isatty()
    previous_lines = 0
    while (elapsed := time.monotonic() - start) < duration:
        time.sleep(min(_TABLE_INTERVAL_SECONDS, duration - elapsed))
        if not live:
            continue
        table = format_table(summarize(registry), time.monotonic() - start)
        if previous_lines:
            out.write(f"\x1b[{previous_lines}F\x1b[J")
        out.write(table + "\n")
        out.flush()
        previous_lines = table.count("\n") + 1
    return time.monotonic() - start


# --- the command --------------------------------------------------------------------------------
def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low}..{high}, got {text}")
        return value

    return parse


def add_parser(commands: Any) -> None:
    """Register ``demo`` on the subcommand parser."""
    parser = commands.add_parser(
        "demo", help="simulate an agent fleet and serve live loopguard metrics",
        description="Run simulated agents (one broken prompt template, two with occasional "
                    "real loops, one healthy) "
                    "through a real TracerProvider with LoopGuardSpanProcessor, serve the "
                    "metrics on /metrics and print a per-template summary. LOOPGUARD_* "
                    "variables apply. Exit 0; 2 for a bad flag, or when /metrics cannot be "
                    "served (the port is taken).")
    parser.add_argument("--duration", type=_positive_float, default=_DEFAULT_DURATION_SECONDS,
                        metavar="SECONDS", help="how long to run (default: 5)")
    parser.add_argument("--metrics-port", type=_int_in(0, 65535), default=_DEFAULT_PORT,
                        metavar="PORT", help="port of /metrics (default: 9464; 0 = pick a "
                                             "free port and print it)")
    parser.add_argument("--metrics-addr", default=_DEFAULT_ADDR, metavar="ADDR",
                        help="address of /metrics (default: 127.0.0.1)")
    parser.add_argument("--agents", type=_int_in(1, 256), default=_DEFAULT_AGENTS,
                        metavar="N", help="concurrent simulated agents (default: 8)")
    parser.add_argument("--seed", type=int, metavar="N",
                        help="seed each agent's random generator (reproducible runs)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no live table, only the metrics URL and the final summary (the "
                             "default when stdout is not a terminal)")
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run ``demo`` and return its exit code (0)."""
    config = LoopGuardConfig.load()
    if not config.prices:  # so that the dashboard's cost panel has something to show
        config = config.replace(prices={_MODEL: _DEMO_PRICE})
    if config.metrics_exporter == "otlp":  # the table and /metrics read the Prometheus counters
        config = config.replace(metrics_exporter="both")
    registry = CollectorRegistry()
    out = sys.stdout
    with ExitStack() as stack:
        provider = TracerProvider(resource=Resource.create({"service.name": "loopguard-demo"}))
        stack.callback(provider.shutdown)
        provider.add_span_processor(LoopGuardSpanProcessor(config, registry=registry))
        try:
            server = start_metrics_server(args.metrics_port, args.metrics_addr, registry)
        except OSError as exc:  # a busy port, an address not on this host; named in strerror
            raise LoopGuardError(exc.strerror or str(exc)) from None
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        print(f"serving metrics on http://{args.metrics_addr}:{server.server_port}/metrics "
              f"({args.agents} agents, {args.duration:g}s)", file=out, flush=True)
        with _fleet(provider.get_tracer("otel_loopguard.demo"), args.agents, args.seed):
            elapsed = _watch(registry, args.duration, out, args.quiet)
        print("final summary:", file=out)
        print(format_table(summarize(registry), elapsed), file=out, flush=True)
    return 0
