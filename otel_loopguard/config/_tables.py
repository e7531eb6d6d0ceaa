"""A config's tables and its sources, each validated.

A tool's overrides, a model's prices, a template's budgets; the TOML file and the
``LOOPGUARD_*`` variables they are read from.

``LoopGuardConfig`` (the package) validates every value with these when it is made.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from otel_loopguard import environment_variables as _env
from otel_loopguard.config._fields import (
    BUDGET_LADDERS,
    FIELDS,
    TEMPLATE_THRESHOLDS,
    TOOL_KINDS,
    TOOL_THRESHOLDS,
    did_you_mean,
    parse_env_value,
)
from otel_loopguard.exceptions import ConfigError

logger = logging.getLogger("otel_loopguard.config")

__all__ = ["DEFAULT_ORIGIN", "ModelPrice", "ToolKind", "ToolOverride", "check_ladders",
           "check_template_table", "env_tools", "env_values", "read_toml", "unknown_setting",
           "validate", "validate_price", "validate_template", "validate_tool", "variable"]

ToolKind = Literal["read", "mutating", "poll", "exempt", "default"]
_TOOL_KINDS: Final = TOOL_KINDS
_TOOL_FLAGS: Final = ("shell", "editor")
_ENV_PREFIX: Final = "LOOPGUARD_"
_CURRENCY: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")
"""A currency code (``USD``, ``EUR``, ``credits``): it becomes a metric label value."""
_PRICE_KEYS: Final = ("input_per_million", "output_per_million", "currency")
_KNOWN_VARIABLES: Final = frozenset(_env.__all__)
_KNOWN_NAMES: Final = sorted(var[len(_ENV_PREFIX):] for var in _KNOWN_VARIABLES)
_WARNED: set[str] = set()
"""Misspelt ``LOOPGUARD_*`` variables already logged (each is logged once per process)."""
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


MAX_CONFIG_BYTES: Final = 1 << 20
"""The largest config file read (1 MiB): a config is a few KB, even with long price tables."""


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    # Imported here: ``check`` and ``serve`` without a config file never pay for the TOML
    # parser's import (its regular expressions are ~3 % of ``check``'s start-up).
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        with open(path, "rb") as handle:  # bounded: a wrong path (a device, a data file) too
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB, too large for "
                              "a config file (is it the right file?)")
        # Windows Notepad and PowerShell's ``Out-File -Encoding utf8`` start a file with a
        # byte-order mark, which TOML does not allow (the parser sees a stray character).
        data: dict[str, Any] = tomllib.loads(raw.removeprefix(codecs.BOM_UTF8).decode("utf-8"))
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


def unknown_setting(name: str) -> str:
    """Return the message for setting ``name`` that does not exist, with the closest one."""
    return (f"unknown setting {name!r}{did_you_mean(name, FIELDS)}; known settings are listed "
            "in docs/configuration.md")


def validate(name: str, value: Any) -> Any:
    rule = FIELDS.get(name)
    if rule is None:
        raise ConfigError(unknown_setting(name))
    return check_form(name, rule.check(name, value), name)


def check_form(name: str, value: Any, where: str) -> Any:
    """Return ``value`` of setting ``name``, checked for what its type does not say.

    The names in ``detectors``, the import path of ``near_duplicate_embedder``. ``where``
    names the source in the message: the setting, or its environment variable.
    """
    if name == "detectors":
        if not value:
            raise ConfigError(f"{where}: names no detector, which turns detection off; list "
                              f"some of {', '.join(FIELDS['detectors'].default)} (all by "
                              "default)")
        unknown = sorted(set(value) - set(FIELDS["detectors"].default))
        if unknown:
            raise ConfigError(f"{where}: unknown detector {unknown[0]!r}; known detectors are "
                              f"{', '.join(FIELDS['detectors'].default)}")
    elif name == "near_duplicate_embedder" and value and _IMPORT_PATH.fullmatch(value) is None:
        raise ConfigError(f"{where} must be an import path module:function "
                          f"(e.g. mypackage.embeddings:embed), got {value!r}")
    return value


_LADDERS: Final = (
    ("stagnation_warn", "stagnation_replan"), ("stagnation_replan", "stagnation_stop"),
    ("repeat_warn", "repeat_replan"), ("cycle_warn", "cycle_stop"), ("poll_warn", "poll_stop"),
    ("failure_permanent_warn", "failure_permanent_stop"),
    ("failure_retryable_warn", "failure_retryable_stop"),
    ("mutating_failure_warn", "mutating_failure_stop"), *BUDGET_LADDERS)
"""Each (lower, higher) pair of rungs: the higher must not come before the lower (a budget's
warn, too, must not come after its stop)."""

_WINDOWED: Final = (
    ("stagnation_warn", "window_size"), ("stagnation_replan", "window_size"),
    ("stagnation_stop", "window_size"), ("repeat_warn", "window_size"),
    ("repeat_replan", "window_size"), ("near_duplicate_min", "near_duplicate_window"))
"""Counts a detector reaches only within its window of recent calls, and that window."""


DEFAULT_ORIGIN: Final = "the default"
"""Where a setting nothing set comes from, in ``check_ladders``' ``origins``."""


