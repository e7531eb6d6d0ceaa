"""Span adapters: spans of each instrumentation convention → tool calls and handoffs.

``to_event(span)`` tries the adapters in a fixed order (GenAI, OpenInference, OpenLLMetry,
Logfire/openai-agents) and returns the first answer. Helpers here also find a span's agent,
whether it is a model turn (and whether that turn asked for tools), its prompt template and its
conversation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from otel_loopguard._native import load
from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, build_tool_call
from otel_loopguard.adapters._turns import tool_request_of
from otel_loopguard.adapters._unwrap import parse_maybe_json
from otel_loopguard.adapters._usage import TokenUsage, usage_of
from otel_loopguard.adapters.genai import GenAIAdapter
from otel_loopguard.adapters.logfire import LogfireAdapter, agent_run_name
from otel_loopguard.adapters.openinference import OpenInferenceAdapter
from otel_loopguard.adapters.openllmetry import OpenLLMetryAdapter
from otel_loopguard.signature import digest
from otel_loopguard.types import Handoff, SpanAdapter, SpanRecord, ToolCall

__all__ = [
    "DEFAULT_ADAPTERS",
    "EVENT",
    "MAX_KEPT_NAME_CHARS",
    "MODEL_SPAN",
    "NOT_READ",
    "OTHER",
    "GenAIAdapter",
    "LogfireAdapter",
    "OpenInferenceAdapter",
    "OpenLLMetryAdapter",
    "TokenUsage",
    "accelerated",
    "agent_of",
    "attribute_value",
    "conversation_of",
    "is_candidate",
    "is_model_turn",
    "may_be_event",
    "may_name_agent",
    "may_name_model",
    "placed_event",
    "prompt_template_of",
    "roles_of",
    "span_reading",
    "template_key_roots",
    "template_label",
    "to_event",
    "tool_request_of",
    "usage_of",
    "version_label",
]

_PLANNERS: Final = (GenAIAdapter(), OpenInferenceAdapter(), OpenLLMetryAdapter(),
                    LogfireAdapter())
DEFAULT_ADAPTERS: tuple[SpanAdapter, ...] = _PLANNERS


_OPERATION: Final = k.GEN_AI_OPERATION_NAME
_OI_KIND: Final = k.OI_SPAN_KIND
_TL_KIND: Final = k.TL_SPAN_KIND
_LOGFIRE_PREFIXES: Final = (k.LOGFIRE_FUNCTION_PREFIX, k.LOGFIRE_HANDOFF_PREFIX)
_AGENT_NAME_PREFIXES: Final = ("invoke_agent", "Agent run")
_AGENT_OPERATIONS: Final = (k.OP_INVOKE_AGENT, "create_agent")
_EVENT_OPERATIONS: Final = (k.OP_EXECUTE_TOOL, k.OP_HANDOFF)
_MAX_UNMARKED_NAMES: Final = 4096
MAX_KEPT_NAME_CHARS: Final = 256
"""The longest span name the live processor keeps as seen: a longer one is a name made of
content (a SQL statement, a URL with its query), which rarely repeats, and keeping 4,096 of
them could hold hundreds of megabytes."""
_unmarked_names: set[str] = set()
"""Span names known not to start with a Logfire prefix (bounded; names repeat)."""


def is_candidate(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when a span may be a tool call, model turn or handoff for the adapters.

    Every such span of the default conventions carries one of three marker attributes or has
    a Logfire name; any other span is only ever an ancestor. The live processor asks this of
    every span that ends, so a name already seen without a Logfire prefix costs one set lookup
    instead of the prefix test, the dearer of the two on a plain span (benchmarks/
    bench_instructions.py counts both).
    """
    if _OPERATION in attributes or _OI_KIND in attributes or _TL_KIND in attributes:
        return True
    return name not in _unmarked_names and _named_candidate(name)


def _named_candidate(name: str) -> bool:
    """``is_candidate`` of an unmarked span by a name not seen before: Logfire's, or noted."""
    if name.startswith(_LOGFIRE_PREFIXES):
        return True
    if len(_unmarked_names) < _MAX_UNMARKED_NAMES and len(name) <= MAX_KEPT_NAME_CHARS:
        _unmarked_names.add(name)
    return False


NOT_READ: Final = 0
"""``span_reading``: no adapter reads the span (``is_candidate`` is False)."""
MODEL_SPAN: Final = 1
"""``span_reading``: a model span (``is_model_turn``)."""
EVENT: Final = 2
"""``span_reading``: a span a default adapter may turn into a tool call or handoff
(``may_be_event``), or any other span an adapter may read that is not a model span."""
OTHER: Final = 3
"""``span_reading``: marked (an agent, chain or workflow span) but neither a model span nor an
event of the default adapters: they only ever read it as an ancestor."""


