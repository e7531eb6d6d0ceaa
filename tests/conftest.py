"""Shared fixtures: the real-Prometheus helper and pytest's pytester are loaded as plugins;
``--heavy`` runs the load tests marked ``heavy`` (minutes each; their figures are in
docs/deployment.md); ``--network`` the documentation examples marked ``network``."""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["_prometheus", "pytester"]


def pytest_addoption(parser: Any) -> None:
    """Add ``--heavy``."""
    parser.addoption("--heavy", action="store_true",
                     help="also run the heavy load and memory tests (minutes)")
    parser.addoption("--network", action="store_true",
                     help="also run the documentation examples that need the network")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Skip the ``heavy`` tests unless ``--heavy`` is given, ``network`` unless ``--network``."""
    for marker, reason in (("heavy", "heavy load test: run with --heavy"),
                           ("network", "needs the network: run with --network")):
        if config.getoption(f"--{marker}"):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
