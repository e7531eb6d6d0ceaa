"""Shared fixtures: the real-Prometheus helper and pytest's pytester are loaded as plugins, the
compiled OTLP decoder is ``wire``;
``--heavy`` runs the load tests marked ``heavy`` (minutes each; their figures are in
docs/deployment.md); ``--network`` the documentation examples marked ``network``."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from _compiled import compiled

pytest_plugins = ["_prometheus", "pytester"]


@pytest.fixture(scope="module", name="wire")
def _wire(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled OTLP decoder (``otlp/_wire.c``): the installed one, else one built from the
    source now (the test skips only when this machine cannot compile it)."""
    return compiled("otel_loopguard/otlp/_wire.c", tmp_path_factory)


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
