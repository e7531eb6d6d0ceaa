"""``LoopGuardConfig``: defaults, construction, file, environment, precedence and validation."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import ConfigError, LoopGuardConfig, ToolOverride
from otel_loopguard.config._fields import FIELDS, TOOL_THRESHOLDS

TOML = """
[loopguard]
mode = "enforce"
stagnation_warn = 4
detectors = ["stagnation", "repeat"]
max_tool_calls_stop = 300

[loopguard.tools.poll_job]
kind = "poll"
poll_warn = 8

[loopguard.tools.heartbeat]
kind = "exempt"
"""


@pytest.fixture(name="config_file")
def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "loopguard.toml"
    path.write_text(TOML, encoding="utf-8")
    return path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestDefaults:
    def test_every_setting_has_its_default(self) -> None:
        """A bare config holds the default of every setting in ``FIELDS``."""
        config = LoopGuardConfig()
        assert dict(config.values) == {name: rule.default for name, rule in FIELDS.items()}
        assert config.tools == {}

    @pytest.mark.parametrize(("name", "value"), [
        ("mode", "observe"), ("run_key", "trace"), ("window_size", 12),
        ("stagnation_warn", 3), ("stagnation_replan", 4), ("stagnation_stop", 5),
        ("repeat_warn", 3), ("repeat_replan", 5), ("cycle_warn", 2), ("cycle_stop", 3),
        ("failure_permanent_same_args_stop", 2), ("failure_permanent_warn", 3),
        ("failure_permanent_stop", 4), ("failure_retryable_warn", 3),
        ("failure_retryable_stop", 5), ("mutating_failure_warn", 3),
        ("mutating_failure_stop", 4), ("reread_warn", 3), ("batch_warn", 3),
        ("handoff_window", 16), ("handoff_max_cycle", 5), ("handoff_stop", 2),
        ("near_duplicate_window", 6), ("near_duplicate_min", 3),
        ("near_duplicate_jaccard", 0.5), ("poll_warn", 5), ("poll_stop", 10),
        ("max_tool_calls_warn", 50), ("max_tool_calls_stop", None),
    ], ids=str)
    def test_spec_defaults(self, name: str, value: Any) -> None:
        """The defaults are the detection spec's starting contract."""
        assert getattr(LoopGuardConfig(), name) == value

    def test_unknown_attribute(self) -> None:
        """Reading a setting that does not exist raises ``AttributeError``."""
        with pytest.raises(AttributeError):
            _ = LoopGuardConfig().no_such_setting


class TestCreateAndReplace:
    def test_create_sets_values_and_tools(self) -> None:
        """``create`` takes settings as keywords and tools as tables."""
        config = LoopGuardConfig.create(mode="enforce", stagnation_warn=4,
                                        tools={"poll_job": {"kind": "poll", "poll_warn": 7}})
        assert config.mode == "enforce"
        assert config.stagnation_warn == 4
        assert config.tools["poll_job"] == ToolOverride(kind="poll",
                                                        thresholds={"poll_warn": 7})

    def test_every_way_the_docstring_gives_to_build_it_works(self, config_file: Path) -> None:
        """Each ``LoopGuardConfig...(...)`` form of the class docstring (what ``help()`` and an
        editor show) builds a config with settings given as it says (it named
        ``LoopGuardConfig(**values)``, which raises TypeError)."""
        doc = LoopGuardConfig.__doc__ or ""
        forms = re.findall(r"``(LoopGuardConfig(?:\.\w+)?\([^`]*\))``", " ".join(doc.split()))
        assert len(forms) >= 4
        names = {"values": {"mode": "enforce"}, "settings": {"mode": "enforce"},
                 "path": str(config_file), "environ": {"LOOPGUARD_MODE": "enforce"}}
        for form in forms:
            config = eval(form.replace("(...)", "()"), {"LoopGuardConfig": LoopGuardConfig,
                                                        **names})
            assert isinstance(config, LoopGuardConfig), form

    def test_create_accepts_tool_override_objects(self) -> None:
        """A ``ToolOverride`` works wherever a tool table does."""
        config = LoopGuardConfig.create(tools={"x": ToolOverride(kind="exempt")})
        assert config.tool_kind("x") == "exempt"

    def test_replace_returns_a_validated_copy(self) -> None:
        """``replace`` changes some settings in a new config and leaves the original alone."""
        base = LoopGuardConfig.create(tools={"x": {"kind": "read"}})
        changed = base.replace(stagnation_stop=7)
        assert changed.stagnation_stop == 7
        assert base.stagnation_stop == 5
        assert changed.tool_kind("x") == "read"
        with pytest.raises(ConfigError, match="stagnation_stop"):
            base.replace(stagnation_stop=1)

    def test_replace_tools(self) -> None:
        """``replace(tools=...)`` swaps the per-tool tables."""
        config = LoopGuardConfig().replace(tools={"y": {"kind": "poll"}})
        assert config.tool_kind("y") == "poll"

    def test_ints_given_as_whole_floats(self) -> None:
        """A whole float for an integer setting is accepted and stored as an int."""
        value = LoopGuardConfig.create(stagnation_warn=4.0).stagnation_warn
        assert value == 4 and isinstance(value, int)

    def test_threshold_honours_tool_override(self) -> None:
        """``threshold`` returns the tool's override, else the global value."""
        config = LoopGuardConfig.create(tools={"a": {"stagnation_stop": 6}})
        assert config.threshold("a", "stagnation_stop") == 6
        assert config.threshold("b", "stagnation_stop") == 5

    def test_tool_kind_unconfigured(self) -> None:
        """An unconfigured tool, or one with thresholds only, has no configured kind."""
        config = LoopGuardConfig.create(tools={"a": {"stagnation_stop": 6}})
        assert config.tool_kind("a") is None
        assert config.tool_kind("b") is None


