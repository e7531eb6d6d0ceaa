"""``LoopGuardConfig``: every setting, from code, a TOML file or ``LOOPGUARD_*`` variables.

Precedence, highest first: an explicit argument, a ``LOOPGUARD_*`` environment variable, the
TOML file (``LOOPGUARD_CONFIG_FILE`` or ``config_file=``), then the ``_DEFAULT_*`` values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from otel_loopguard import environment_variables as _env
from otel_loopguard.config._fields import FIELDS, TOOL_THRESHOLDS, FieldRule, did_you_mean
from otel_loopguard.config._tables import (
    DEFAULT_ORIGIN,
    ModelPrice,
    ToolKind,
    ToolOverride,
    check_ladders,
    check_template_table,
    env_tools,
    env_values,
    read_toml,
    unknown_setting,
    validate,
    validate_price,
    validate_template,
    validate_tool,
    variable,
)
from otel_loopguard.exceptions import ConfigError, UnknownSettingError

__all__ = ["LoopGuardConfig", "ModelPrice", "ToolKind", "ToolOverride"]

_NO_BUDGETS: Final[Mapping[str, Any]] = MappingProxyType({})


def _defaults() -> dict[str, Any]:
    return {name: rule.default for name, rule in FIELDS.items()}


@dataclass(frozen=True, kw_only=True)
class LoopGuardConfig:
    """All of loopguard's settings, frozen and validated at construction.

    Build it with ``LoopGuardConfig.create(**settings)`` (unset names take their defaults;
    ``LoopGuardConfig()`` has every default), ``LoopGuardConfig.from_file(path)``,
    ``LoopGuardConfig.from_env(environ)`` or ``LoopGuardConfig.load(...)`` which merges
    argument > env > file > default. The constructor itself takes the validated tables
    (``values=``, ``tools=``, ``templates=``, ``prices=``), not settings by name. Every setting,
    its default, range and environment variable is listed in ``docs/configuration.md``.

    Raises:
        ConfigError: naming the setting and its allowed values, for unknown names or bad values.
    """

    values: Mapping[str, Any] = field(default_factory=_defaults)
    """Every scalar setting by name (validated)."""
    tools: Mapping[str, ToolOverride] = field(default_factory=dict)
    """Per-tool overrides by tool name."""
    templates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per-prompt-template budgets: template name → budget setting → value."""
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """Model name (``gen_ai.response.model`` or ``gen_ai.request.model``) → its token prices,
    for ``loopguard_wasted_cost_total``."""

    def __post_init__(self) -> None:
        """Validate every value and fill in defaults."""
        # None is no table; a list or a number is refused, naming the table
        tables = {name: _table(name, getattr(self, name), shape)
                  for name, shape in _TABLES.items()}
        given = _table("values", self.values, "setting name -> value")
        merged = _defaults()
        for name, value in given.items():
            merged[name] = validate(name, value)
        check_ladders(merged, origins=_unset(given))
        tools = {str(k): validate_tool(str(k), v) for k, v in tables["tools"].items()}
        for tool, override in tools.items():  # a tool's ladders, with its overrides in place
            if override.thresholds:
                check_ladders({**merged, **override.thresholds}, f"tools.{tool}.",
                               set(override.thresholds))
        templates = {str(k): validate_template(str(k), v, merged)
                     for k, v in tables["templates"].items()}
        object.__setattr__(self, "values", MappingProxyType(merged))
        object.__setattr__(self, "tools", MappingProxyType(tools))
        object.__setattr__(self, "templates", MappingProxyType(templates))
        prices = {str(k): validate_price(str(k), v) for k, v in tables["prices"].items()}
        object.__setattr__(self, "prices", MappingProxyType(prices))
        for name, value in merged.items():  # plain attributes: read on every tool call
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        """Return the setting ``name``."""
        try:
            return object.__getattribute__(self, "values")[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}"
                                 f"{did_you_mean(name, FIELDS)}; known settings are listed "
                                 "in docs/configuration.md") from None

    @classmethod
    def create(cls, *, tools: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
               templates: Mapping[str, Mapping[str, Any]] | None = None,
               prices: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None,
               **values: Any) -> LoopGuardConfig:
        """Return a config from keyword settings, e.g. ``create(mode="enforce")``.

        ``templates`` maps a prompt template's name to its budgets, e.g.
        ``{"coding-agent": {"max_tool_calls_warn": 150}}``; ``prices`` a model's name to its
        token prices, e.g. ``{"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}}``.
        """
        return cls(values=values, tools=_table("tools", tools, _TABLES["tools"]),
                   templates=_table("templates", templates, _TABLES["templates"]),
                   prices=_table("prices", prices, _TABLES["prices"]))

    def replace(self, **values: Any) -> LoopGuardConfig:
        """Return a copy with some settings changed (``tools=None`` and the like drop a table)."""
        tools = values.pop("tools", self.tools)
        templates = values.pop("templates", self.templates)
        prices = values.pop("prices", self.prices)
        return LoopGuardConfig(values={**self.values, **values}, tools=tools,
                               templates=templates, prices=prices)

    def threshold(self, tool: str, name: str) -> Any:
        """Return threshold ``name`` for ``tool``, honouring per-tool overrides.

        Raises:
            ConfigError: (also a ``KeyError``) when ``name`` is no setting; the message lists
                the per-tool thresholds.
        """
        if self.tools:
            override = self.tools.get(tool)
            if override is not None and name in override.thresholds:
                return override.thresholds[name]
        try:
            return self.values[name]
        except KeyError:
            raise _unknown_threshold(name) from None

    def template_budgets(self, template: str | None) -> Mapping[str, Any]:
        """Return the budgets set for prompt template ``template`` (empty when none are).

        A run's template is ``name@version`` or ``name``: the table of that exact identity
        wins, else the table of its name, so ``[loopguard.templates."coding-agent"]`` covers
        every version of ``coding-agent``.
        """
        table = self.template_table(template)
        return _NO_BUDGETS if table is None else self.templates[table]

    def template_table(self, template: str | None) -> str | None:
        """Return the name of the ``templates`` table that applies to ``template``, or None."""
        if not self.templates or not template:
            return None
        if template in self.templates:
            return template
        name = template.rpartition("@")[0]
        return name if name and name in self.templates else None

    def budget(self, template: str | None, name: str, tool: str | None = None) -> Any:
        """Return budget setting ``name`` for a run of ``template`` and, if given, ``tool``.

        A tool's own table wins (per-tool budgets), then the template's, then the global value.
        """
        if tool is not None and self.tools:
            override = self.tools.get(tool)
            if override is not None and name in override.thresholds:
                return override.thresholds[name]
        try:
            return self.template_budgets(template).get(name, self.values[name])
        except KeyError:
            raise _unknown_threshold(name) from None

    def price(self, models: tuple[str, ...]) -> ModelPrice | None:
        """Return the prices of the first of ``models`` that ``prices`` lists, or None."""
        prices = self.prices
        for model in models:
            found = prices.get(model)
            if found is not None:
                return found
        return None

    def tool_kind(self, tool: str) -> str | None:
        """Return the configured kind of ``tool``, or None when it is not configured."""
        override = self.tools.get(tool)
        return override.kind if override is not None else None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "config") -> LoopGuardConfig:
        """Return a config from a mapping shaped like the TOML file."""
        values, tools, templates, prices = _file_parts(data, source)
        _check_ladders_from(values, {name: f"from {source}" for name in values})
        return cls(values=values, tools=tools, templates=templates, prices=prices)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LoopGuardConfig:
        """Return a config read from a TOML file (top level or a ``[loopguard]`` table)."""
        return cls.from_mapping(read_toml(path), source=str(path))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoopGuardConfig:
        """Return a config from ``LOOPGUARD_*`` variables only (defaults elsewhere)."""
        env = os.environ if environ is None else environ
        values = env_values(env)
        _check_ladders_from(values, {name: f"from {variable(name)}" for name in values})
        return cls(values=values, tools=env_tools(env))

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
        named = env.get(_env.LOOPGUARD_CONFIG_FILE, "")
        path = config_file or (named if named.strip() else None)  # blank counts as unset
        # The file's parts are merged before they are validated together: its ladders and its
        # tools' and templates' tables are checked against the merged values, not its own.
        file_values, file_tools, file_templates, file_prices = (
            _file_parts(read_toml(path), str(path)) if path else ({}, {}, {}, {}))
        kept_tools = {str(k): validate_tool(str(k), v) for k, v in file_tools.items()}
        tools: dict[str, Any] = dict(kept_tools)
        for tool, override in env_tools(env).items():  # env sets the kind, keeps the rest
            kept = kept_tools.get(tool)
            tools[tool] = replace(kept, kind=override.kind) if kept else override
        tables = {name: _table(name, overrides.pop(name, None), shape)
                  for name, shape in _TABLES.items()}
        from_env = env_values(env)
        values = {**file_values, **from_env, **overrides}
        _check_ladders_from(values, {**{name: f"from {path}" for name in file_values},
                                     **{name: f"from {variable(name)}" for name in from_env}})
        tools.update(tables["tools"])
        return cls(values=values, tools=tools,
                   templates={**file_templates, **tables["templates"]},
                   prices={**file_prices, **tables["prices"]})