def span_reading(name: str, attributes: Mapping[str, Any]) -> int:
    """Return how the live processor reads a span: ``NOT_READ``, ``MODEL_SPAN``, ``EVENT``...

    ``NOT_READ`` exactly when ``is_candidate`` is False; ``MODEL_SPAN`` exactly when it is a
    candidate and ``is_model_turn``; ``OTHER`` only when ``may_be_event`` is False too. Three
    lookups and a name test on an unmarked span, as ``is_candidate`` makes.
    """
    if _OPERATION not in attributes and _OI_KIND not in attributes \
            and _TL_KIND not in attributes:  # unmarked: most spans, tested as is_candidate does
        return NOT_READ if name in _unmarked_names or not _named_candidate(name) else EVENT
    operation = attributes.get(_OPERATION)
    if operation in k.MODEL_OPERATIONS:  # GenAI's model spans, the most common marked ones
        return MODEL_SPAN
    oi_kind = attributes.get(_OI_KIND)
    tl_kind = attributes.get(_TL_KIND)
    if oi_kind == "LLM" or tl_kind == "llm":
        return MODEL_SPAN
    if operation in _EVENT_OPERATIONS or oi_kind == "TOOL" or tl_kind == "tool" \
            or name.startswith(_LOGFIRE_PREFIXES):
        return EVENT
    return OTHER


python_span_reading: Final = span_reading
"""The definition of ``span_reading``, which the optional C accelerator follows."""


def _set_up_reading(module: ModuleType) -> None:
    """Give the C accelerator (``otel_loopguard._span_end``) what ``span_reading`` reads by."""
    module.setup(_OPERATION, _OI_KIND, _TL_KIND, frozenset(k.MODEL_OPERATIONS),
                 tuple(_EVENT_OPERATIONS), tuple(_LOGFIRE_PREFIXES), _unmarked_names,
                 _named_candidate)
    module.set_fallback(python_span_reading)


_SPAN_END: Final = load("otel_loopguard._span_end")
"""The optional C accelerator of ``span_reading`` and of ``_keys_test`` (``_span_end.c``): in
Python, they are a third of what the live processor adds to a model span's ``span.end()``
(``benchmarks/bench_processor_instructions.py``). ``tests/test_span_end.py`` compares them
with their definitions."""
if _SPAN_END is not None:
    _set_up_reading(_SPAN_END)
    span_reading = _SPAN_END.span_reading


def accelerated() -> bool:
    """Return whether the C accelerator of ``span_reading`` and ``_keys_test`` is in use."""
    return _SPAN_END is not None


def _keys_test(keys: frozenset[str]) -> Callable[[Mapping[str, Any]], bool]:
    """Return the test of whether a span's attributes have no key outside ``keys``.

    ``keys.issuperset``, answered by the C accelerator where it is built: from a memo of the
    key objects of the spans seen, since an instrumentation names every span's keys with the
    same string objects (one pointer comparison per key instead of a set lookup that compares
    two equal strings).
    """
    if _SPAN_END is None:
        return keys.issuperset
    return functools.partial(_SPAN_END.keys_within, keys)


