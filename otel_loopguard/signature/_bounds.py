"""How far a signature reads a value: the bounds that keep its time and memory fixed."""

from __future__ import annotations

from typing import Final

_DEFAULT_MAX_VALUE_CHARS: Final = 4096
"""Strings longer than this are replaced by their hash (``max_value_chars``)."""
_MAX_DEPTH: Final = 32
"""Containers deeper than this are signed as a digest of their JSON."""
_MAX_ITEMS: Final = 2048
"""Items kept per container; the rest are folded into one hash so time stays bounded."""
_CONTAINERS: Final = frozenset({dict, list})
"""The types of parsed JSON that the walks go into."""
