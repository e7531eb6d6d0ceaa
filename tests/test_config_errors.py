"""``LoopGuardConfig``'s errors: every wrong input gets a one-line ``ConfigError`` that names
the setting, where its value came from, and what to do."""

from __future__ import annotations

import logging
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
        with pytest.raises(ConfigError, match=r"^unknown threshold 'stagnaton_warn' \(did "
                                              r"you mean 'stagnation_warn'\?\); the "
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


class TestLadderSources:
    """A misordered ladder says where each of its values came from, and which to set."""

    def test_a_file_value_above_a_default(self, tmp_path: Path) -> None:
        """A file's ``stagnation_warn = 6`` over the default replan names the file and the
        default, and says to set the replan too."""
        path = tmp_path / "cfg.toml"
        path.write_text("[loopguard]\nstagnation_warn = 6\n", encoding="utf-8")
        message = (f"stagnation_warn = 6 (from {path}) is above stagnation_replan = 4 (the "
                   "default): set stagnation_replan too")
        for build in (lambda: LoopGuardConfig.from_file(path),
                      lambda: LoopGuardConfig.load(path, environ={}),
                      lambda: LoopGuardConfig.load(environ={"LOOPGUARD_CONFIG_FILE": str(path)})):
            with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
                build()

    def test_a_variable_above_a_default(self) -> None:
        """``LOOPGUARD_STAGNATION_WARN=6`` is named as the variable, from ``from_env`` and
        ``load``."""
        message = ("stagnation_warn = 6 (from LOOPGUARD_STAGNATION_WARN) is above "
                   "stagnation_replan = 4 (the default): set stagnation_replan too")
        env = {"LOOPGUARD_STAGNATION_WARN": "6"}
        for build in (LoopGuardConfig.from_env, lambda e: LoopGuardConfig.load(environ=e)):
            with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
                build(env)

    def test_a_default_above_a_variable(self) -> None:
        """A stop set below the default warn says to set the warn."""
        with pytest.raises(ConfigError, match=re.escape(
                "max_tool_calls_warn = 50 (the default) is above max_tool_calls_stop = 30 "
                "(from LOOPGUARD_MAX_TOOL_CALLS_STOP): set max_tool_calls_warn too")):
            LoopGuardConfig.load(environ={"LOOPGUARD_MAX_TOOL_CALLS_STOP": "30"})

    def test_both_rungs_from_one_file(self, tmp_path: Path) -> None:
        """Both rungs set in one file name it once."""
        path = tmp_path / "cfg.toml"
        path.write_text("stagnation_warn = 4\nstagnation_replan = 3\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(
                f"stagnation_warn = 4 is above stagnation_replan = 3 (both from {path})")):
            LoopGuardConfig.from_file(path)

    def test_a_setting_in_code_above_a_default(self) -> None:
        """A value given in code is not blamed on a source; the default rung still is named."""
        with pytest.raises(ConfigError, match=re.escape(
                "stagnation_warn = 6 is above stagnation_replan = 4 (the default): set "
                "stagnation_replan too")):
            LoopGuardConfig.create(stagnation_warn=6)

    def test_both_rungs_in_code_keep_the_short_message(self) -> None:
        """Both rungs given in code: the message the docs' table shows."""
        with pytest.raises(ConfigError, match=r"^stagnation_replan must be >= stagnation_warn "
                                              r"\(4\), got 3$"):
            LoopGuardConfig.create(stagnation_warn=4, stagnation_replan=3)


