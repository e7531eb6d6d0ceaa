"""``LoopGuardConfig``: every setting, from code, a TOML file or ``LOOPGUARD_*`` variables.

Precedence, highest first: an explicit argument, a ``LOOPGUARD_*`` environment variable, the
TOML file (``LOOPGUARD_CONFIG_FILE`` or ``config_file=``), then the ``_DEFAULT_*`` values.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from otel_loopguard import environment_variables as _env
from otel_loopguard.config._fields import (
    BUDGET_LADDERS,
    FIELDS,
    TEMPLATE_THRESHOLDS,
    TOOL_KINDS,
    TOOL_THRESHOLDS,
    FieldRule,
    parse_env_value,
)
from otel_loopguard.exceptions import ConfigError

__all__ = ["LoopGuardConfig", "ModelPrice", "ToolKind", "ToolOverride"]

ToolKind = Literal["read", "mutating", "poll", "exempt", "default"]
_TOOL_KINDS: Final = TOOL_KINDS
_TOOL_FLAGS: Final = ("shell", "editor")
_ENV_PREFIX: Final = "LOOPGUARD_"
_NO_BUDGETS: Final[Mapping[str, Any]] = MappingProxyType({})
_CURRENCY: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")
"""A currency code (``USD``, ``EUR``, ``credits``): it becomes a metric label value."""
_PRICE_KEYS: Final = ("input_per_million", "output_per_million", "currency")
_IMPORT_PATH: Final = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
"""``module:function`` (dotted names on both sides), the form of ``near_duplicate_embedder``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOverride:
    """Per-tool settings: a kind, how its calls are read, and any threshold of the config."""

    kind: ToolKind | None = None
    """``read``, ``mutating``, ``poll``, ``exempt`` or ``default``; None keeps the inferred kind.

    A kind set here wins over everything, including the per-call kinds of shell tools."""
    thresholds: Mapping[str, Any] = field(default_factory=dict)
    """Threshold name → value, e.g. ``{"stagnation_warn": 5}``."""
    shell: bool | None = None
    """True: calls are shell commands, classified per call; False: never (even when listed in
    ``shell_tools`` or named like a command); None: as ``shell_tools`` says."""
    editor: bool | None = None
    """True: calls are editor calls, classified by their subcommand; False: never; None: as
    ``editor_tools`` says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """What a model's tokens cost: per million input and output tokens, in one currency."""

    input_per_million: float = 0.0
    """Price of one million input (prompt) tokens."""
    output_per_million: float = 0.0
    """Price of one million output (completion) tokens."""
    currency: str = "USD"
    """The currency (``USD``, ``EUR``...), the ``currency`` label of
    ``loopguard_wasted_cost_total``."""

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Return what ``input_tokens`` and ``output_tokens`` of this model cost."""
        return (input_tokens * self.input_per_million
                + output_tokens * self.output_per_million) / 1_000_000


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
    templates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per-prompt-template budgets: template name → budget setting → value."""
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """Model name (``gen_ai.response.model`` or ``gen_ai.request.model``) → its token prices,
    for ``loopguard_wasted_cost_total``."""

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
        templates = {str(k): _validate_template(str(k), v, merged)
                     for k, v in self.templates.items()}
        object.__setattr__(self, "values", MappingProxyType(merged))
        object.__setattr__(self, "tools", MappingProxyType(tools))
        object.__setattr__(self, "templates", MappingProxyType(templates))
        prices = {str(k): _validate_price(str(k), v) for k, v in self.prices.items()}
        object.__setattr__(self, "prices", MappingProxyType(prices))
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
               templates: Mapping[str, Mapping[str, Any]] | None = None,
               prices: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None,
               **values: Any) -> LoopGuardConfig:
        """Return a config from keyword settings, e.g. ``create(mode="enforce")``.

        ``templates`` maps a prompt template's name to its budgets, e.g.
        ``{"coding-agent": {"max_tool_calls_warn": 150}}``; ``prices`` a model's name to its
        token prices, e.g. ``{"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}}``.
        """
        return cls(values=values, tools=dict(tools or {}),  # type: ignore[arg-type]  # validated
                   templates=dict(templates or {}),
                   prices=dict(prices or {}))  # type: ignore[arg-type]  # validated

    def replace(self, **values: Any) -> LoopGuardConfig:
        """Return a copy with some settings changed."""
        tools = values.pop("tools", self.tools)
        templates = values.pop("templates", self.templates)
        prices = values.pop("prices", self.prices)
        return LoopGuardConfig(values={**self.values, **values}, tools=tools,
                               templates=templates, prices=prices)

    def threshold(self, tool: str, name: str) -> Any:
        """Return threshold ``name`` for ``tool``, honouring per-tool overrides."""
        if self.tools:
            override = self.tools.get(tool)
            if override is not None and name in override.thresholds:
                return override.thresholds[name]
        return self.values[name]

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
        return self.template_budgets(template).get(name, self.values[name])

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
        if "loopguard" in data:
            extra = sorted(set(data) - {"loopguard"})
            if extra:
                raise ConfigError(f"{source}: unknown setting {extra[0]!r} outside the "
                                  "[loopguard] table; put every setting inside it")
        data = dict(data.get("loopguard", data))
        raw_tools = data.pop("tools", {}) or {}
        if not isinstance(raw_tools, Mapping):
            raise ConfigError(f"{source}: tools must be a table of tool name -> settings")
        raw_templates = data.pop("templates", {}) or {}
        if not isinstance(raw_templates, Mapping):
            raise ConfigError(f"{source}: templates must be a table of prompt template name "
                              "-> budgets")
        raw_prices = data.pop("prices", {}) or {}
        if not isinstance(raw_prices, Mapping):
            raise ConfigError(f"{source}: prices must be a table of model name -> prices")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ConfigError(f"{source}: unknown setting {unknown[0]!r}; known settings are "
                              "listed in docs/configuration.md")
        return cls(values=data, tools=dict(raw_tools), templates=dict(raw_templates),
                   prices=dict(raw_prices))

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
        for tool, override in _env_tools(env).items():  # env sets the kind, keeps the rest
            kept = base.tools.get(tool)
            tools[tool] = replace(kept, kind=override.kind) if kept else override
        tools.update(overrides.pop("tools", {}))
        values.pop("tools", None)
        templates = {**base.templates, **values.pop("templates", {})}
        prices = {**base.prices, **values.pop("prices", {})}
        return cls(values=values, tools=tools, templates=templates, prices=prices)