class TestFrozen:
    def test_fields_cannot_be_assigned(self) -> None:
        """Assigning ``values`` or ``tools`` raises ``FrozenInstanceError``."""
        config = LoopGuardConfig()
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.values = {}  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.tools = {}  # type: ignore[misc]

    def test_settings_cannot_be_assigned(self) -> None:
        """Assigning a setting raises and leaves the value unchanged."""
        config = LoopGuardConfig()
        # TypeError on Pythons affected by CPython gh-105936 (frozen + slots dataclasses).
        with pytest.raises((AttributeError, TypeError)):
            config.mode = "enforce"
        assert config.mode == "observe"

    def test_values_mapping_is_read_only(self) -> None:
        """The mapping of settings cannot be changed in place."""
        config = LoopGuardConfig()
        with pytest.raises(TypeError):
            config.values["stagnation_warn"] = 1  # type: ignore[index]
        assert config.stagnation_warn == 3


class TestFromFile:
    def test_reads_loopguard_table_and_tools(self, config_file: Path) -> None:
        """A ``[loopguard]`` table and ``[loopguard.tools.<name>]`` tables are read."""
        config = LoopGuardConfig.from_file(config_file)
        assert config.mode == "enforce"
        assert config.stagnation_warn == 4
        assert config.detectors == ("stagnation", "repeat")
        assert config.max_tool_calls_stop == 300
        assert config.tool_kind("poll_job") == "poll"
        assert config.threshold("poll_job", "poll_warn") == 8
        assert config.tool_kind("heartbeat") == "exempt"

    def test_reads_top_level_settings(self, tmp_path: Path) -> None:
        """Settings may sit at the top level of the file, without the table."""
        config = LoopGuardConfig.from_file(_write(tmp_path, "cycle_stop = 4\n"))
        assert config.cycle_stop == 4

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file raises ``ConfigError`` naming it."""
        missing = tmp_path / "nope.toml"
        with pytest.raises(ConfigError, match=r"nope\.toml: config file not found"):
            LoopGuardConfig.from_file(missing)

    def test_a_file_too_large_for_a_config_is_not_read_whole(self, tmp_path: Path) -> None:
        """A wrong path (a data file, a device that never ends) is one error, not read whole."""
        path = _write(tmp_path, "# " + "x" * (1 << 20) + "\ncycle_stop = 4\n")
        with pytest.raises(ConfigError, match=r": larger than 1 MiB, too large for a config file"):
            LoopGuardConfig.from_file(path)

    def test_a_config_just_under_the_bound_is_read(self, tmp_path: Path) -> None:
        config = LoopGuardConfig.from_file(_write(
            tmp_path, "# " + "x" * ((1 << 20) - 40) + "\ncycle_stop = 4\n"))
        assert config.cycle_stop == 4

    @pytest.mark.parametrize(("text", "message"), [
        ("stagnation_warn = 1\n", "stagnation_warn must be an integer >= 2, got 1"),
        ("[loopguard.tools.x]\nkind = 'weird'\n", "tools.x.kind must be one of"),
        ("[loopguard.prices.m]\ninput_per_million = -1\n",
         "prices.m.input_per_million must be a number >= 0"),
    ], ids=["setting", "tool", "price"])
    def test_a_bad_value_in_the_file_names_the_file(self, tmp_path: Path, text: str,
                                                     message: str) -> None:
        path = _write(tmp_path, text)
        for read in (lambda: LoopGuardConfig.from_file(path),
                     lambda: LoopGuardConfig.load(path, environ={})):
            with pytest.raises(ConfigError) as info:
                read()
            assert str(info.value).startswith(f"{path}: {message}")

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """Broken TOML raises ``ConfigError`` naming the file and the position."""
        with pytest.raises(ConfigError, match=r"c\.toml: invalid TOML: .*line 1"):
            LoopGuardConfig.from_file(_write(tmp_path, "[loopguard\n"))

    def test_unknown_top_level_key(self, tmp_path: Path) -> None:
        """An unknown setting in the file is named in the error."""
        with pytest.raises(ConfigError, match=r"c\.toml: unknown setting 'windw'"):
            LoopGuardConfig.from_file(_write(tmp_path, "[loopguard]\nwindw = 3\n"))

    def test_unknown_tool_key(self, tmp_path: Path) -> None:
        """An unknown per-tool setting is named with its tool, and the allowed ones listed."""
        text = "[loopguard.tools.x]\nwindow_size = 3\n"
        with pytest.raises(ConfigError, match=r"tools\.x: unknown setting 'window_size'; "
                                              r"per-tool settings are kind, shell, editor and "
                                              r"batch_warn"):
            LoopGuardConfig.from_file(_write(tmp_path, text))

    def test_tools_must_be_a_table(self, tmp_path: Path) -> None:
        """``tools`` that is not a table is rejected."""
        with pytest.raises(ConfigError, match="tools must be a table"):
            LoopGuardConfig.from_file(_write(tmp_path, "[loopguard]\ntools = 3\n"))

    def test_out_of_range_in_file(self, tmp_path: Path) -> None:
        """A value out of range in the file names the setting and its range."""
        with pytest.raises(ConfigError, match=r"poll_stop must be an integer >= 2, got 0"):
            LoopGuardConfig.from_file(_write(tmp_path, "[loopguard]\npoll_stop = 0\n"))


class TestFromEnv:
    def test_reads_only_loopguard_variables(self) -> None:
        """``from_env`` reads ``LOOPGUARD_*`` variables from the given mapping only."""
        config = LoopGuardConfig.from_env({"LOOPGUARD_MODE": "enforce", "MODE": "x",
                                           "OTEL_SERVICE_NAME": "svc"})
        assert config.mode == "enforce"

    def test_typed_values(self) -> None:
        """Integers, floats, booleans and lists are parsed from their text."""
        config = LoopGuardConfig.from_env({
            "LOOPGUARD_STAGNATION_WARN": " 4 ", "LOOPGUARD_NEAR_DUPLICATE_JACCARD": "0.6",
            "LOOPGUARD_HINT_ON_WARN": "yes", "LOOPGUARD_READ_TOOLS": "cat, head ,",
        })
        assert config.stagnation_warn == 4
        assert config.near_duplicate_jaccard == 0.6
        assert config.hint_on_warn is True
        assert config.read_tools == ("cat", "head")

    def test_does_not_read_the_file(self, config_file: Path) -> None:
        """``from_env`` ignores ``LOOPGUARD_CONFIG_FILE``; ``load`` reads it."""
        config = LoopGuardConfig.from_env({"LOOPGUARD_CONFIG_FILE": str(config_file)})
        assert config.mode == "observe"

    @pytest.mark.parametrize(("env", "message"), [
        ({"LOOPGUARD_STAGNATION_WARN": "three"},
         "LOOPGUARD_STAGNATION_WARN must be an integer >= 2, got 'three'"),
        ({"LOOPGUARD_NEAR_DUPLICATE_JACCARD": "half"},
         "LOOPGUARD_NEAR_DUPLICATE_JACCARD must be a number >= 0 and <= 1"),
        ({"LOOPGUARD_HINT_ON_WARN": "maybe"}, "LOOPGUARD_HINT_ON_WARN must be a bool"),
        ({"LOOPGUARD_TOOL_KINDS": "poll_job:poll"},
         "LOOPGUARD_TOOL_KINDS entries must look like tool=kind"),
        ({"LOOPGUARD_TOOL_KINDS": "poll_job=polling"}, "got 'poll_job=polling'"),
        ({"LOOPGUARD_TOOL_KINDS": "a=read, =poll"}, "got '=poll'"),
        ({"LOOPGUARD_STAGNATION_WARN": "1"},
         "LOOPGUARD_STAGNATION_WARN must be an integer >= 2, got 1"),
        ({"LOOPGUARD_MODE": "enforced"}, "one of ('observe', 'enforce'), got 'enforced'"),
        ({"LOOPGUARD_DETECTORS": ","}, "LOOPGUARD_DETECTORS must be a list of strings"),
        ({"LOOPGUARD_DETECTORS": " , "}, "LOOPGUARD_DETECTORS must be a list of strings"),
        ({"LOOPGUARD_DETECTORS": "cycle,cycle"}, "LOOPGUARD_DETECTORS: 'cycle' is listed twice"),
    ], ids=["int-text", "float-text", "bool-text", "tool-kinds-sep", "tool-kinds-kind",
            "tool-kinds-no-tool",
            "int-range", "choice", "list-of-nothing", "list-of-blanks", "list-repeats"])
    def test_bad_values(self, env: dict[str, str], message: str) -> None:
        """A malformed variable raises ``ConfigError`` saying what is accepted."""
        with pytest.raises(ConfigError) as info:
            LoopGuardConfig.from_env(env)
        assert message in str(info.value)

    @pytest.mark.parametrize(("env", "var"), [
        ({"LOOPGUARD_MODE": "enforced"}, "LOOPGUARD_MODE"),
        ({"LOOPGUARD_METRICS_PORT": "70000"}, "LOOPGUARD_METRICS_PORT"),
        ({"LOOPGUARD_NEAR_DUPLICATE_EMBEDDER": "embed"}, "LOOPGUARD_NEAR_DUPLICATE_EMBEDDER"),
        ({"LOOPGUARD_DETECTORS": "stagnation,loops"}, "LOOPGUARD_DETECTORS"),
    ], ids=["choice", "range", "import-path", "detector-name"])
    def test_bad_values_name_the_variable(self, env: dict[str, str], var: str) -> None:
        """Every invalid variable value is reported under the variable's own name."""
        with pytest.raises(ConfigError, match=f"^{var}( must be|: unknown detector 'loops')"):
            LoopGuardConfig.from_env(env)
        with pytest.raises(ConfigError, match=f"^{var}"):  # load() says the same
            LoopGuardConfig.load(environ=env)

    @pytest.mark.parametrize("raw", ["off", "none", "OFF"])
    def test_embedder_off(self, raw: str) -> None:
        """``LOOPGUARD_NEAR_DUPLICATE_EMBEDDER=off`` (or ``none``) turns the embedder off."""
        env = {"LOOPGUARD_NEAR_DUPLICATE_EMBEDDER": raw}
        assert LoopGuardConfig.from_env(env).near_duplicate_embedder is None
        assert LoopGuardConfig.load(environ=env).near_duplicate_embedder is None


