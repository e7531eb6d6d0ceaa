"""What the LangChain integration's modules share: langchain-core, imported when it is there.

Also the forms of a call's arguments to precheck, and OpenInference's span of the current run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

try:
    from langchain_core.messages import (  # type: ignore[import-not-found, unused-ignore]
        AIMessage,
        ToolMessage,
    )
    from langchain_core.tools import (  # type: ignore[import-not-found, unused-ignore]
        BaseTool,
        StructuredTool,
        Tool,
    )
except ImportError:  # the module stays importable; using it raises ImportError
    _HAVE_LANGCHAIN = False
else:
    _HAVE_LANGCHAIN = True

__all__ = ["AIMessage", "BaseTool", "StructuredTool", "Tool", "ToolMessage"]
"""The langchain-core names the integration uses (defined only when langchain-core is there)."""


def _require_langchain() -> None:
    if not _HAVE_LANGCHAIN:
        raise ImportError("otel_loopguard.integrations.langchain needs langchain-core: "
                          "pip install langchain")


def _argument_forms(arguments: Any) -> list[Any]:
    """Return the argument forms to precheck: the call's own, and what instrumentations record.

    OpenInference records a single-string-argument LangChain tool's input as the bare value.
    """
    forms = [arguments]
    if isinstance(arguments, Mapping) and len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            forms.append(value)
    return forms


def _openinference_span() -> Any:
    """Return OpenInference's span of the current LangChain run, when it is instrumented.

    OpenInference does not make its spans current; it offers this lookup instead.
    """
    module = sys.modules.get("openinference.instrumentation.langchain")
    if module is None:
        return None
    try:
        span = module.get_current_span()
    except Exception:
        return None
    return span if span is not None and span.is_recording() else None
