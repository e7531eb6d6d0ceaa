"""Shared fixtures: the real-Prometheus helper and pytest's pytester are loaded as plugins;
``--heavy`` runs the load tests marked ``heavy`` (minutes each; their figures are in
docs/deployment.md)."""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["_prometheus", "pytester"]


def pytest_addoption(parser: Any) -> None:
    """Add ``--heavy``."""
    parser.addoption("--heavy", action="store_true",
                     help="also run the heavy load and memory tests (minutes)")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Skip the ``heavy`` tests unless ``--heavy`` is given."""
    if config.getoption("--heavy"):
        return
    skip = pytest.mark.skip(reason="heavy load test: run with --heavy")
    for item in items:
        if "heavy" in item.keywords:
            item.add_marker(skip)
