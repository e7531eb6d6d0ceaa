"""``LoopGuardConfig``: every setting, from code, a TOML file or ``LOOPGUARD_*`` variables.

Precedence, highest first: an explicit argument, a ``LOOPGUARD_*`` environment variable, the
TOML file (``LOOPGUARD_CONFIG_FILE`` or ``config_file=``), then the ``_DEFAULT_*`` values.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from otel_loopguard import environment_variables as _env
from otel_loopguard._config_fields import FIELDS, TOOL_THRESHOLDS, FieldRule, parse_env_value
from otel_loopguard.exceptions import ConfigError

__all__ = ["LoopGuardConfig", "ToolKind", "ToolOverride"]

ToolKind = Literal["read", "mutating", "poll", "exempt", "default"]
_TOOL_KINDS: Final = ("read", "mutating", "poll", "exempt", "default")
_ENV_PREFIX: Final = "LOOPGUARD_"
_IMPORT_PATH: Final = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
"""``module:function`` (dotted names on both sides), the form of ``near_duplicate_embedder``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOverride:
    """Per-tool settings: a kind and any threshold of ``LoopGuardConfig``."""

    kind: ToolKind | None = None
    """``read``, ``mutating``, ``poll``, ``exempt`` or ``default``; None keeps the inferred kind."""
    thresholds: Mapping[str, Any] = field(default_factory=dict)
    """Threshold name → value, e.g. ``{"stagnation_warn": 5}``."""


def _defaults() -> dict[str, Any]:
    return {name: rule.default for name, rule in FIELDS.items()}


@dataclass(frozen=True, kw_only=True)
class LoopGuardConfig:
    """All of loopguard's settings, frozen and validated at construction.

    Build it with ``LoopGuardConfig(**values)`` (unset names take their defaults),
    ``LoopGuardConfig.from_file(path)``, ``LoopGuardConfig.from_env(environ)`` or
    ``LoopGuardConfig.load(...)`` which merges argument > env > file > default. Every setting,
    its default, range and environment variable is listed in ``docs/configuration.md``.

    Raises:
        ConfigError: naming the setting and its allowed values, for unknown names or bad values.
    """

    values: Mapping[str, Any] = field(default_factory=_defaults)
    """Every scalar setting by name (validated)."""
    tools: Mapping[str, ToolOverride] = field(default_factory=dict)
    """Per-tool overrides by tool name."""

    def __post_init__(self) -> None:
        """Validate every value and fill in defaults."""
        merged = _defaults()
        for name, value in self.values.items():
            merged[name] = _validate(name, value)
        _check_ladders(merged)
        embedder = merged["near_duplicate_embedder"]
        if embedder and _IMPORT_PATH.fullmatch(embedder) is None:
            raise ConfigError("near_duplicate_embedder must be an import path module:function "
                              f"(e.g. mypackage.embeddings:embed), got {embedder!r}")
        unknown = sorted(set(merged["detectors"]) - set(FIELDS["detectors"].default))
        if unknown:
            raise ConfigError(f"detectors: unknown detector {unknown[0]!r}; known detectors are "
                              f"{', '.join(FIELDS['detectors'].default)}")
        tools = {str(k): _validate_tool(str(k), v) for k, v in self.tools.items()}
        for tool, override in tools.items():  # a tool's ladders, with its overrides in place
            if override.thresholds:
                _check_ladders({**merged, **override.thresholds}, f"tools.{tool}.",
                               set(override.thresholds))
        object.__setattr__(self, "values", MappingProxyType(merged))
        object.__setattr__(self, "tools", MappingProxyType(tools))
        for name, value in merged.items():  # plain attributes: read on every tool call
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        """Return the setting ``name``."""
        try:
            return object.__getattribute__(self, "values")[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def create(cls, *, tools: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
               **values: Any) -> LoopGuardConfig:
        """Return a config from keyword settings, e.g. ``create(mode="enforce")``."""
        return cls(values=values, tools=dict(tools or {}))  # type: ignore[arg-type]  # validated

    def replace(self, **values: Any) -> LoopGuardConfig:
        """Return a copy with some settings changed."""
        tools = values.pop("tools", self.tools)
        return LoopGuardConfig(values={**self.values, **values}, tools=tools)

    def threshold(self, tool: str, name: str) -> Any:
        """Return threshold ``name`` for ``tool``, honouring per-tool overrides."""
        if self.tools:
            override = self.tools.get(tool)
            if override is not None and name in override.thresholds:
                return override.thresholds[name]
        return self.values[name]

    def tool_kind(self, tool: str) -> str | None:
        """Return the configured kind of ``tool``, or None when it is not configured."""
        override = self.tools.get(tool)
        return override.kind if override is not None else None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "config") -> LoopGuardConfig:
        """Return a config from a mapping shaped like the TOML file."""
        if "loopguard" in data:
            extra = sorted(set(data) - {"loopguard"})
            if extra:
                raise ConfigError(f"{source}: unknown setting {extra[0]!r} outside the "
                                  "[loopguard] table; put every setting inside it")
        data = dict(data.get("loopguard", data))
        raw_tools = data.pop("tools", {}) or {}
        if not isinstance(raw_tools, Mapping):
            raise ConfigError(f"{source}: tools must be a table of tool name -> settings")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ConfigError(f"{source}: unknown setting {unknown[0]!r}; known settings are "
                              "listed in docs/configuration.md")
        return cls(values=data, tools=dict(raw_tools))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LoopGuardConfig:
        """Return a config read from a TOML file (top level or a ``[loopguard]`` table)."""
        return cls.from_mapping(_read_toml(path), source=str(path))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoopGuardConfig:
        """Return a config from ``LOOPGUARD_*`` variables only (defaults elsewhere)."""
        return cls(values=_env_values(os.environ if environ is None else environ),
                   tools=_env_tools(os.environ if environ is None else environ))

    @classmethod
    def load(cls, config_file: str | os.PathLike[str] | None = None,
             environ: Mapping[str, str] | None = None, **overrides: Any) -> LoopGuardConfig:
        """Return a config merged from arguments > env > file > defaults.

        Args:
            config_file: TOML file; default ``LOOPGUARD_CONFIG_FILE`` when set.
            environ: the environment; default ``os.environ``.
            **overrides: explicit settings, which win over everything else.
        """
        env = os.environ if environ is None else environ
        path = config_file or env.get(_env.LOOPGUARD_CONFIG_FILE) or None
        base = cls.from_file(path) if path else cls()
        values = {**base.values, **_env_values(env), **overrides}
        tools: dict[str, Any] = dict(base.tools)
        for tool, override in _env_tools(env).items():  # env sets the kind, keeps thresholds
            kept = base.tools.get(tool)
            tools[tool] = ToolOverride(kind=override.kind,
                                       thresholds=kept.thresholds if kept else {})
        tools.update(overrides.pop("tools", {}))
        values.pop("tools", None)
        return cls(values=values, tools=tools)