def _read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    # Imported here: ``check`` and ``serve`` without a config file never pay for the TOML
    # parser's import (its regular expressions are ~3 % of ``check``'s start-up).
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 text (byte 0x{byte:02x} at offset "
                          f"{exc.start})") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


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
        flags = {"shell": value.shell, "editor": value.editor}
    elif isinstance(value, Mapping):
        thresholds = dict(value)
        kind = thresholds.pop("kind", None)
        flags = {name: thresholds.pop(name, None) for name in _TOOL_FLAGS}
    else:
        raise ConfigError(f"tools.{tool} must be a table, got {type(value).__name__}")
    if kind is not None and kind not in _TOOL_KINDS:
        raise ConfigError(f"tools.{tool}.kind must be one of {_TOOL_KINDS}, got {kind!r}")
    for name, flag in flags.items():
        if flag is not None and not isinstance(flag, bool):
            raise ConfigError(f"tools.{tool}.{name} must be true or false, got {flag!r}")
    if flags["shell"] and flags["editor"]:
        raise ConfigError(f"tools.{tool}: shell and editor cannot both be true")
    checked = _checked(f"tools.{tool}", thresholds, TOOL_THRESHOLDS, "per-tool settings are "
                       f"kind, shell, editor and {', '.join(sorted(TOOL_THRESHOLDS))}")
    return ToolOverride(kind=kind, thresholds=checked, shell=flags["shell"],
                        editor=flags["editor"])


def _checked(where: str, values: Mapping[str, Any], allowed: frozenset[str],
             known: str) -> dict[str, Any]:
    """Return the values of table ``where`` validated; ``known`` says which names it takes."""
    checked: dict[str, Any] = {}
    for name, item in values.items():
        if name not in allowed:
            raise ConfigError(f"{where}: unknown setting {name!r}; {known}")
        checked[name] = FIELDS[name].check(f"{where}.{name}", item)
    return checked


def _validate_template(template: str, value: Any, merged: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a template's checked budgets; its ladders climb with the global values in place."""
    where = f"templates.{template}"
    if not template:
        raise ConfigError("templates: a prompt template name must not be empty")
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table of budgets, got {type(value).__name__}")
    checked = _checked(where, value, TEMPLATE_THRESHOLDS, "per-template settings are "
                       f"{', '.join(sorted(TEMPLATE_THRESHOLDS))}")
    effective = {**merged, **checked}
    for low, high in BUDGET_LADDERS:
        lo, hi = effective[low], effective[high]
        if (low in checked or high in checked) and lo is not None and hi is not None and hi < lo:
            inherited = low if low not in checked else high if high not in checked else None
            raise ConfigError(f"{where}.{high} must be >= {low} ({lo}), got {hi}"
                              + (f" (the global {inherited}; set it for this template too)"
                                 if inherited else ""))
    return MappingProxyType(checked)


def _validate_price(model: str, value: Any) -> ModelPrice:
    """Return a model's checked prices (``prices.<model>``: two numbers and a currency)."""
    where = f"prices.{model}"
    if not model:
        raise ConfigError("prices: a model name must not be empty")
    if isinstance(value, ModelPrice):
        value = {"input_per_million": value.input_per_million,
                 "output_per_million": value.output_per_million, "currency": value.currency}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table of input_per_million, output_per_million "
                          f"and currency, got {type(value).__name__}")
    unknown = sorted(set(value) - set(_PRICE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown setting {unknown[0]!r}; a price table takes "
                          f"{', '.join(_PRICE_KEYS)}")
    amounts = {}
    for name in _PRICE_KEYS[:2]:
        amount = value.get(name, 0.0)
        if isinstance(amount, bool) or not isinstance(amount, int | float) or \
                not 0 <= amount < float("inf"):
            raise ConfigError(f"{where}.{name} must be a number >= 0, got {amount!r}")
        amounts[name] = float(amount)
    currency = value.get("currency", "USD")
    if not isinstance(currency, str) or _CURRENCY.fullmatch(currency) is None:
        raise ConfigError(f"{where}.currency must be a currency code of letters, digits and _ "
                          f"(e.g. USD), at most 16 characters, got {currency!r}")
    return ModelPrice(currency=currency, **amounts)


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