class TestLoadPrecedence:
    @pytest.fixture(name="sources")
    def _sources(self, tmp_path: Path) -> dict[str, Any]:
        path = _write(tmp_path, "[loopguard]\nstagnation_stop = 6\n")
        return {"file": path, "env": {"LOOPGUARD_STAGNATION_STOP": "7"}, "arg": 8}

    def test_default_alone(self) -> None:
        """With no source, the default applies."""
        assert LoopGuardConfig.load(environ={}).stagnation_stop == 5

    def test_file_beats_default(self, sources: dict[str, Any]) -> None:
        """A file value wins over the default."""
        assert LoopGuardConfig.load(sources["file"], environ={}).stagnation_stop == 6

    def test_env_beats_default(self, sources: dict[str, Any]) -> None:
        """An environment value wins over the default."""
        assert LoopGuardConfig.load(environ=sources["env"]).stagnation_stop == 7

    def test_env_beats_file(self, sources: dict[str, Any]) -> None:
        """An environment value wins over the file."""
        config = LoopGuardConfig.load(sources["file"], environ=sources["env"])
        assert config.stagnation_stop == 7

    def test_argument_beats_file(self, sources: dict[str, Any]) -> None:
        """An explicit argument wins over the file."""
        config = LoopGuardConfig.load(sources["file"], environ={},
                                      stagnation_stop=sources["arg"])
        assert config.stagnation_stop == 8

    def test_argument_beats_env(self, sources: dict[str, Any]) -> None:
        """An explicit argument wins over the environment."""
        config = LoopGuardConfig.load(environ=sources["env"], stagnation_stop=sources["arg"])
        assert config.stagnation_stop == 8

    def test_argument_beats_env_and_file(self, sources: dict[str, Any]) -> None:
        """With all three sources set, the argument wins."""
        config = LoopGuardConfig.load(sources["file"], environ=sources["env"],
                                      stagnation_stop=sources["arg"])
        assert config.stagnation_stop == 8

    def test_sources_merge_per_setting(self, sources: dict[str, Any]) -> None:
        """Each setting comes from the highest source that sets it; the others keep theirs."""
        env = {**sources["env"], "LOOPGUARD_MODE": "enforce"}
        config = LoopGuardConfig.load(sources["file"], environ=env, cycle_stop=4)
        assert (config.stagnation_stop, config.mode, config.cycle_stop) == (7, "enforce", 4)

    def test_config_file_variable(self, sources: dict[str, Any]) -> None:
        """Without ``config_file``, ``LOOPGUARD_CONFIG_FILE`` names the file."""
        config = LoopGuardConfig.load(environ={"LOOPGUARD_CONFIG_FILE": str(sources["file"])})
        assert config.stagnation_stop == 6

    def test_config_file_argument_beats_variable(self, sources: dict[str, Any],
                                                 tmp_path: Path) -> None:
        """An explicit ``config_file`` wins over ``LOOPGUARD_CONFIG_FILE``."""
        env = {"LOOPGUARD_CONFIG_FILE": str(tmp_path / "missing.toml")}
        assert LoopGuardConfig.load(sources["file"], environ=env).stagnation_stop == 6

    def test_ladders_checked_on_the_merged_result(self, tmp_path: Path) -> None:
        """A file and an environment that are each valid but disagree fail together."""
        path = _write(tmp_path, "[loopguard]\nstagnation_warn = 4\n")
        with pytest.raises(ConfigError, match=r"^stagnation_warn = 4 \(from .*c\.toml\) is "
                                              r"above stagnation_replan = 3 \(from "
                                              r"LOOPGUARD_STAGNATION_REPLAN\)$"):
            LoopGuardConfig.load(path, environ={"LOOPGUARD_STAGNATION_REPLAN": "3"})

    def test_a_file_completed_by_the_environment_is_valid(self, tmp_path: Path) -> None:
        """A file's ladder that only the merged values complete is not rejected on its own."""
        path = _write(tmp_path, "[loopguard]\nstagnation_warn = 6\n")
        env = {"LOOPGUARD_STAGNATION_REPLAN": "7", "LOOPGUARD_STAGNATION_STOP": "8"}
        config = LoopGuardConfig.load(path, environ=env)
        assert (config.stagnation_warn, config.stagnation_replan, config.stagnation_stop) == (
            6, 7, 8)
        config = LoopGuardConfig.load(path, environ={}, stagnation_replan=7, stagnation_stop=8)
        assert config.stagnation_replan == 7
        with pytest.raises(ConfigError, match=r"is above stagnation_replan = 4 \(the "
                                              r"default\): set stagnation_replan too$"):
            LoopGuardConfig.load(path, environ={})  # the file alone still fails

    def test_file_tables_are_checked_against_the_merged_values(self, tmp_path: Path) -> None:
        """A file's tool and template tables meet the merged globals, not the file's own."""
        path = _write(tmp_path, "[loopguard.tools.search]\nstagnation_warn = 6\n\n"
                                "[loopguard.templates.triage]\nmax_tool_calls_stop = 30\n")
        env = {"LOOPGUARD_STAGNATION_REPLAN": "7", "LOOPGUARD_STAGNATION_STOP": "8",
               "LOOPGUARD_MAX_TOOL_CALLS_WARN": "20"}
        config = LoopGuardConfig.load(path, environ=env)
        assert config.threshold("search", "stagnation_warn") == 6
        assert config.budget("triage", "max_tool_calls_stop") == 30

    def test_tool_kinds_from_env_merge_with_file_tools(self, config_file: Path) -> None:
        """``LOOPGUARD_TOOL_KINDS`` adds tools to those of the file."""
        config = LoopGuardConfig.load(config_file, environ={"LOOPGUARD_TOOL_KINDS": "x=read"})
        assert config.tool_kind("x") == "read"
        assert config.tool_kind("heartbeat") == "exempt"

    def test_tool_kind_from_env_keeps_file_thresholds(self, config_file: Path) -> None:
        """Setting a tool's kind through the environment keeps the file's thresholds for it."""
        config = LoopGuardConfig.load(config_file,
                                      environ={"LOOPGUARD_TOOL_KINDS": "poll_job=poll"})
        assert config.threshold("poll_job", "poll_warn") == 8