class TestMisspeltNames:
    def test_a_misspelt_keyword_gets_the_closest_setting(self) -> None:
        """``create(stagnaton_warn=3)`` suggests ``stagnation_warn``."""
        with pytest.raises(ConfigError, match=re.escape(
                "unknown setting 'stagnaton_warn' (did you mean 'stagnation_warn'?); known "
                "settings are listed in docs/configuration.md")):
            LoopGuardConfig.create(stagnaton_warn=3)

    def test_a_misspelt_file_setting_gets_the_closest_setting(self, tmp_path: Path) -> None:
        """A file's ``max_tool_call_warn`` suggests ``max_tool_calls_warn``, naming the file."""
        path = tmp_path / "loopguard.toml"
        path.write_text("[loopguard]\nmax_tool_call_warn = 80\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(
                f"{path}: unknown setting 'max_tool_call_warn' (did you mean "
                "'max_tool_calls_warn'?)")):
            LoopGuardConfig.from_file(path)

    def test_a_misspelt_mapping_key_gets_the_closest_setting(self) -> None:
        """``from_mapping`` suggests too."""
        with pytest.raises(ConfigError, match=re.escape("(did you mean 'window_size'?)")):
            LoopGuardConfig.from_mapping({"windw_size": 3})

    @pytest.mark.parametrize(("table", "key", "close"), [
        ("tools", "pol_stop", "poll_stop"), ("templates", "max_tool_calls_stp",
                                             "max_tool_calls_stop"),
        ("prices", "input_per_milion", "input_per_million")])
    def test_a_misspelt_key_in_a_table_gets_the_closest(self, table: str, key: str,
                                                         close: str) -> None:
        """A tool's, template's or price's misspelt key suggests the closest of that table."""
        with pytest.raises(ConfigError, match=re.escape(f"(did you mean {close!r}?)")):
            LoopGuardConfig.create(**{table: {"x": {key: 3}}})

    def test_no_suggestion_when_nothing_is_close(self) -> None:
        """A name close to no setting gets no suggestion."""
        with pytest.raises(ConfigError, match=r"^unknown setting 'qqqq'; known settings"):
            LoopGuardConfig.create(qqqq=3)

    def test_a_misspelt_variable_is_logged_once_and_ignored(
            self, caplog: pytest.LogCaptureFixture) -> None:
        """``LOOPGUARD_STAGNATON_WARN`` is ignored, with one warning that suggests the real
        variable; a ``LOOPGUARD_*`` name close to none of ours is not logged."""
        env = {"LOOPGUARD_STAGNATON_WARN_T": "9", "LOOPGUARD_FRAMEWORK_FAMILY": "x"}
        with caplog.at_level(logging.WARNING, logger="otel_loopguard.config"):
            assert LoopGuardConfig.from_env(env) == LoopGuardConfig()
            assert LoopGuardConfig.load(environ=env) == LoopGuardConfig()
        assert [r.getMessage() for r in caplog.records] == [
            "LOOPGUARD_STAGNATON_WARN_T is not a loopguard variable and is ignored (did you "
            "mean LOOPGUARD_STAGNATION_WARN?)"]


class TestDurationBounds:
    """Seconds settings and flags stop at a year: ``1e10`` overflowed a socket timeout in
    ``serve`` (every request got an empty reply), ``1e300`` a conversion at start."""

    @pytest.mark.parametrize("name", ["run_ttl_seconds", "max_run_seconds_warn",
                                      "max_run_seconds_stop"])
    @pytest.mark.parametrize("value", [1e10, 1e300, 31_536_001])
    def test_a_seconds_setting_over_a_year_is_refused(self, name: str, value: float) -> None:
        """A seconds setting over a year is refused, naming the bound."""
        with pytest.raises(ConfigError, match=f"^{name} must be a number >= [01] and <= "
                                              "31536000"):
            LoopGuardConfig.create(**{name: value})

    def test_a_year_is_accepted(self) -> None:
        """Exactly a year is accepted."""
        config = LoopGuardConfig.create(run_ttl_seconds=31_536_000,
                                        max_run_seconds_stop=31_536_000)
        assert config.run_ttl_seconds == 31_536_000.0

    def test_a_variable_over_a_year_is_refused(self) -> None:
        """``LOOPGUARD_RUN_TTL_SECONDS=1e300`` is refused under the variable's name."""
        with pytest.raises(ConfigError, match=r"^LOOPGUARD_RUN_TTL_SECONDS must be a number "
                                              r">= 1 and <= 31536000, got 1e\+300$"):
            LoopGuardConfig.load(environ={"LOOPGUARD_RUN_TTL_SECONDS": "1e300"})

    @pytest.mark.parametrize("name", ["request_timeout_seconds", "reorder_window_seconds"])
    def test_receiver_durations_over_a_year_are_refused(self, name: str) -> None:
        """``ReceiverOptions`` refuses a request timeout or reorder window over a year."""
        from otel_loopguard.receiver import ReceiverOptions

        with pytest.raises(ValueError, match=f"^{name} must be .*<= 31536000 \\(one year\\), "
                                             "got 10000000000.0$"):
            ReceiverOptions(**{name: 1e10})  # type: ignore[arg-type]

    @pytest.mark.parametrize("flag", ["--request-timeout", "--reorder-window", "--run-ttl"])
    def test_serve_flags_over_a_year_are_usage_errors(
            self, flag: str, capsys: pytest.CaptureFixture[str]) -> None:
        """``serve --request-timeout 1e10`` is a usage error (exit 2) naming the flag and the
        bound, before anything listens."""
        from otel_loopguard.cli import _build_parser

        with pytest.raises(SystemExit) as exited:
            _build_parser().parse_args(["serve", flag, "1e10"])
        assert exited.value.code == 2
        assert (f"argument {flag}: must be a finite number >= 0 and <= 31536000 (one year), "
                "got '1e10'") in capsys.readouterr().err
