"""The scripted LangChain chat model the enforce tests loop with (imports LangChain: import it
only where LangChain is installed)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import BaseMessage
from pydantic import Field


class ScriptedChat(FakeMessagesListChatModel):
    """FakeMessagesListChatModel that accepts bind_tools and remembers what it was sent."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)