class TestValidation:
    @pytest.mark.parametrize(("values", "message"), [
        ({"mode": "enforced"}, "mode must be one of ('observe', 'enforce'), got 'enforced'"),
        ({"stagnation_warn": 1}, "stagnation_warn must be an integer >= 2, got 1"),
        ({"window_size": 5000}, "window_size must be an integer >= 2 and <= 1000, got 5000"),
        ({"near_duplicate_jaccard": 1.5},
         "near_duplicate_jaccard must be a number >= 0 and <= 1, got 1.5"),
        ({"run_ttl_seconds": 0.5},
         "run_ttl_seconds must be a number >= 1 and <= 31536000, got 0.5"),
        ({"stagnation_warn": 3.5}, "stagnation_warn must be an integer >= 2, got 3.5"),
        ({"stagnation_warn": True}, "stagnation_warn must be an integer >= 2, got True"),
        ({"stagnation_warn": "3"}, "stagnation_warn must be an integer >= 2, got '3'"),
        ({"hint_on_warn": "yes"}, "hint_on_warn must be a bool, got 'yes'"),
        ({"read_tools": "read_file"}, "read_tools must be a list of strings"),
        ({"read_tools": ["a", 1]}, "read_tools must be a list of strings"),
        ({"read_tools": ["a", " "]}, "read_tools: an empty name in ['a', ' ']"),
        ({"detectors": ["cycle", "repeat", "cycle"]}, "detectors: 'cycle' is listed twice"),
        ({"metrics_port": 70000}, "metrics_port must be an integer >= 0 and <= 65535 "
                                  "(or \"off\"), got 70000"),
        ({"stagnaton_warn": 3}, "unknown setting 'stagnaton_warn' (did you mean "
                                "'stagnation_warn'?); known settings are listed in "
                                "docs/configuration.md"),
    ], ids=["choice", "below-min", "above-max", "float-above-max", "float-below-min",
            "fractional-int", "bool-for-int", "str-for-int", "str-for-bool", "str-for-list",
            "mixed-list", "blank-in-list", "repeated-detector", "port-range", "unknown"])
    def test_bad_values_name_key_and_range(self, values: dict[str, Any], message: str) -> None:
        """A bad value raises ``ConfigError`` naming the setting and its allowed range."""
        with pytest.raises(ConfigError) as info:
            LoopGuardConfig.create(**values)
        assert str(info.value) == message or message in str(info.value)

    @pytest.mark.parametrize(("low", "high"), [
        ("stagnation_warn", "stagnation_replan"), ("stagnation_replan", "stagnation_stop"),
        ("repeat_warn", "repeat_replan"), ("cycle_warn", "cycle_stop"),
        ("poll_warn", "poll_stop"), ("failure_permanent_warn", "failure_permanent_stop"),
        ("failure_retryable_warn", "failure_retryable_stop"),
        ("mutating_failure_warn", "mutating_failure_stop"),
    ], ids=str)
    def test_ladder_order(self, low: str, high: str) -> None:
        """A higher rung set below a lower one is rejected, naming both."""
        lower = FIELDS[low].default
        with pytest.raises(ConfigError, match=f"{high} must be >= {low} \\({lower + 1}\\)"):
            LoopGuardConfig.create(**{low: lower + 1, high: lower})

    @pytest.mark.parametrize(("values", "message"), [
        ({"stagnation_stop": 15}, "stagnation_stop must be <= window_size (12), got 15"),
        ({"window_size": 4}, "stagnation_stop must be <= window_size (4), got 5"),
        ({"repeat_replan": 13}, "repeat_replan must be <= window_size (12), got 13"),
        ({"near_duplicate_min": 7},
         "near_duplicate_min must be <= near_duplicate_window (6), got 7"),
        ({"handoff_stop": 9}, "handoff_stop must be <= handoff_window / 2 (8), got 9"),
        ({"handoff_window": 6, "handoff_stop": 4},
         "handoff_stop must be <= handoff_window / 2 (3), got 4"),
    ], ids=["stagnation", "small-window", "repeat", "near-duplicate", "handoff",
            "handoff-small-window"])
    def test_a_rung_beyond_its_window_is_rejected(self, values: dict[str, Any],
                                                  message: str) -> None:
        """A count the detector's window can never hold is rejected, naming both settings."""
        with pytest.raises(ConfigError) as info:
            LoopGuardConfig.create(**values)
        assert str(info.value).startswith(message)

    def test_a_tool_rung_beyond_the_window_is_rejected(self) -> None:
        """A tool's own stagnation_stop above the run-wide window is rejected too."""
        with pytest.raises(ConfigError, match=r"^tools\.s\.stagnation_stop must be <= "
                                              r"window_size \(12\), got 30"):
            LoopGuardConfig.create(tools={"s": {"stagnation_stop": 30}})
        assert LoopGuardConfig.create(window_size=30, tools={"s": {"stagnation_stop": 30}})

    def test_ladder_rungs_may_be_equal(self) -> None:
        """Equal rungs are allowed (warn and stop on the same count: stop wins)."""
        assert LoopGuardConfig.create(cycle_warn=3, cycle_stop=3).cycle_stop == 3

    def test_optional_limits_accept_none(self) -> None:
        """Optional budgets accept None (off)."""
        assert LoopGuardConfig.create(max_tool_calls_warn=None).max_tool_calls_warn is None

    @pytest.mark.parametrize(("tools", "message"), [
        ({"x": {"kind": "polling"}}, "tools.x.kind must be one of ('read', 'mutating', "
                                     "'poll', 'exempt', 'default'), got 'polling'"),
        ({"x": {"window_size": 5}}, "tools.x: unknown setting 'window_size'"),
        ({"x": {"stagnation_warn": 1}}, "tools.x.stagnation_warn must be an integer >= 2, got 1"),
        ({"x": 3}, "tools.x must be a table, got int"),
    ], ids=["kind", "run-wide-setting", "range", "not-a-table"])
    def test_bad_tool_tables(self, tools: dict[str, Any], message: str) -> None:
        """Per-tool errors name the tool and the key."""
        with pytest.raises(ConfigError) as info:
            LoopGuardConfig.create(tools=tools)
        assert message in str(info.value)

    @pytest.mark.parametrize("name", sorted(TOOL_THRESHOLDS))
    def test_every_tool_threshold_accepted(self, name: str) -> None:
        """Every name in ``TOOL_THRESHOLDS`` may be overridden per tool with a value of its
        own: the tool gets it, other tools keep the global one."""
        rule = FIELDS[name]
        default = rule.default if rule.default is not None else 7
        candidates = [default + 1, default - 1, default * 2, default / 2, 7]
        if rule.kind == "int":
            candidates = [int(v) for v in candidates if v == int(v)]
        accepted = []
        for value in (v for v in candidates if v != rule.default):
            try:
                accepted.append((value, LoopGuardConfig.create(tools={"x": {name: value}})))
            except ConfigError:
                continue  # outside its range or its ladder: try another
        assert accepted, f"no override of {name} accepted"
        value, config = accepted[0]
        assert config.threshold("x", name) == value
        assert config.threshold("y", name) == rule.default

    def test_unknown_detector_name(self) -> None:
        """An unknown detector name is rejected."""
        with pytest.raises(ConfigError, match="detectors"):
            LoopGuardConfig.create(detectors=["stagnation", "stagnaton"])