def _read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _validate(name: str, value: Any) -> Any:
    rule = FIELDS.get(name)
    if rule is None:
        raise ConfigError(f"unknown setting {name!r}; known settings are listed in "
                          "docs/configuration.md")
    return rule.check(name, value)


def _check_ladders(values: dict[str, Any], prefix: str = "",
                   own: set[str] | None = None) -> None:
    """Reject a ladder whose higher step comes before its lower one.

    ``prefix`` and ``own`` are for a tool's table: its name, and the settings it sets itself
    (the others are the global values, which the message then says).
    """
    for low, high in (("stagnation_warn", "stagnation_replan"), ("stagnation_replan",
                      "stagnation_stop"), ("repeat_warn", "repeat_replan"),
                      ("cycle_warn", "cycle_stop"), ("poll_warn", "poll_stop"),
                      ("failure_permanent_warn", "failure_permanent_stop"),
                      ("failure_retryable_warn", "failure_retryable_stop"),
                      ("mutating_failure_warn", "mutating_failure_stop")):
        lo, hi = values[low], values[high]
        if lo is not None and hi is not None and hi < lo:
            inherited = own is not None and high not in own
            raise ConfigError(f"{prefix}{high} must be >= {low} ({lo}), got {hi}"
                              + (f" (the global {high}; set it for this tool too)"
                                 if inherited else ""))


def _validate_tool(tool: str, value: Any) -> ToolOverride:
    if isinstance(value, ToolOverride):
        kind, thresholds = value.kind, dict(value.thresholds)
    elif isinstance(value, Mapping):
        thresholds = dict(value)
        kind = thresholds.pop("kind", None)
    else:
        raise ConfigError(f"tools.{tool} must be a table, got {type(value).__name__}")
    if kind is not None and kind not in _TOOL_KINDS:
        raise ConfigError(f"tools.{tool}.kind must be one of {_TOOL_KINDS}, got {kind!r}")
    checked: dict[str, Any] = {}
    for name, item in thresholds.items():
        if name not in TOOL_THRESHOLDS:
            raise ConfigError(f"tools.{tool}: unknown setting {name!r}; per-tool settings are "
                              f"kind and {', '.join(sorted(TOOL_THRESHOLDS))}")
        checked[name] = FIELDS[name].check(f"tools.{tool}.{name}", item)
    return ToolOverride(kind=kind, thresholds=checked)


def _env_values(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, rule in FIELDS.items():
        raw = environ.get(_ENV_PREFIX + name.upper())
        if raw is not None and raw.strip() != "":
            var = _ENV_PREFIX + name.upper()
            values[name] = rule.check(var, parse_env_value(var, rule, raw))
    return values


def _env_tools(environ: Mapping[str, str]) -> dict[str, ToolOverride]:
    """Parse ``LOOPGUARD_TOOL_KINDS="poll_job=poll,deploy=mutating"``."""
    raw = environ.get(_env.LOOPGUARD_TOOL_KINDS, "").strip()
    tools: dict[str, ToolOverride] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        tool, sep, kind = item.partition("=")
        if not sep or kind.strip() not in _TOOL_KINDS:
            raise ConfigError(f"LOOPGUARD_TOOL_KINDS entries must look like tool=kind with kind "
                              f"one of {_TOOL_KINDS}, got {item!r}")
        tools[tool.strip()] = ToolOverride(kind=kind.strip())  # type: ignore[arg-type]  # checked
    return tools


def field_rules() -> Mapping[str, FieldRule]:
    """Return the rule (type, default, range, doc) of every setting; used by the docs test."""
    return FIELDS

