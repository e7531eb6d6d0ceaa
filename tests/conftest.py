"""Shared fixtures: the real-Prometheus helper is loaded as a plugin."""

from __future__ import annotations

pytest_plugins = ["_prometheus"]
