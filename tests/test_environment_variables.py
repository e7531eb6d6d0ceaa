"""The ``LOOPGUARD_*`` constants, the env-var table in docs/configuration.md, and ``from_env``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import LoopGuardConfig, environment_variables
from otel_loopguard.config._fields import FIELDS, FieldRule, parse_env_value

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
NOT_SETTINGS = {"LOOPGUARD_CONFIG_FILE", "LOOPGUARD_TOOL_KINDS", "LOOPGUARD_ENABLED",
                "LOOPGUARD_SERVE_TOKEN", "LOOPGUARD_PURE_PYTHON"}
_ROW = re.compile(r"^\|\s*`(LOOPGUARD_[A-Z0-9_]+)`\s*\|(.*)$")


def _constants() -> dict[str, str]:
    return {name: getattr(environment_variables, name) for name in dir(environment_variables)
            if name.startswith("LOOPGUARD_")}


def _table() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", match.group(2))]
            rows[match.group(1)] = cells[:-1] if cells and cells[-1] == "" else cells
    return rows


def _non_default(name: str, rule: FieldRule) -> tuple[str, Any]:
    """Return (variable text, expected value) for a valid value that is not the default."""
    if rule.kind == "bool":
        return ("false", False) if rule.default else ("true", True)
    if rule.kind == "choice":
        choice = next(c for c in rule.choices if c != rule.default)
        return choice, choice
    if name == "near_duplicate_embedder":
        return "json:dumps", "json:dumps"
    if rule.kind == "str":
        return "192.0.2.7", "192.0.2.7"
    if rule.kind == "list":
        items = ("stagnation", "repeat") if name == "detectors" else ("alpha", "beta_*")
        return " alpha , beta_* " if name != "detectors" else "stagnation,repeat", items
    if rule.kind == "table":
        return ("terraform apply=mutating, make = default",
                {"terraform apply": "mutating", "make": "default"})
    if rule.kind == "float":
        value = 0.75 if rule.maximum is not None and rule.maximum <= 1 else 42.5
        return str(value), value
    value = (rule.default or int(rule.minimum or 0) or 1) + 1
    if name == "max_tool_calls_stop":  # at or above the default warn (50), which it must climb
        value = 60
    if name == "metrics_port":
        value = 9464
    return str(value), value


class TestConstants:
    def test_every_setting_has_a_constant(self) -> None:
        """Each ``FIELDS`` entry has a ``LOOPGUARD_<NAME>`` constant whose value is its name."""
        constants = _constants()
        for name in FIELDS:
            var = "LOOPGUARD_" + name.upper()
            assert constants.get(var) == var, var

    def test_no_constant_without_a_setting(self) -> None:
        """Every constant is a setting's variable, ``LOOPGUARD_CONFIG_FILE`` or ``_TOOL_KINDS``."""
        settings = {"LOOPGUARD_" + name.upper() for name in FIELDS}
        assert set(_constants()) == settings | NOT_SETTINGS

    def test_all_is_sorted_and_complete(self) -> None:
        """``__all__`` lists every constant, sorted."""
        assert environment_variables.__all__ == sorted(_constants())

    def test_internal_flag_is_not_a_variable(self) -> None:
        """``raise_internal_errors`` is a constructor flag for tests, not a variable."""
        assert not hasattr(environment_variables, "LOOPGUARD_RAISE_INTERNAL_ERRORS")

    @pytest.mark.parametrize("var", sorted(_constants()))
    def test_each_constant_has_a_docstring_with_default_and_allowed(self, var: str) -> None:
        """The module source documents each constant with its default and allowed values."""
        source = Path(environment_variables.__file__).read_text(encoding="utf-8")
        block = source.split(f'{var}: Final = "{var}"\n"""', 1)[1].split('"""', 1)[0]
        assert "Default:" in block
        assert "Allowed" in block


    @pytest.mark.parametrize("name", [n for n, r in FIELDS.items() if r.kind == "list"])
    def test_docstring_lists_the_whole_default(self, name: str) -> None:
        """A list setting's docstring names every entry of its default, in order."""
        var = "LOOPGUARD_" + name.upper()
        source = Path(environment_variables.__file__).read_text(encoding="utf-8")
        block = source.split(f'{var}: Final = "{var}"\n"""', 1)[1].split('"""', 1)[0]
        listed = block.split("Default:", 1)[1].split("Allowed", 1)[0]
        assert tuple(re.findall(r"``([^`]+)``", listed)) == FIELDS[name].default