def check_ladders(values: dict[str, Any], prefix: str = "", own: set[str] | None = None,
                  origins: Mapping[str, str] | None = None) -> None:
    """Reject a ladder whose higher step comes before its lower one, or outside its window.

    ``prefix`` and ``own`` are for a tool's table: its name, and the settings it sets itself
    (the others are the global values, which the message then says). ``origins`` is for the
    global values: where each came from (``from loopguard.toml``, ``from LOOPGUARD_...``,
    ``DEFAULT_ORIGIN``); a setting it leaves out was given in code.
    """
    for low, high in _LADDERS:
        lo, hi = values[low], values[high]
        if lo is not None and hi is not None and hi < lo:
            raise ConfigError(_misordered(prefix, (low, lo), (high, hi), own, origins or {}))
    for name, window in _WINDOWED:
        count, size = values[name], values[window]
        if count is not None and count > size:
            raise ConfigError(f"{prefix}{name} must be <= {window} ({size}), got {count}: the "
                              f"detector counts within the last {window} calls, so it would "
                              f"never be reached; raise {window} too")
    stop, handoffs = values["handoff_stop"], values["handoff_window"]
    if 2 * stop > handoffs:  # each closed cycle takes at least 2 handoffs (A -> B -> A)
        raise ConfigError(f"{prefix}handoff_stop must be <= handoff_window / 2 "
                          f"({handoffs // 2}), got {stop}: each closed cycle takes at least 2 of "
                          "the last handoff_window handoffs, so it would never be reached; "
                          "raise handoff_window too")


def _misordered(prefix: str, low: tuple[str, Any], high: tuple[str, Any],
                own: set[str] | None, origins: Mapping[str, str]) -> str:
    """Return the message for rung ``high`` set below rung ``low`` (each a name and value).

    When either value came from a file, a variable or the default, the message says so for
    both, and which one to set when the other was never set.
    """
    (low_name, lo), (high_name, hi) = low, high
    if own is not None or not (origins.get(low_name) or origins.get(high_name)):
        inherited = own is not None and high_name not in own
        return (f"{prefix}{high_name} must be >= {low_name} ({lo}), got {hi}"
                + (f" (the global {high_name}; set it for this tool too)" if inherited else ""))
    if origins.get(low_name) == origins.get(high_name):  # both from one file or variable
        return f"{low_name} = {lo} is above {high_name} = {hi} (both {origins[low_name]})"
    sides = [f"{name} = {value}" + (f" ({origins[name]})" if origins.get(name) else "")
             for name, value in (low, high)]
    unset = [name for name in (high_name, low_name) if origins.get(name) == DEFAULT_ORIGIN]
    return f"{sides[0]} is above {sides[1]}" + (f": set {unset[0]} too" if unset else "")


def validate_tool(tool: str, value: Any) -> ToolOverride:
    if not tool.strip():
        raise ConfigError("tools: a tool name must not be empty")
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
            raise ConfigError(f"{where}: unknown setting {name!r}"
                              f"{did_you_mean(str(name), allowed)}; {known}")
        checked[name] = FIELDS[name].check(f"{where}.{name}", item)
    return checked


