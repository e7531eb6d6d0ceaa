"""Embedders that ``near_duplicate_embedder`` tests name by import path."""

from __future__ import annotations

CALLS: list[str] = []


def everything_alike(text: str) -> list[float]:
    """Every text points the same way: any two multi-word texts are paraphrases."""
    CALLS.append(text)
    return [1.0, 0.0]


def broken(text: str) -> list[float]:
    """An embedder whose service is down."""
    raise ConnectionError("embedding service unreachable")


NOT_A_FUNCTION = 42