def may_be_event(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when a default adapter could turn the span into a tool call or handoff.

    Exactly the conditions the default adapters test first, so the hot path can skip building
    a ``SpanRecord`` for the many agent, chain and model spans.
    """
    return (attributes.get(k.GEN_AI_OPERATION_NAME) in _EVENT_OPERATIONS
            or attributes.get(k.OI_SPAN_KIND) == "TOOL"
            or attributes.get(k.TL_SPAN_KIND) == "tool"
            or name.startswith(_LOGFIRE_PREFIXES))


def to_event(span: SpanRecord,
             adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS) -> ToolCall | Handoff | None:
    """Return the tool call or handoff ``span`` stands for, or None."""
    for adapter in adapters:
        event = adapter.to_event(span)
        if event is not None:
            return event
    return None


def placed_event(span: SpanRecord, adapters: Sequence[SpanAdapter], agent: str | None,
                 turn: int | None) -> ToolCall | Handoff | None:
    """Return ``to_event(span, adapters)``, a tool call placed in its run.

    The call gets ``agent`` when its span names none, and the model ``turn``, as
    ``ToolCall.in_context`` gives them; a handoff tool's handoff gets ``agent`` as its source
    likewise. With the default adapters the call is built once, from the adapter's plan,
    instead of built and then copied: building a frozen ``ToolCall`` is about a third of the
    cost of reading a tool span, and the assembly places every call.
    """
    if adapters is not DEFAULT_ADAPTERS:
        event = to_event(span, adapters)
        if isinstance(event, ToolCall):
            return event.in_context(event.agent or agent, turn)
        return event
    name, attributes = span.name, span.attributes
    for adapter in _PLANNERS:
        plan = adapter.plan(name, attributes)
        if plan is None:
            continue
        if plan is HANDOFF:
            return adapter.handoff(span, agent)
        tool, args_key, result_key, own_agent = plan
        return build_tool_call(span, tool, args_key, result_key, own_agent or agent, turn)
    return None


def agent_of(name: str, attributes: Mapping[str, Any]) -> str | None:
    """Return the agent name when the span is an agent span, else None."""
    op = attributes.get(k.GEN_AI_OPERATION_NAME)
    if op in _AGENT_OPERATIONS:
        found = attributes.get(k.GEN_AI_AGENT_NAME)
        return str(found) if found else name.removeprefix("invoke_agent").strip() or "agent"
    if attributes.get(k.OI_SPAN_KIND) == "AGENT":  # CrewAI's: only the node id is the role
        found = attributes.get(k.OI_AGENT_NAME) or attributes.get(k.GEN_AI_AGENT_NAME) \
            or attributes.get(k.OI_GRAPH_NODE_ID)
        return str(found) if found else name
    if attributes.get(k.TL_SPAN_KIND) == "agent":
        found = attributes.get(k.GEN_AI_AGENT_NAME) or attributes.get(k.TL_ENTITY_NAME)
        return str(found) if found else name.removesuffix(".agent")
    if name.startswith(k.LOGFIRE_AGENT_PREFIX):
        return agent_run_name(name, attributes)
    if attributes.get(k.TL_SPAN_KIND) == "task":
        return _subgraph_agent(attributes)
    return None


def _subgraph_agent(attributes: Mapping[str, Any]) -> str | None:
    """Return the agent of an OpenLLMetry task span that runs a graph as its node, or None.

    A LangGraph agent made a node of another graph (``create_agent(..., name="triage")`` as
    node ``triage`` of a ``StateGraph``) runs as a task span named like the node, under it
    (``traceloop.entity.path`` ends with its own name). OpenLLMetry writes that agent's
    ``invoke_agent triage`` span beside the node's spans, not above its calls: without this the
    calls, and a ``transfer_to_<agent>`` handoff between two such agents, read as the outer
    graph's.
    """
    entity = attributes.get(k.TL_ENTITY_NAME)
    path = attributes.get(k.TL_ENTITY_PATH)
    if isinstance(entity, str) and entity and isinstance(path, str) \
            and path.rpartition(".")[2] == entity:
        return entity
    return None


def roles_of(name: str, attributes: Mapping[str, Any]) -> tuple[str | None, bool, bool]:
    """Return ``agent_of``, ``is_model_turn`` and ``may_be_event`` of a span in one read.

    The assembly asks all three of every span; this reads each marker attribute once and
    asks ``agent_of`` only of a span carrying one of the agent markers it tests. The third is
    False for a model turn (the assembly does not ask it of one).
    """
    op = attributes.get(_OPERATION)
    oi_kind = attributes.get(_OI_KIND)
    tl_kind = attributes.get(_TL_KIND)
    agent = agent_of(name, attributes) if (  # only a span with one of its markers is one
        op in _AGENT_OPERATIONS or oi_kind == "AGENT" or tl_kind in ("agent", "task")
        or name.startswith(k.LOGFIRE_AGENT_PREFIX)) else None
    if op in k.MODEL_OPERATIONS or oi_kind == "LLM" or tl_kind == "llm":  # is_model_turn
        return agent, True, False
    return agent, False, (op in _EVENT_OPERATIONS or oi_kind == "TOOL"  # may_be_event
                          or tl_kind == "tool" or name.startswith(_LOGFIRE_PREFIXES))


_OPEN_MODEL_PREFIX: Final = k.OP_GENERATE_CONTENT + " "


def may_name_agent(name: str) -> bool:
    """Return True when a span's name may mark an agent span whose siblings imply handoffs.

    GenAI ``invoke_agent x``, Logfire ``Agent run: x``, Traceloop ``x.agent``: names the live
    processor can test as a span starts, before most attributes are set, and ``check`` infers
    sibling handoffs from the same spans. OpenInference agent spans are known by attributes
    alone; that convention reports its handoffs as spans.
    """
    return name.startswith(_AGENT_NAME_PREFIXES) or name.endswith(".agent")


def may_name_model(name: str) -> bool:
    """Return True when a span's name marks a model span that may outlast its tool calls.

    Google ADK's ``generate_content <model>``: a name the live processor can test as a span
    starts, before its attributes are set (ADK sets them after), and which stays open over the
    tool calls it requested (``assembly``'s model turn rule). Other frameworks' model spans
    (``chat <model>``...) end before their tools start: they are not noted, so their starts
    cost what they did.
    """
    return name.startswith(_OPEN_MODEL_PREFIX)


def is_model_turn(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when the span is a model call (its end separates batches of tool calls)."""
    if attributes.get(k.GEN_AI_OPERATION_NAME) in k.MODEL_OPERATIONS:
        return True
    if attributes.get(k.OI_SPAN_KIND) == "LLM":
        return True
    return attributes.get(k.TL_SPAN_KIND) == "llm"


_TEXT_KEYS: Final = frozenset({k.OI_PROMPT_TEMPLATE, "metadata.prompt_template"})
"""Keys whose value is a template's text, never its name."""
_NAME_RE: Final = re.compile(r"[\w.:/@+-]{1,80}")
"""What a template name looks like; any other value is text and gets a derived label."""
_WORD_RE: Final = re.compile(r"[a-z0-9]+")
_SLUG_WORDS: Final = 4
_SLUG_CHARS: Final = 24


def template_label(text: str) -> str:
    """Return the label of a template known only by its text: ``tpl-<first words>-<hash>``.

    The slug is the first four words, lower case, at most 24 characters; the hash tells
    templates with the same beginning apart. The text itself never becomes a label.
    """
    slug = "-".join(_WORD_RE.findall(text[:200].lower())[:_SLUG_WORDS])[:_SLUG_CHARS]
    slug = slug.rstrip("-")
    return f"tpl-{slug}-{digest(text)[:8]}" if slug else f"tpl-{digest(text)[:8]}"


_VERSION_RE: Final = re.compile(r"[\w.:/+-]{1,40}")
"""What a template version looks like as it is: a short name (``v3``, ``2026-05-01``, a hash)."""


def version_label(version: str) -> str:
    """Return a template version as it goes into a label: as it is when short and name-like.

    Any other value (over 40 characters, spaces, newlines, an ``@``) keeps its first 24 name
    characters and gets a short hash, so two long versions that share a beginning stay two
    labels and text never becomes one: ``2026-05-01-rollout-of-the~1a2b3c4d``.
    """
    if _VERSION_RE.fullmatch(version) is not None:
        return version
    head = re.sub(r"[^\w.:/+-]+", "-", version[:200]).strip("-")[:24].rstrip("-")
    return f"{head}~{digest(version)[:8]}" if head else digest(version)[:8]


@functools.lru_cache(maxsize=256)
def _key_path(key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Return ``(attribute, path inside its JSON)`` candidates for ``key``, whole key first.

    ``metadata.prompt_name`` is the attribute ``metadata.prompt_name``, else ``prompt_name``
    inside the JSON of attribute ``metadata``.
    """
    parts = key.split(".")
    return ((key, ()), *((".".join(parts[:i]), tuple(parts[i:]))
                         for i in range(len(parts) - 1, 0, -1)))


def attribute_value(attributes: Mapping[str, Any], key: str) -> Any:
    """Return the value ``key`` names: an attribute, or a path inside a JSON attribute.

    None when absent. A JSON attribute is parsed only when it mentions the path's first key.
    """
    value = attributes.get(key)
    if value is not None or "." not in key:
        return value
    for root, path in _key_path(key)[1:]:
        found = attributes.get(root)
        if found is None:
            continue
        if isinstance(found, str):
            if f'"{path[0]}"' not in found:
                continue
            found = parse_maybe_json(found)
        for part in path:
            found = found.get(part) if isinstance(found, Mapping) else None
        if found is not None:
            return found
    return None


def template_key_roots(keys: Iterable[str]) -> frozenset[str]:
    """Return the attribute names whose presence may give a value for one of ``keys``.

    Each key itself, and for a path key (``metadata.prompt_name``) the attribute it starts
    with (``metadata``): a span without any of them names no template or conversation.
    """
    return frozenset(root for key in keys for root, _ in _key_path(key))


def prompt_template_of(attributes: Mapping[str, Any], name_keys: Sequence[str],
                       version_keys: Sequence[str]) -> str | None:
    """Return ``name@version`` or ``name`` from the first name key present, or None.

    A key may name a path inside a JSON attribute (``metadata.prompt_name``). A template
    known only by its text (OpenInference's ``llm.prompt_template.template``, or a value that
    is no name) gets the label ``template_label`` derives: text never reaches a metric label.
    """
    for position, key in enumerate(name_keys):
        value = attribute_value(attributes, key)
        if value is None or value == "":
            continue
        label = str(value)
        if key in _TEXT_KEYS or _NAME_RE.fullmatch(label) is None:
            label = template_label(label)
        paired = version_keys[position:position + 1] if len(version_keys) == len(name_keys) \
            else version_keys
        for vkey in paired:
            version = attribute_value(attributes, vkey)
            if version not in (None, ""):
                return f"{label}@{version_label(str(version))}"
        return label
    return None


def conversation_of(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """Return the conversation/session id carried by the span, if any (keys as above)."""
    for key in keys:
        value = attribute_value(attributes, key)
        if value not in (None, ""):
            return str(value)
    return None


