"""Tool spans that are not tool calls, and tool calls that are handoffs.

Both tables are matched on what every path sees (the span's name and attributes), so the live
processor, ``check`` and ``serve`` read a span the same way.

Spans that are not tool calls (the adapters return nothing for them):

=====================  =============================================  =====================
tool name              when                                           why
=====================  =============================================  =====================
``(merged tools)``     any ``execute_tool`` span                      Google ADK's summary
                                                                      of a parallel batch,
                                                                      after its own spans
``final_answer``       arguments in smolagents' call envelope         smolagents ends every
                       (``sanitize_inputs_outputs``)                  run with it
=====================  =============================================  =====================

Tools that hand control to another agent (the adapters return a ``Handoff``):

=======================  ====================================  ==============================
tool name                target                                seen from
=======================  ====================================  ==============================
``transfer_to_agent``    argument ``agent_name``               Google ADK
``handoff``              argument ``to_agent``                 LlamaIndex ``AgentWorkflow``
``handoff_to_agent``     argument ``agent_name``               Strands ``Swarm``
``transfer_to_<agent>``  the name's suffix                     LangGraph handoff tools
``transfer_back_to_<a>`` the name's suffix                     LangGraph supervisor
=======================  ====================================  ==============================

``transfer_to_human...`` (a customer-service agent handing its user to people) stays a tool call,
and so does a ``transfer_to_<x>`` called with arguments of its own (``transfer_to_savings(amount=
100)``, an application's tool): a handoff tool carries only what LangGraph injects and the task.

The agent handing off is the span's agent attribute when it has one, else the agent of the
enclosing agent span (Strands writes none on its tool spans), else unknown (``""``): the
adapters read the first, ``placed_event`` and the live processor give the second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.adapters._unwrap import parse_maybe_json, unwrap_arguments
from otel_loopguard.signature import canonical_args, digest

__all__ = ["handoff_note", "handoff_target", "is_handoff_tool", "is_non_call", "is_plain_tool"]

_MERGED: Final = "(merged tools)"
_FINAL_ANSWER: Final = "final_answer"
_SMOLAGENTS_MARKER: Final = '"sanitize_inputs_outputs"'
_TARGET_ARGUMENT: Final = {"transfer_to_agent": "agent_name", "handoff": "to_agent",
                            "handoff_to_agent": "agent_name"}
"""Handoff tool → the argument naming the agent it hands to."""
_TARGET_PREFIXES: Final = ("transfer_back_to_", "transfer_to_")
"""Handoff tools named after their target (longest prefix first)."""
_NAMED: Final = frozenset({_MERGED, _FINAL_ANSWER, *_TARGET_ARGUMENT})
"""Tool names that a table above names whole; the others are told by ``_TARGET_PREFIXES``."""
_HUMAN: Final = "human"
"""A transfer to a human (customer service's ``transfer_to_human_agents``) is a tool call: no
agent of the run takes over, and calling it again and again is the agent's own loop."""


def is_plain_tool(tool: Any) -> bool:
    """Return True when no table above can match a tool of this name, whatever its arguments.

    One set test and one prefix test (every tool span asks): then neither ``is_non_call`` nor
    ``is_handoff_tool`` need be asked, nor the arguments read.
    """
    return not isinstance(tool, str) or (
        tool not in _NAMED and not tool.startswith(_TARGET_PREFIXES))


def is_non_call(tool: Any, arguments: Any) -> bool:
    """Return True when a tool span with this name and raw arguments is no tool call."""
    if tool == _MERGED:
        return True
    return (tool == _FINAL_ANSWER and isinstance(arguments, str)
            and _SMOLAGENTS_MARKER in arguments)


def is_handoff_tool(tool: Any, arguments: Any) -> bool:
    """Return True when the call hands control to another agent (see the module table)."""
    if not isinstance(tool, str):
        return False
    key = _TARGET_ARGUMENT.get(tool)
    if key is not None:
        return bool(_argument(arguments, key))
    return (tool.startswith(_TARGET_PREFIXES) and tool != "transfer_to_agent"
            and not handoff_target(tool, arguments).startswith(_HUMAN)
            and _no_call_arguments(arguments))


def handoff_target(tool: str, arguments: Any) -> str:
    """Return the agent a handoff tool call hands control to (``""`` when not found)."""
    key = _TARGET_ARGUMENT.get(tool)
    if key is not None:
        return _argument(arguments, key)
    for prefix in _TARGET_PREFIXES:
        if tool.startswith(prefix):
            return tool.removeprefix(prefix)
    return ""


def handoff_note(tool: str, arguments: Any) -> str:
    """Return a digest of what a handoff tool's call carries besides its target, or ``""``.

    Strands' ``handoff_to_agent(agent_name, message, context)``: the message and context
    handed over. ADK's ``transfer_to_agent(agent_name)`` carries nothing else.
    """
    value = _parsed(arguments)
    if not isinstance(value, Mapping):
        return ""
    key = _TARGET_ARGUMENT.get(tool)
    rest = {str(k): v for k, v in value.items() if k != key and v not in (None, "", {}, [])}
    if not rest:
        return ""
    # its canonical form: volatile text masked (LlamaIndex's ``ctx`` holds a fresh address)
    return digest(canonical_args(rest)[1])


_HANDOFF_PAYLOAD: Final = frozenset({"tool_call_id", "state", "runtime", "config", "store",
                                      "messages", "task_description"})
"""What a LangGraph ``transfer_to_<agent>`` tool may carry: what LangGraph injects (the call
id, the graph's state, LangChain 1.x's ``ToolRuntime``, the config, the store, the messages)
and the task it hands over. A ``transfer_to_<x>`` tool called with other arguments
(``transfer_to_savings(amount=100)``) is a tool of the application, not a handoff."""


def _no_call_arguments(arguments: Any) -> bool:
    """Return whether a ``transfer_to_<x>`` call carries no argument of an ordinary tool."""
    value = _parsed(arguments)
    if not isinstance(value, Mapping):
        return True  # not captured (or not a mapping): read by its name, as before
    return all(k in _HANDOFF_PAYLOAD for k in value)


def _parsed(arguments: Any) -> Any:
    """Return a tool span's arguments out of their envelope, a JSON text parsed."""
    value = unwrap_arguments(arguments)
    return parse_maybe_json(value) if isinstance(value, str) else value


def _argument(arguments: Any, key: str) -> str:
    value = _parsed(arguments)
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, str) else ""