class TestValuesTheRangesMiss:
    """NaN passes every comparison and infinity no bound; a stray key beside the table and a
    tool's own ladder must be caught too."""

    @pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
    def test_non_finite_numbers_are_rejected(self, value: float) -> None:
        with pytest.raises(ConfigError, match="run_ttl_seconds must be a number >= 1"):
            LoopGuardConfig.create(run_ttl_seconds=value)
        with pytest.raises(ConfigError, match="near_duplicate_jaccard must be a number"):
            LoopGuardConfig.create(near_duplicate_jaccard=value)

    def test_non_finite_numbers_from_the_environment(self) -> None:
        with pytest.raises(ConfigError, match="LOOPGUARD_RUN_TTL_SECONDS must be a number"):
            LoopGuardConfig.load(environ={"LOOPGUARD_RUN_TTL_SECONDS": "nan"})

    def test_a_key_outside_the_loopguard_table(self, tmp_path: Path) -> None:
        path = tmp_path / "c.toml"
        path.write_text("stagnaton_warn = 2\n[loopguard]\nstagnation_warn = 3\n",
                        encoding="utf-8")
        with pytest.raises(ConfigError, match="unknown setting 'stagnaton_warn' outside the "
                                              r"\[loopguard\] table"):
            LoopGuardConfig.from_file(path)

    def test_a_tools_own_ladder_is_checked(self) -> None:
        with pytest.raises(ConfigError, match=r"tools.search.stagnation_replan must be >= "
                                              r"stagnation_warn \(3\), got 2$"):
            LoopGuardConfig.create(tools={"search": {"stagnation_replan": 2}})
        with pytest.raises(ConfigError, match=r"tools.search.stagnation_replan must be >= "
                                              r"stagnation_warn \(6\), got 4 \(the global "
                                              r"stagnation_replan; set it for this tool too\)"):
            LoopGuardConfig.create(tools={"search": {"stagnation_warn": 6}})
        config = LoopGuardConfig.create(tools={"search": {"stagnation_warn": 2,
                                                          "stagnation_replan": 2}})
        assert config.threshold("search", "stagnation_replan") == 2