def check_template_table(template: str, value: Any) -> dict[str, Any]:
    """Return a template's budgets, each checked on its own (its ladders are not checked)."""
    where = f"templates.{template}"
    if not template:
        raise ConfigError("templates: a prompt template name must not be empty")
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table of budgets, got {type(value).__name__}")
    return _checked(where, value, TEMPLATE_THRESHOLDS, "per-template settings are "
                    f"{', '.join(sorted(TEMPLATE_THRESHOLDS))}")


def validate_template(template: str, value: Any, merged: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a template's checked budgets; its ladders climb with the global values in place."""
    where = f"templates.{template}"
    checked = check_template_table(template, value)
    effective = {**merged, **checked}
    for low, high in BUDGET_LADDERS:
        lo, hi = effective[low], effective[high]
        if (low in checked or high in checked) and lo is not None and hi is not None and hi < lo:
            inherited = low if low not in checked else high if high not in checked else None
            raise ConfigError(f"{where}.{high} must be >= {low} ({lo}), got {hi}"
                              + (f" (the global {inherited}; set it for this template too)"
                                 if inherited else ""))
    return MappingProxyType(checked)


def validate_price(model: str, value: Any) -> ModelPrice:
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
        raise ConfigError(f"{where}: unknown setting {unknown[0]!r}"
                          f"{did_you_mean(str(unknown[0]), _PRICE_KEYS)}; a price table takes "
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


def variable(name: str) -> str:
    """Return the environment variable of setting ``name`` (``LOOPGUARD_<NAME>``)."""
    return _ENV_PREFIX + name.upper()


def env_values(environ: Mapping[str, str]) -> dict[str, Any]:
    _warn_misspelt(environ)
    values: dict[str, Any] = {}
    for name, rule in FIELDS.items():
        var = variable(name)
        raw = environ.get(var)
        if raw is not None and raw.strip() != "":
            values[name] = check_form(name, rule.check(var, parse_env_value(var, rule, raw)),
                                      var)
    return values


def _warn_misspelt(environ: Mapping[str, str]) -> None:
    """Log once each ``LOOPGUARD_*`` variable that is none of ours but close to one of ours.

    Such a variable is ignored (other programs may use the prefix too), so a typo would
    silently leave its setting at the default. Only a near miss is logged, not every unknown
    name, and never raised: an unrelated ``LOOPGUARD_*`` variable must not stop a process.
    """
    for var in environ:
        if var.startswith(_ENV_PREFIX) and var not in _KNOWN_VARIABLES and var not in _WARNED:
            # the names after the prefix: the shared prefix alone would make every name close
            import difflib  # only for a variable none of ours: not on every start-up

            close = difflib.get_close_matches(var[len(_ENV_PREFIX):], _KNOWN_NAMES, n=1)
            if close:
                _WARNED.add(var)
                logger.warning("%s is not a loopguard variable and is ignored (did you mean "
                               "%s%s?)", var, _ENV_PREFIX, close[0])


def env_tools(environ: Mapping[str, str]) -> dict[str, ToolOverride]:
    """Parse ``LOOPGUARD_TOOL_KINDS="poll_job=poll,deploy=mutating"``."""
    raw = environ.get(_env.LOOPGUARD_TOOL_KINDS, "").strip()
    tools: dict[str, ToolOverride] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        tool, sep, kind = item.partition("=")
        if not sep or not tool.strip() or kind.strip() not in _TOOL_KINDS:
            raise ConfigError(f"LOOPGUARD_TOOL_KINDS entries must look like tool=kind with kind "
                              f"one of {_TOOL_KINDS}, got {item!r}")
        if tool.strip() in tools:
            raise ConfigError(f"LOOPGUARD_TOOL_KINDS: {tool.strip()!r} is given twice")
        tools[tool.strip()] = ToolOverride(kind=kind.strip())  # type: ignore[arg-type]  # checked
    return tools