def _file_parts(data: Mapping[str, Any], source: str) -> tuple[
        dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Return a TOML file's settings, tools, templates and prices, its shape checked.

    Each setting, tool, template and price is checked on its own here, so that an error names
    the file (``loopguard.toml: stagnation_warn must be ...``); how they fit together (ladders,
    the templates' budgets against the global ones) is checked by the ``LoopGuardConfig`` they
    go into, merged with the environment and arguments.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source} must be a mapping of setting name -> value, shaped like "
                          f"the TOML file, got {type(data).__name__}")
    if "loopguard" in data:
        extra = sorted(set(data) - {"loopguard"})
        if extra:
            raise ConfigError(f"{source}: unknown setting {extra[0]!r} outside the "
                              "[loopguard] table; put every setting inside it")
        if not isinstance(data["loopguard"], Mapping):  # `loopguard = 3`, `[[loopguard]]`
            raise ConfigError(f"{source}: loopguard must be the [loopguard] table of settings, "
                              f"got {type(data['loopguard']).__name__}")
    data = dict(data.get("loopguard", data))
    raw_tools = data.pop("tools", {})  # 0, [] or false is no table either
    if not isinstance(raw_tools, Mapping):
        raise ConfigError(f"{source}: tools must be a table of tool name -> settings")
    raw_templates = data.pop("templates", {})
    if not isinstance(raw_templates, Mapping):
        raise ConfigError(f"{source}: templates must be a table of prompt template name "
                          "-> budgets")
    raw_prices = data.pop("prices", {})
    if not isinstance(raw_prices, Mapping):
        raise ConfigError(f"{source}: prices must be a table of model name -> prices")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{source}: {unknown_setting(unknown[0])}")
    try:
        _check_each(data, raw_tools, raw_templates, raw_prices)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return data, dict(raw_tools), dict(raw_templates), dict(raw_prices)


