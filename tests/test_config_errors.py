"""``LoopGuardConfig``'s errors: every wrong input gets a one-line ``ConfigError`` that names
the setting, where its value came from, and what to do."""

from __future__ import annotations

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
