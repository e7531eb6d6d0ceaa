"""Attribute keys we read, one constant each, with the convention that defines it.

Sources: OTel GenAI semantic conventions (open-telemetry/semantic-conventions-genai,
``gen-ai-spans.md``, "Development"); OpenInference semantic conventions 0.1.42
(``SpanAttributes``); OpenLLMetry ``opentelemetry-semantic-conventions-ai`` 0.5.1
(``SpanAttributes``); Langfuse 5.0 ``_client/attributes.py``; Logfire's openai-agents
integration. We keep our own constants so no runtime dependency on those packages is needed
(``tests/test_keys_upstream.py`` cross-checks them when the packages are installed).
"""

from __future__ import annotations

from typing import Final

# --- OTel GenAI ---------------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""GenAI: operation; ``execute_tool`` marks a tool span, ``invoke_agent`` an agent span."""
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
"""GenAI: name of the tool (required on execute_tool spans)."""
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
"""GenAI: the model's tool-call id (recommended; absent in most instrumentations)."""
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
"""GenAI: arguments, opt-in; an object or a JSON string."""
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
"""GenAI: result, opt-in; an object or a JSON string."""
GEN_AI_TOOL_STATUS: Final = "gen_ai.tool.status"
"""Strands: ``success`` or ``error`` on execute_tool spans (the result is left out on error)."""
ADK_TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
"""Google ADK, legacy telemetry schema (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``): arguments."""
ADK_TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
"""Google ADK, legacy telemetry schema: the tool's response (``{"result": ...}`` or its dict)."""
PAI_TOOL_ARGUMENTS: Final = "tool_arguments"
"""pydantic-ai, instrumentation ``version=2`` (``running tool`` spans): the arguments."""
PAI_TOOL_RESPONSE: Final = "tool_response"
"""pydantic-ai, instrumentation ``version=2``: the tool's result."""
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
"""GenAI: agent name, on invoke_agent spans (official LangChain instrumentation: tool spans too)."""
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""GenAI: conversation (session/thread) id."""
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
"""GenAI registry: name of the prompt (template) used."""
GEN_AI_HANDOFF_FROM: Final = "gen_ai.handoff.from_agent"
"""OpenLLMetry (Traceloop openai-agents): agent handing off; span has operation ``handoff``."""
GEN_AI_HANDOFF_TO: Final = "gen_ai.handoff.to_agent"
"""OpenLLMetry (Traceloop openai-agents): agent receiving the handoff."""
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
"""GenAI: why the model stopped, one per choice (``stop``, ``tool_calls``, ``tool_use``...);
recommended on model spans and not content, so most instrumentations set it."""
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
"""GenAI: the model's output messages, opt-in content; parts of type ``tool_call`` are the
tool calls it asked for."""
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
"""GenAI: the messages sent to the model, opt-in content; the last is what reached it since its
previous turn (a tool result, a harness's feedback, a user's reply)."""
GEN_AI_PROMPT_PREFIX: Final = "gen_ai.prompt."
"""OpenLLMetry: flattened prompt messages, ``gen_ai.prompt.{i}.content`` (captured by
default)."""
OI_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
"""OpenInference: flattened input messages of an LLM span,
``llm.input_messages.{i}.message.content``."""
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""GenAI: the model provider (``openai``, ``anthropic``, ``gcp.gemini``...)."""
GEN_AI_SYSTEM: Final = "gen_ai.system"
"""GenAI (deprecated for ``gen_ai.provider.name``): the model provider."""
GEN_AI_COMPLETION_PREFIX: Final = "gen_ai.completion."
"""OpenLLMetry: flattened completions, ``gen_ai.completion.{i}.finish_reason`` and
``gen_ai.completion.{i}.tool_calls.{j}.name`` (content, captured by default)."""
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""GenAI: tokens the model read (the prompt), on model spans."""
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
"""GenAI: tokens the model wrote, on model spans."""
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
"""GenAI before 1.27 and OpenLLMetry: what ``gen_ai.usage.input_tokens`` replaced."""
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
"""GenAI before 1.27 and OpenLLMetry: what ``gen_ai.usage.output_tokens`` replaced."""
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
"""GenAI: the model the application asked for (``gpt-4o``)."""
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
"""GenAI: the model that answered (``gpt-4o-2024-08-06``)."""
ERROR_TYPE: Final = "error.type"
"""OTel stable: class of the error (``_OTHER`` when unknown)."""

OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_HANDOFF: Final = "handoff"
OP_GENERATE_CONTENT: Final = "generate_content"
MODEL_OPERATIONS: Final = frozenset({"chat", "generate_content", "text_completion", "responses"})
"""GenAI operations that are a model turn (most end before the tools they request start; Google
ADK's ``generate_content`` span stays open over them)."""

# --- OpenInference ------------------------------------------------------------------------
OI_SPAN_KIND: Final = "openinference.span.kind"
"""OpenInference: ``TOOL``, ``AGENT``, ``LLM``, ``CHAIN``... (handoffs are TOOL spans too)."""
OI_TOOL_NAME: Final = "tool.name"
"""OpenInference: tool name."""
OI_INPUT_VALUE: Final = "input.value"
"""OpenInference: input; a JSON string, or a bare value for single-argument LangChain tools."""
OI_OUTPUT_VALUE: Final = "output.value"
"""OpenInference: output; LangChain serialises a ToolMessage here."""
OI_AGENT_NAME: Final = "agent.name"
"""OpenInference: agent name."""
OI_GRAPH_NODE_ID: Final = "graph.node.id"
"""OpenInference: a graph node's id; on an agent span without ``agent.name``, its agent (CrewAI
names the span ``<role>.<task description>.execute`` and puts the role here)."""
OI_METADATA: Final = "metadata"
"""OpenInference: the run's metadata as a JSON object (LangChain's ``lc_agent_name`` among it)."""
OI_SESSION_ID: Final = "session.id"
"""OpenInference / Langfuse: session id."""
OI_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
"""OpenInference: flattened output messages of an LLM span;
``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.function.name`` are its tool calls."""
OI_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
"""OpenInference: tokens in the prompt of an LLM span."""
OI_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
"""OpenInference: tokens in the completion of an LLM span."""
OI_MODEL_NAME: Final = "llm.model_name"
"""OpenInference: the model of an LLM span."""
OI_PROMPT_TEMPLATE: Final = "llm.prompt_template.template"
"""OpenInference: the template text itself (labelled ``tpl-<first words>-<hash>``)."""
OI_PROMPT_TEMPLATE_VERSION: Final = "llm.prompt_template.version"
"""OpenInference: the template version."""

# --- OpenLLMetry / Traceloop --------------------------------------------------------------
TL_SPAN_KIND: Final = "traceloop.span.kind"
"""OpenLLMetry: ``workflow``, ``task``, ``agent``, ``tool``."""
TL_ENTITY_NAME: Final = "traceloop.entity.name"
"""OpenLLMetry: entity (tool, agent) name."""
TL_ENTITY_PATH: Final = "traceloop.entity.path"
"""OpenLLMetry: the names of the task spans above this one, dot-separated (LangGraph nodes)."""
TL_ENTITY_INPUT: Final = "traceloop.entity.input"
"""OpenLLMetry: entity input (decorator-based tools)."""
TL_ENTITY_OUTPUT: Final = "traceloop.entity.output"
"""OpenLLMetry: entity output."""
TL_PROMPT_KEY: Final = "traceloop.prompt.key"
"""OpenLLMetry: managed prompt key."""
TL_PROMPT_VERSION: Final = "traceloop.prompt.version"
"""OpenLLMetry: managed prompt version."""
TL_SESSION_ID: Final = "traceloop.association.properties.session_id"
"""OpenLLMetry: association property used as session id."""

# --- Langfuse -----------------------------------------------------------------------------
LANGFUSE_PROMPT_NAME: Final = "langfuse.observation.prompt.name"
"""Langfuse: prompt name linked to the observation."""
LANGFUSE_PROMPT_VERSION: Final = "langfuse.observation.prompt.version"
"""Langfuse: prompt version."""

# --- OpenAI Agents SDK via Logfire ----------------------------------------------------------
LOGFIRE_FUNCTION_PREFIX: Final = "Function: "
"""Logfire: span name prefix of an openai-agents function (tool) span."""
LOGFIRE_HANDOFF_PREFIX: Final = "Handoff: "
"""Logfire: span name prefix of a handoff span (``Handoff: a -> b``; Logfire 5 names it by
its template, ``Handoff: {from_agent} → {to_agent}``)."""
LOGFIRE_AGENT_PREFIX: Final = "Agent run: "
"""Logfire: span name prefix of an agent run (``Agent run: 'triage'``; Logfire 5:
``Agent run: {name!r}``)."""
LOGFIRE_MSG: Final = "logfire.msg"
"""Logfire: the span's message, its template formatted (``Handoff: triage → billing``)."""
AGENTS_FROM_AGENT: Final = "from_agent"
"""openai-agents ``HandoffSpanData.from_agent`` as exported by Logfire."""
AGENTS_TO_AGENT: Final = "to_agent"
"""openai-agents ``HandoffSpanData.to_agent`` (``null`` until the handoff is made)."""
AGENTS_NAME: Final = "name"
"""openai-agents ``FunctionSpanData.name`` as exported by Logfire."""
AGENTS_INPUT: Final = "input"
"""openai-agents ``FunctionSpanData.input`` (raw JSON arguments)."""
AGENTS_OUTPUT: Final = "output"
"""openai-agents ``FunctionSpanData.output``."""
