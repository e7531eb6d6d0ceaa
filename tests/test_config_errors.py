"""``LoopGuardConfig``'s errors: every wrong input gets a one-line ``ConfigError`` that names
the setting, where its value came from, and what to do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_loopguard import ConfigError, LoopGuardConfig


class TestConfigFileEdges:
    def test_a_file_with_a_byte_order_mark_is_read(self, tmp_path: Path) -> None:
        """A TOML file saved with a UTF-8 byte-order mark (Windows Notepad) is read."""
        path = tmp_path / "loopguard.toml"
        path.write_bytes(b'\xef\xbb\xbf[loopguard]\nmode = "enforce"\n')
        assert LoopGuardConfig.from_file(path).mode == "enforce"
        assert LoopGuardConfig.load(path, environ={}).mode == "enforce"

    @pytest.mark.parametrize("blank", ["", "  ", "\t\n"], ids=["empty", "spaces", "tab"])
    def test_a_blank_config_file_variable_counts_as_unset(self, blank: str) -> None:
        """A blank ``LOOPGUARD_CONFIG_FILE`` reads no file, as an unset one."""
        config = LoopGuardConfig.load(environ={"LOOPGUARD_CONFIG_FILE": blank})
        assert config == LoopGuardConfig()


_SHAPES = {"tools": "tool name -> settings", "templates": "prompt template name -> budgets",
           "prices": "model name -> prices"}
_WAYS_IN = {
    "create": LoopGuardConfig.create,
    "replace": lambda **table: LoopGuardConfig().replace(**table),
    "load": lambda **table: LoopGuardConfig.load(environ={}, **table),
    "constructor": LoopGuardConfig,
}


class TestTablesGivenInCode:
    @pytest.mark.parametrize("way", list(_WAYS_IN))
    @pytest.mark.parametrize("table", list(_SHAPES))
    @pytest.mark.parametrize("wrong", [["a"], 3, "a"], ids=["list", "int", "str"])
    def test_a_table_that_is_no_mapping_is_a_config_error(self, way: str, table: str,
                                                           wrong: object) -> None:
        """Every way in refuses a ``tools``/``templates``/``prices`` that is no mapping with
        one message naming the table and what it maps."""
        with pytest.raises(ConfigError, match=f"^{table} must be a mapping of "
                                              f"{_SHAPES[table]}, got {type(wrong).__name__}$"):
            _WAYS_IN[way](**{table: wrong})

    @pytest.mark.parametrize("way", list(_WAYS_IN))
    @pytest.mark.parametrize("table", list(_SHAPES))
    def test_none_is_no_table(self, way: str, table: str) -> None:
        """``None`` for a table is an empty one, as ``create`` always took it."""
        assert getattr(_WAYS_IN[way](**{table: None}), table) == {}

    def test_replace_with_none_drops_a_table(self) -> None:
        """``replace(prices=None)`` returns the config without its prices."""
        config = LoopGuardConfig.create(prices={"m": {"input_per_million": 1.0}})
        assert config.replace(prices=None).prices == {}

    def test_from_mapping_refuses_what_is_no_mapping(self) -> None:
        """``from_mapping`` given pairs, not a mapping, names its source and what it takes."""
        with pytest.raises(ConfigError, match=r"^config must be a mapping of setting name -> "
                                              r"value, shaped like the TOML file, got list$"):
            LoopGuardConfig.from_mapping([("mode", "enforce")])  # type: ignore[arg-type]


class TestThresholdByName:
    @pytest.mark.parametrize("lookup", ["threshold", "budget"])
    def test_an_unknown_threshold_names_it_and_the_valid_ones(self, lookup: str) -> None:
        """``threshold(tool, name)`` of no setting raises ``ConfigError`` naming the name and
        the per-tool thresholds; it is still the ``KeyError`` it was."""
        config = LoopGuardConfig.create(tools={"a": {"kind": "poll"}})
        args = ("a", "stagnaton_warn") if lookup == "threshold" else (None, "stagnaton_warn")
        with pytest.raises(ConfigError, match=r"^unknown threshold 'stagnaton_warn'; the "
                                              r"per-tool thresholds are batch_warn, .*, "
                                              r"stagnation_warn$") as info:
            getattr(config, lookup)(*args)
        assert isinstance(info.value, KeyError)
        assert str(info.value).startswith("unknown")  # the message, not KeyError's repr


class TestBudgetLadders:
    @pytest.mark.parametrize(("settings", "message"), [
        ({"max_tool_calls_warn": 100, "max_tool_calls_stop": 50},
         "max_tool_calls_stop must be >= max_tool_calls_warn (100), got 50"),
        ({"max_steps_warn": 9, "max_steps_stop": 8},
         "max_steps_stop must be >= max_steps_warn (9), got 8"),
        ({"max_run_seconds_warn": 600, "max_run_seconds_stop": 60},
         "max_run_seconds_stop must be >= max_run_seconds_warn (600.0), got 60.0"),
        ({"max_calls_per_tool_warn": 4, "max_calls_per_tool_stop": 3},
         "max_calls_per_tool_stop must be >= max_calls_per_tool_warn (4), got 3"),
    ], ids=["tool-calls", "steps", "seconds", "calls-per-tool"])
    def test_a_global_budget_warn_above_its_stop_is_refused(self, settings: dict[str, object],
                                                            message: str) -> None:
        """A global budget's warn above its stop is refused, naming both, as a template's is."""
        with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
            LoopGuardConfig.create(**settings)

    def test_a_stop_alone_under_the_default_warn_is_refused(self) -> None:
        """``max_tool_calls_stop = 30`` alone is below the default warn of 50: refused, and
        accepted once the warn is set at or below it, or off."""
        with pytest.raises(ConfigError, match=r"max_tool_calls_stop.*max_tool_calls_warn"):
            LoopGuardConfig.create(max_tool_calls_stop=30)
        assert LoopGuardConfig.create(max_tool_calls_warn=30, max_tool_calls_stop=30)
        assert LoopGuardConfig.create(max_tool_calls_warn=None, max_tool_calls_stop=30)

    def test_a_tools_budget_warn_above_its_stop_is_refused(self) -> None:
        """A tool table's ``max_calls_per_tool_warn`` above its stop is refused, naming the
        tool; a tool's stop under a global warn says the warn is the global one."""
        with pytest.raises(ConfigError, match=r"^tools\.search\.max_calls_per_tool_stop must "
                                              r"be >= max_calls_per_tool_warn \(100\), got 10"):
            LoopGuardConfig.create(tools={"search": {"max_calls_per_tool_warn": 100,
                                                     "max_calls_per_tool_stop": 10}})
        with pytest.raises(ConfigError, match=r"^tools\.search\.max_calls_per_tool_stop must "
                                              r"be >= max_calls_per_tool_warn \(20\), got 10"):
            LoopGuardConfig.create(max_calls_per_tool_warn=20,
                                   tools={"search": {"max_calls_per_tool_stop": 10}})