class TestDocsTable:
    def test_rows_equal_constants(self) -> None:
        """The env-var table has one row per constant, no more, no less."""
        assert set(_table()) == set(_constants())

    def test_rows_have_five_columns(self) -> None:
        """Each row is: variable | setting | default | allowed | meaning."""
        for var, cells in _table().items():
            assert len(cells) == 4, (var, cells)
            assert all(cells), (var, cells)

    @pytest.mark.parametrize("name", list(FIELDS))
    def test_setting_column_names_the_setting(self, name: str) -> None:
        """The setting column of ``LOOPGUARD_<NAME>`` is ``NAME`` in lower case."""
        assert _table()["LOOPGUARD_" + name.upper()][0] == f"`{name}`"

    @pytest.mark.parametrize("name", list(FIELDS))
    def test_documented_default_is_the_real_default(self, name: str) -> None:
        """The default column, read as a variable value, equals the setting's real default."""
        rule = FIELDS[name]
        cell = _table()["LOOPGUARD_" + name.upper()][1]
        if rule.default is None:
            assert cell.startswith("unset")
            return
        assert cell.startswith("`") and cell.endswith("`"), cell
        value = parse_env_value("LOOPGUARD_" + name.upper(), rule, cell.strip("`"))
        assert value == rule.default


class TestFromEnv:
    @pytest.mark.parametrize("name", list(FIELDS))
    def test_honours_each_variable(self, name: str) -> None:
        """``LOOPGUARD_<NAME>`` set to a valid non-default value changes exactly that setting."""
        rule = FIELDS[name]
        text, expected = _non_default(name, rule)
        assert expected != rule.default
        config = LoopGuardConfig.from_env({"LOOPGUARD_" + name.upper(): text})
        assert config.values[name] == expected
        others = {k: v for k, v in config.values.items() if k != name}
        assert others == {k: v for k, v in LoopGuardConfig().values.items() if k != name}

    def test_tool_kinds(self) -> None:
        """``LOOPGUARD_TOOL_KINDS`` sets the kind of each listed tool."""
        config = LoopGuardConfig.from_env(
            {environment_variables.LOOPGUARD_TOOL_KINDS: "poll_job=poll, deploy = mutating"})
        assert config.tool_kind("poll_job") == "poll"
        assert config.tool_kind("deploy") == "mutating"
        assert config.tool_kind("other") is None

    def test_config_file(self, tmp_path: Path) -> None:
        """``LOOPGUARD_CONFIG_FILE`` names the TOML file that ``load`` reads."""
        path = tmp_path / "loopguard.toml"
        path.write_text("[loopguard]\nstagnation_warn = 4\n", encoding="utf-8")
        config = LoopGuardConfig.load(
            environ={environment_variables.LOOPGUARD_CONFIG_FILE: str(path)})
        assert config.stagnation_warn == 4

    @pytest.mark.parametrize("text", ["off", "none", "OFF"])
    def test_optional_limits_turn_off(self, text: str) -> None:
        """``off`` or ``none`` turns an optional limit off."""
        config = LoopGuardConfig.from_env({"LOOPGUARD_MAX_TOOL_CALLS_WARN": text})
        assert config.max_tool_calls_warn is None

    def test_empty_variable_is_unset(self) -> None:
        """An empty or blank variable leaves the default in place."""
        config = LoopGuardConfig.from_env({"LOOPGUARD_STAGNATION_WARN": "  "})
        assert config.stagnation_warn == FIELDS["stagnation_warn"].default