class TestWhatTheAuditFound:
    """Values that slipped past validation, or failed with an error that named nothing."""

    @pytest.mark.parametrize(("variable", "value", "message"), [
        ("LOOPGUARD_TOOL_KINDS", "a=poll,a=read", "LOOPGUARD_TOOL_KINDS: 'a' is given twice"),
        ("LOOPGUARD_COMMAND_KINDS", "make=read, make =mutating",
         "LOOPGUARD_COMMAND_KINDS: 'make' is given twice")])
    def test_a_key_given_twice_in_a_variable(self, variable: str, value: str,
                                             message: str) -> None:
        with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
            LoopGuardConfig.from_env({variable: value})

    @pytest.mark.parametrize(("table", "shape"), [
        ("tools", "tool name -> settings"), ("templates", "prompt template name -> budgets"),
        ("prices", "model name -> prices")])
    def test_a_table_that_is_no_mapping(self, table: str, shape: str) -> None:
        with pytest.raises(ConfigError, match=f"^{table} must be a mapping of {shape}, got list$"):
            LoopGuardConfig.create(**{table: [1]})

    def test_an_empty_tool_name(self) -> None:
        with pytest.raises(ConfigError, match=r"^tools: a tool name must not be empty$"):
            LoopGuardConfig.create(tools={" ": {"kind": "poll"}})

    def test_a_mistyped_setting_read_as_an_attribute(self) -> None:
        with pytest.raises(AttributeError, match="no setting 'stagnaton_warn' \\(did you mean "
                                                 "'stagnation_warn'\\?\\); known settings"):
            _ = LoopGuardConfig().stagnaton_warn

    def test_an_action_prints_as_its_label(self) -> None:
        from otel_loopguard import Action

        assert (str(Action.STOP), f"{Action.WARN}", f"{Action.REPLAN:d}") == ("stop", "warn", "2")
        assert Action.STOP == 3 and Action.STOP > Action.WARN

    def test_wrong_objects_for_the_entry_points_are_type_errors(self) -> None:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from otel_loopguard import Checker, LoopGuardSpanProcessor, ToolGuard

        with pytest.raises(TypeError, match=r"config must be a LoopGuardConfig.*downstream="):
            LoopGuardSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="processor must be the LoopGuardSpanProcessor"):
            ToolGuard(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="iter_spans"):
            list(Checker().run("traces.jsonl"))  # type: ignore[arg-type]
