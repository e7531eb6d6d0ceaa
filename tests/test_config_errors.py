"""``LoopGuardConfig``'s errors: every wrong input gets a one-line ``ConfigError`` that names
the setting, where its value came from, and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard import LoopGuardConfig


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