def _check_each(values: Mapping[str, Any], tools: Mapping[str, Any],
                templates: Mapping[str, Any], prices: Mapping[str, Any]) -> None:
    """Check each setting, tool, template and price of a file on its own (not the ladders)."""
    for name, value in values.items():
        validate(name, value)
    for tool, settings in tools.items():
        validate_tool(str(tool), settings)
    for template, budgets in templates.items():
        check_template_table(str(template), budgets)
    for model, price in prices.items():
        validate_price(str(model), price)


def _unset(given: Mapping[str, Any]) -> dict[str, str]:
    """Return ``DEFAULT_ORIGIN`` for each setting that ``given`` leaves out."""
    return {name: DEFAULT_ORIGIN for name in FIELDS if name not in given}


def _check_ladders_from(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """Check the ladders of settings read from a file or variables, before the config is built.

    So that a misordered ladder's message says where each of its values came from (``origins``
    by setting; what ``values`` leaves out is the default). The config built from them checks
    the same ladders again, and finds them in order.
    """
    merged = _defaults()
    merged.update((name, validate(name, value)) for name, value in values.items())
    check_ladders(merged, origins={**_unset(values), **origins})


def field_rules() -> Mapping[str, FieldRule]:
    """Return the rule (type, default, range, doc) of every setting; used by the docs test."""
    return FIELDS


_TABLES: Final = {"tools": "tool name -> settings",
                   "templates": "prompt template name -> budgets",
                   "prices": "model name -> prices"}
"""The tables a config takes beside its settings, and what each maps, for error messages."""


def _table(name: str, value: Any, shape: str) -> dict[Any, Any]:
    """Return a ``tools``, ``templates`` or ``prices`` argument as a dict (None: empty).

    Raises:
        ConfigError: naming the table, when ``value`` is no mapping.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a mapping of {shape}, got {type(value).__name__}")
    return dict(value)


def _unknown_threshold(name: str) -> UnknownSettingError:
    """Return the error for ``threshold(tool, name)`` or ``budget`` of no setting's name."""
    return UnknownSettingError(f"unknown threshold {name!r}{did_you_mean(name, FIELDS)}; the "
                               f"per-tool thresholds are {', '.join(sorted(TOOL_THRESHOLDS))}")
