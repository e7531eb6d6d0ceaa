"""Shared fixtures: the real-Prometheus helper and pytest's pytester are loaded as plugins."""

from __future__ import annotations

pytest_plugins = ["_prometheus", "pytester"]
